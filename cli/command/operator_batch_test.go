package command

import (
	"fmt"
	"strings"
	"testing"
	"time"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// realm run purge --older-than lists the ended runs idle that long (of
// --workflow), deletes nothing without --force (--dry-run says so
// explicitly), and deletes exactly those with it.
func TestRunPurgeOlderThanListsThenDeletesOldEndedRunsOfOneWorkflow(t *testing.T) {
	t.Parallel()
	eachBackendRaw(t, func(t *testing.T, e *maintEnv) {
		other := strings.Replace(waitingWorkflow, "id: waiting", "id: other", 1)
		if resp, err := e.engine.RegisterWorkflow(e.ctx(), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: []byte(other), Path: "workflow.yaml"}}); err != nil || !resp.GetRegistered() {
			t.Fatalf("register: %v %v", err, resp.GetReport().GetErrors())
		}
		old1, old2 := e.answered("old1", "k1", ""), e.answered("old2", "k2", "")
		open := e.started("open", "k3", "")
		otherRun, err := e.engine.StartRun(e.ctx(), &realmv1.StartRunRequest{WorkflowId: "other"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.engine.ExecuteStep(e.ctx(), &realmv1.ExecuteStepRequest{RunId: otherRun.GetReply().GetRunId(), Command: "answer"}); err != nil {
			t.Fatal(err)
		}
		e.clock.Set(time.Date(2026, 10, 2, 4, 0, 0, 0, time.UTC))
		young := e.answered("young", "k4", "")

		exists := func(run string) bool {
			_, _, err := e.raw.RunDocument(e.ctx(), run)
			return err == nil
		}
		for _, args := range [][]string{
			{"run", "purge", "--older-than", "1h", "--workflow", "waiting"},
			{"run", "purge", "--older-than", "1h", "--workflow", "waiting", "--dry-run"},
		} {
			got := e.realm(nil, args...)
			out := e.masked(got.stdout)
			if got.code != 0 || got.stderr != "" ||
				!strings.Contains(out, "  • <old1>  (completed, ") || !strings.Contains(out, "  • <old2>  (completed, ") ||
				strings.Contains(out, "<open>") || strings.Contains(out, "<young>") || strings.Contains(out, otherRun.GetReply().GetRunId()) ||
				!strings.Contains(out, "\n2 run(s) WOULD be purged (") ||
				!strings.HasSuffix(out, "None of the 2 selected run(s) are resumable via 'realm run resume'.\nRe-run with --force to actually delete.\n") {
				t.Fatalf("%v: exit %d\n%s\nstderr %q", args, got.code, out, got.stderr)
			}
			if !exists(old1) || !exists(old2) {
				t.Fatalf("%v deleted a run", args)
			}
		}
		got := e.realm(nil, "run", "purge", "--older-than", "1h", "--workflow", "waiting", "--force")
		out := e.masked(got.stdout)
		if got.code != 0 || !strings.Contains(out, "  ✓ <old1>  (completed, ") || !strings.Contains(out, "\nPurged 2/2 run(s) (") ||
			!strings.HasSuffix(out, " KB freed, store-reported). 0 already gone, 0 blocked, 0 failed.\n") {
			t.Fatalf("--force: exit %d\n%s\nstderr %q", got.code, out, got.stderr)
		}
		if exists(old1) || exists(old2) || !exists(open) || !exists(young) || !exists(otherRun.GetReply().GetRunId()) {
			t.Errorf("--force deleted the wrong runs: old1 %v old2 %v open %v young %v other %v",
				exists(old1), exists(old2), exists(open), exists(young), exists(otherRun.GetReply().GetRunId()))
		}
		want(t, e.realm(nil, "run", "purge", "--older-than", "1h", "--workflow", "waiting"), 0, lines("No eligible runs found to purge."), "")
		// Keeping the single-run form: naming a run previews it.
		if got := e.realm(nil, "run", "purge", young); got.code != 0 || !strings.HasPrefix(got.stdout, "1 run(s) WOULD be purged:") {
			t.Errorf("purge <run> = %v", got)
		}
	})
}

// realm run drain --all and --expired walk the store; with nothing owed
// they say so.
func TestRunDrainAllWithNothingOwedSaysSo(t *testing.T) {
	t.Parallel()
	eachBackendRaw(t, func(t *testing.T, e *maintEnv) {
		e.answered("done", "k1", "")
		want(t, e.realm(nil, "run", "drain", "--all"), 0,
			lines("Runs that WOULD be drained (each listed as it is found):", "No runs with an actionable pending finalizer."), "")
		want(t, e.realm(nil, "run", "drain", "--expired", "--force"), 0,
			lines("Draining (each run is listed as it is done):", "No runs with an actionable pending finalizer."), "")
	})
}

func TestOperatorBatchRefusals(t *testing.T) {
	t.Parallel()
	realm := runner("127.0.0.1:1") // every refusal comes before any call
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"run", "drain"}, "Provide a <run-id>, or use --all for batch mode."},
		{[]string{"run", "drain", "r1", "--all"}, "Cannot combine a <run-id> with --all. Use one or the other."},
		{[]string{"run", "drain", "r1", "--all", "--expired"}, "Cannot combine a <run-id> with --all. Use one or the other."},
		{[]string{"run", "drain", "--all", "--void", "audit"}, "--void <finalizer> names a finalizer of one run: give the <run-id> (realm run drain <run-id> --void <finalizer>); it cannot be combined with --all."},
		{[]string{"run", "drain", "r1", "--void", "audit", "--force"}, "--void acts on its own (no --force needed); it cannot be combined with --force or --expired."},
		{[]string{"run", "drain", "r1", "--void", "audit", "--expired"}, "--void acts on its own (no --force needed); it cannot be combined with --force or --expired."},
		{[]string{"run", "purge"}, "Provide a <run-id> to purge, or use --older-than for batch mode."},
		{[]string{"run", "purge", "--workflow", "w"}, "Provide a <run-id> to purge, or use --older-than for batch mode."},
		{[]string{"run", "purge", "r1", "--older-than", "1h"}, "Cannot combine a <run-id> with --older-than. Use one or the other."},
		{[]string{"run", "purge", "r1", "--workflow", "w"}, "--workflow is only valid with --older-than."},
		{[]string{"run", "purge", "--older-than", "soon"}, "Invalid duration 'soon'. Use format: <number>(d|h|m), e.g. 30d, 6h, 10m"},
		{[]string{"run", "purge", "--older-than", "0m"}, "Invalid duration '0m'. Use format: <number>(d|h|m), e.g. 30d, 6h, 10m"},
		{[]string{"run", "purge", "--older-than", "1h", "--force", "--dry-run"}, "--force and --dry-run contradict each other: --force deletes, --dry-run (the default) only lists. Use one."},
		{[]string{"run", "resume", "r1", "--force"}, "--from <step> is required: the failed step to run again."},
	} {
		t.Run(fmt.Sprint(c.args), func(t *testing.T) {
			want(t, realm(nil, c.args...), 1, "", c.stderr+"\n")
		})
	}
}

// owingWorkflow ends once answered and then owes a cleanup step no runner
// serves.
const owingWorkflow = "id: owing\nname: Owing\nversion: 1\nsteps:\n  answer:\n    description: Answer.\n    execution: agent\n  audit:\n    description: Audit.\n    execution: finalizer\n    handler: audit\n    on_outcome: always\n"

// realm run drain --all lists an ended run owing cleanup; --void marks the
// cleanup voided (without --force), after which nothing is owed.
func TestRunDrainAllListsOwedCleanupAndVoidClearsIt(t *testing.T) {
	t.Parallel()
	eachBackendRaw(t, func(t *testing.T, e *maintEnv) {
		if resp, err := e.engine.RegisterWorkflow(e.ctx(), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: []byte(owingWorkflow), Path: "workflow.yaml"}}); err != nil || !resp.GetRegistered() {
			t.Fatalf("register: %v %v", err, resp.GetReport().GetErrors())
		}
		r, err := e.engine.StartRun(e.ctx(), &realmv1.StartRunRequest{WorkflowId: "owing"})
		if err != nil {
			t.Fatal(err)
		}
		run := r.GetReply().GetRunId()
		if _, err := e.engine.ExecuteStep(e.ctx(), &realmv1.ExecuteStepRequest{RunId: run, Command: "answer"}); err != nil {
			t.Fatal(err)
		}
		want(t, e.realm(nil, "run", "drain", "--all"), 0, lines(
			"Runs that WOULD be drained (each listed as it is found):",
			"  • "+run,
			"1 run(s) WOULD be drained.",
			"Re-run with --force to actually drain them."), "")
		want(t, e.realm(nil, "run", "drain", run, "--void", "nope"), 1, "", fmt.Sprintf("No finalizer ledger entry named 'nope' on run '%s'.\n", run))
		want(t, e.realm(nil, "run", "drain", run, "--void", "audit"), 0, lines("finalizer 'audit' voided by operator"), "")
		want(t, e.realm(nil, "run", "drain", "--all", "--force"), 0,
			lines("Draining (each run is listed as it is done):", "No runs with an actionable pending finalizer."), "")
	})
}
