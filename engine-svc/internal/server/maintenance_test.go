package server_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// answerWorkflow has one agent step: a run ends completed once answered.
const answerWorkflow = "id: answer\nname: Answer\nversion: 1\nsteps:\n  answer:\n    description: Answer.\n    execution: agent\n"

// startKeyed starts a run of answerWorkflow under an idempotency key.
func (e *env) startKeyed(t *testing.T, key, onTerminal string) string {
	t.Helper()
	resp, err := e.client.StartRun(ctx(t), &realmv1.StartRunRequest{WorkflowId: "answer", IdempotencyKey: key, OnTerminalMatch: onTerminal})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetReply().GetRunId()
}

// answered starts a run under key and answers its step: it ends completed
// with an output, an evidence entry, index entries and a key pointer.
func (e *env) answered(t *testing.T, key, onTerminal string) string {
	t.Helper()
	run := e.startKeyed(t, key, onTerminal)
	if r := step(t, e, run, "answer", map[string]any{"text": "hi"}); r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
		t.Fatalf("answer: %v", r)
	}
	return run
}

// doc reads a run's stored version and document past the engine.
func (e *env) doc(t *testing.T, run string) (int64, map[string]any) {
	t.Helper()
	snap, err := e.st.LoadRun(ctx(t), run)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(snap.Doc, &d); err != nil {
		t.Fatal(err)
	}
	return snap.Version, d
}

// editDoc rewrites a stored run document in place, version unchanged, as
// an older release (or a hand) left it.
func (e *env) editDoc(t *testing.T, run string, edit func(map[string]any)) {
	t.Helper()
	_, d := e.doc(t, run)
	edit(d)
	b, _ := json.Marshal(d)
	if err := e.rc.HSet(ctx(t), e.st.RunKey(run), "doc", b).Err(); err != nil {
		t.Fatal(err)
	}
}

func (e *env) gc(t *testing.T, req *realmv1.GcRunsRequest) *realmv1.GcRunsResponse {
	t.Helper()
	resp, err := e.client.GcRuns(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func residueSet(resp *realmv1.GcRunsResponse) []string {
	var out []string
	for _, r := range resp.GetResidue() {
		out = append(out, r.GetKind()+" "+r.GetRunId()+" "+r.GetKey())
	}
	slices.Sort(out)
	return out
}

func exists(t *testing.T, e *env, keys ...string) int64 {
	t.Helper()
	n, err := e.rc.Exists(ctx(t), keys...).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestGcReapsRunLessResidueOldEnoughAndOnlyWithForce(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, []byte(answerWorkflow))
		crashed := e.answered(t, "crashed", "")
		purged := e.answered(t, "purged", "")
		live := e.startKeyed(t, "live", "")
		if resp, err := e.client.PurgeRun(ctx(t), &realmv1.PurgeRunRequest{RunId: purged, Force: true}); err != nil || !resp.GetPurged() {
			t.Fatalf("purge: %v %v", resp, err)
		}
		keyOf := func(k string) string { return e.st.IdemKeyName("answer\x1f" + k) }
		// Purge takes the run's idempotency key with it.
		if exists(t, e, keyOf("purged")) != 0 {
			t.Errorf("purge left the run's idempotency key")
		}
		// A crash: the run document goes; its outputs, evidence, index
		// entry and key stay.
		if err := e.rc.Del(ctx(t), e.st.RunKey(crashed)).Err(); err != nil {
			t.Fatal(err)
		}
		b := e.st.BucketOf(crashed)
		ageless := []string{
			"key " + crashed + " " + keyOf("crashed"),
			"outputs " + crashed + " " + e.st.OutputsKey(crashed),
		}
		slices.Sort(ageless)
		all := append(slices.Clone(ageless),
			"evidence "+crashed+" "+e.st.EvidenceKey(crashed),
			"index "+crashed+" "+e.st.IndexKey(b, "index"),
			// Ended and owing nothing, it waited to be packed.
			"index "+crashed+" "+e.st.IndexKey(b, "pack"))
		slices.Sort(all)

		// Residue with a known age younger than the threshold stays.
		if got := residueSet(e.gc(t, &realmv1.GcRunsRequest{Sweep: true, OlderThanSeconds: 3600})); !slices.Equal(got, ageless) {
			t.Errorf("young residue =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(ageless, "\n"))
		}
		e.clock.Advance(2 * time.Hour)
		dry := e.gc(t, &realmv1.GcRunsRequest{Sweep: true, OlderThanSeconds: 3600})
		if got := residueSet(dry); !slices.Equal(got, all) {
			t.Errorf("residue =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(all, "\n"))
		}
		if dry.GetReaped() != 0 || exists(t, e, e.st.OutputsKey(crashed), e.st.EvidenceKey(crashed), keyOf("crashed")) != 3 {
			t.Fatalf("the dry run removed something: %v", dry)
		}

		done := e.gc(t, &realmv1.GcRunsRequest{Sweep: true, OlderThanSeconds: 3600, Force: true})
		if done.GetReaped() != 5 || done.GetReapGone() != 0 || done.GetReapFailed() != 0 {
			t.Errorf("force = %v", done)
		}
		if n := exists(t, e, e.st.OutputsKey(crashed), e.st.EvidenceKey(crashed), keyOf("crashed")); n != 0 {
			t.Errorf("%d residue keys left", n)
		}
		if on, _ := e.rc.ZScore(ctx(t), e.st.IndexKey(b, "index"), crashed).Result(); on != 0 {
			t.Errorf("index entry left")
		}
		if s := state(t, e, live); s.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_RUNNING || exists(t, e, keyOf("live")) != 1 {
			t.Errorf("the live run was touched: %v", s)
		}
		if again := e.gc(t, &realmv1.GcRunsRequest{Sweep: true, OlderThanSeconds: 3600, Force: true}); len(again.GetResidue()) != 0 {
			t.Errorf("second sweep found %v", residueSet(again))
		}
	})
}

func TestGcRefusesAThresholdUnderAnHour(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		_, err := e.client.GcRuns(ctx(t), &realmv1.GcRunsRequest{Sweep: true, OlderThanSeconds: 3599, Force: true})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("err = %v", err)
		}
	})
}

func TestGcHealRewritesRunsWhoseStoredPhaseOrIndexIsStale(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, []byte(answerWorkflow))
		done := e.answered(t, "done", "")
		open := e.startKeyed(t, "open", "")
		fine := e.startKeyed(t, "fine", "")
		e.editDoc(t, done, func(d map[string]any) { d["run_phase"] = "running" })
		if err := e.rc.ZRem(ctx(t), e.st.IndexKey(e.st.BucketOf(open), "index"), open).Err(); err != nil {
			t.Fatal(err)
		}
		v0, d0 := e.doc(t, done)
		e.clock.Advance(time.Minute)

		dry := e.gc(t, &realmv1.GcRunsRequest{Heal: true})
		got := map[string]string{}
		for _, s := range dry.GetStale() {
			got[s.GetRunId()] = strings.Join(s.GetReasons(), "; ")
		}
		want := map[string]string{done: "run_phase 'running' ≠ derived 'completed'", open: "missing from the run index"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("stale = %v, want %v", got, want)
		}
		if v, _ := e.doc(t, done); v != v0 {
			t.Fatalf("the dry run wrote version %d", v)
		}

		healed := e.gc(t, &realmv1.GcRunsRequest{Heal: true, Force: true})
		if healed.GetHealed() != 2 || healed.GetHealFailed() != 0 {
			t.Errorf("heal = %v", healed)
		}
		v1, d1 := e.doc(t, done)
		if v1 != v0+1 || d1["run_phase"] != "completed" || d1["updated_at"] == d0["updated_at"] {
			t.Errorf("healed run: version %d→%d, phase %v, updated_at %v→%v", v0, v1, d1["run_phase"], d0["updated_at"], d1["updated_at"])
		}
		list, err := e.client.ListRuns(ctx(t), &realmv1.ListRunsRequest{WorkflowId: "answer"})
		if err != nil {
			t.Fatal(err)
		}
		var listed []string
		for _, r := range list.GetRuns() {
			listed = append(listed, r.GetRunId())
		}
		if !slices.Contains(listed, open) || !slices.Contains(listed, fine) {
			t.Errorf("listed %v, want %s back", listed, open)
		}
		if again := e.gc(t, &realmv1.GcRunsRequest{Heal: true}); len(again.GetStale()) != 0 {
			t.Errorf("second heal found %v", again.GetStale())
		}

		// One unreadable run document stops heal before it writes anything.
		e.editDoc(t, fine, func(d map[string]any) { d["run_phase"] = "gate_waiting" })
		if err := e.rc.HSet(ctx(t), e.st.RunKey(done), "doc", "{not json").Err(); err != nil {
			t.Fatal(err)
		}
		vf, _ := e.doc(t, fine)
		if err := e.rc.Del(ctx(t), e.st.RunKey(open)).Err(); err != nil { // residue the sweep would reap
			t.Fatal(err)
		}
		e.clock.Advance(2 * time.Hour)
		if _, err := e.client.GcRuns(ctx(t), &realmv1.GcRunsRequest{Sweep: true, OlderThanSeconds: 3600, Heal: true, Force: true}); err == nil || !strings.Contains(err.Error(), "has an unreadable document") {
			t.Errorf("heal over an unreadable run: %v", err)
		}
		if v, _ := e.doc(t, fine); v != vf {
			t.Errorf("heal wrote %s despite the unreadable run", fine)
		}
		if exists(t, e, e.st.IdemKeyName("answer\x1fopen")) != 1 {
			t.Errorf("the sweep reaped residue although heal refused the call")
		}
	})
}

func TestStampSealsStampsLegacyRunsKeepingUpdatedAt(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, []byte(answerWorkflow))
		legacyDone := e.answered(t, "a", "")
		legacyAbandoned := e.startKeyed(t, "b", "")
		if _, err := e.client.AbandonRun(ctx(t), &realmv1.AbandonRunRequest{RunId: legacyAbandoned}); err != nil {
			t.Fatal(err)
		}
		sealed := e.answered(t, "c", "")
		mystery := e.answered(t, "d", "")
		incoherent := e.answered(t, "e", "")
		open := e.startKeyed(t, "f", "")
		unseal := func(d map[string]any) { delete(d, "sealed_by") }
		e.editDoc(t, legacyDone, unseal)
		e.editDoc(t, legacyAbandoned, unseal)
		e.editDoc(t, mystery, func(d map[string]any) { unseal(d); d["terminal_reason"] = "Ended somehow." })
		e.editDoc(t, incoherent, func(d map[string]any) { d["sealed_by"] = map[string]any{"arm": "cleanup_sweep"} })
		v0, d0 := e.doc(t, legacyDone)
		e.clock.Advance(time.Hour)

		finding := func(fs []*realmv1.SealFinding) string {
			var out []string
			for _, f := range fs {
				out = append(out, f.GetRunId()+" "+f.GetArm()+" "+f.GetPhase()+" "+f.GetNote())
			}
			slices.Sort(out)
			return strings.Join(out, "\n")
		}
		wantStamped := []string{legacyDone + " complete completed ", legacyAbandoned + " abandon_requested abandoned "}
		slices.Sort(wantStamped)
		check := func(resp *realmv1.StampSealsResponse, stamped []string, agreeing int32) {
			t.Helper()
			if got := finding(resp.GetStamped()); got != strings.Join(stamped, "\n") {
				t.Errorf("stamped =\n%s\nwant\n%s", got, strings.Join(stamped, "\n"))
			}
			if resp.GetAgreeing() != agreeing {
				t.Errorf("agreeing = %d, want %d", resp.GetAgreeing(), agreeing)
			}
			if got := finding(resp.GetUnclassifiable()); got != mystery+"  completed ended with reason 'Ended somehow.', which names no arm" {
				t.Errorf("unclassifiable = %q", got)
			}
			if got := finding(resp.GetIncoherent()); got != incoherent+" cleanup_sweep abandoned abandoned arm without abandoned_at" {
				t.Errorf("incoherent = %q", got)
			}
			if len(resp.GetFailed())+len(resp.GetSkipped()) != 0 {
				t.Errorf("failed %v skipped %v", resp.GetFailed(), resp.GetSkipped())
			}
		}
		dry, err := e.client.StampSeals(ctx(t), &realmv1.StampSealsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		check(dry, wantStamped, 1)
		if v, d := e.doc(t, legacyDone); v != v0 || d["sealed_by"] != nil {
			t.Fatalf("the dry run wrote: version %d, seal %v", v, d["sealed_by"])
		}

		done, err := e.client.StampSeals(ctx(t), &realmv1.StampSealsRequest{Force: true})
		if err != nil {
			t.Fatal(err)
		}
		check(done, wantStamped, 1)
		v1, d1 := e.doc(t, legacyDone)
		if v1 != v0+1 || d1["updated_at"] != d0["updated_at"] || fmt.Sprint(d1["sealed_by"]) != "map[arm:complete classified:true]" {
			t.Errorf("stamped run: version %d→%d, updated_at %v→%v, seal %v", v0, v1, d0["updated_at"], d1["updated_at"], d1["sealed_by"])
		}
		if s := state(t, e, legacyAbandoned); s.GetSealedByArm() != "abandon_requested" || !s.GetSealedByClassified() {
			t.Errorf("abandoned run state: arm %q classified %v", s.GetSealedByArm(), s.GetSealedByClassified())
		}
		if s := state(t, e, open); s.GetSealedByArm() != "" {
			t.Errorf("open run stamped %q", s.GetSealedByArm())
		}
		_ = sealed

		again, err := e.client.StampSeals(ctx(t), &realmv1.StampSealsRequest{Force: true})
		if err != nil {
			t.Fatal(err)
		}
		check(again, nil, 3)
	})
}

func TestReconcileRebuildsKeyPointersNewestRunCanonical(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, []byte(answerWorkflow))
		first := e.answered(t, "k", "")
		e.clock.Advance(time.Second)
		second := e.answered(t, "k", "rerun")
		other := e.startKeyed(t, "j", "")
		if first == second {
			t.Fatal("rerun matched the first run")
		}
		keyName := func(k string) string { return e.st.IdemKeyName("answer\x1f" + k) }
		// Damage: the shared key names the older run, the other key is lost.
		if err := e.rc.Set(ctx(t), keyName("k"), first, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := e.rc.Del(ctx(t), keyName("j")).Err(); err != nil {
			t.Fatal(err)
		}
		reconcile := func(req *realmv1.ReconcileKeysRequest) *realmv1.ReconcileKeysResponse {
			t.Helper()
			resp, err := e.client.ReconcileKeys(ctx(t), req)
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		dupes := fmt.Sprint([]string{"answer", "k", second, first})
		dupOf := func(r *realmv1.ReconcileKeysResponse) string {
			if len(r.GetDuplicates()) != 1 {
				return fmt.Sprint(r.GetDuplicates())
			}
			d := r.GetDuplicates()[0]
			return fmt.Sprint(append([]string{d.GetWorkflowId(), d.GetKey(), d.GetCanonical()}, d.GetOthers()...))
		}
		dry := reconcile(&realmv1.ReconcileKeysRequest{DryRun: true})
		if dry.GetWritten() != 2 || dry.GetGroups() != 2 || dry.GetCurrent() != 0 || dupOf(dry) != dupes {
			t.Errorf("dry = %v", dry)
		}
		if held, _ := e.st.LookupKey(ctx(t), "answer\x1fk"); held != first {
			t.Fatalf("the dry run moved the pointer to %s", held)
		}
		if r := reconcile(&realmv1.ReconcileKeysRequest{WorkflowId: "elsewhere"}); r.GetGroups() != 0 || r.GetWritten() != 0 {
			t.Errorf("--workflow elsewhere = %v", r)
		}
		wrote := reconcile(&realmv1.ReconcileKeysRequest{})
		if wrote.GetWritten() != 2 || wrote.GetCurrent() != 0 || dupOf(wrote) != dupes {
			t.Errorf("reconcile = %v", wrote)
		}
		for key, want := range map[string]string{"k": second, "j": other} {
			if held, _ := e.st.LookupKey(ctx(t), "answer\x1f"+key); held != want {
				t.Errorf("key %s names %s, want %s", key, held, want)
			}
		}
		if again := reconcile(&realmv1.ReconcileKeysRequest{}); again.GetWritten() != 0 || again.GetCurrent() != 2 {
			t.Errorf("second reconcile = %v", again)
		}
	})
}

func TestMigrateWorkflowsAddsHumanOriginOnce(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, []byte(answerWorkflow))
		e.register(t, []byte(strings.Replace(answerWorkflow, "id: answer", "id: other", 1)))
		// An old copy without an origin.
		rec, err := e.st.GetWorkflow(ctx(t), "answer")
		if err != nil {
			t.Fatal(err)
		}
		var def map[string]any
		_ = json.Unmarshal(rec.Definition, &def)
		if def["origin"] != "human" {
			t.Fatalf("register stored origin %v", def["origin"])
		}
		delete(def, "origin")
		b, _ := json.Marshal(def)
		if err := e.rc.HSet(ctx(t), e.prefix+":wf:answer", fmt.Sprintf("v%d", rec.Version), b).Err(); err != nil {
			t.Fatal(err)
		}
		migrate := func() *realmv1.MigrateWorkflowsResponse {
			t.Helper()
			resp, err := e.client.MigrateWorkflows(ctx(t), &realmv1.MigrateWorkflowsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		if r := migrate(); r.GetMigrated() != 1 || r.GetUpToDate() != 1 {
			t.Errorf("migrate = %v", r)
		}
		rec2, err := e.st.GetWorkflow(ctx(t), "answer")
		if err != nil {
			t.Fatal(err)
		}
		var after map[string]any
		_ = json.Unmarshal(rec2.Definition, &after)
		if after["origin"] != "human" || rec2.Version != rec.Version || after["id"] != "answer" {
			t.Errorf("migrated copy: origin %v, version %d→%d", after["origin"], rec.Version, rec2.Version)
		}
		if r := migrate(); r.GetMigrated() != 0 || r.GetUpToDate() != 2 {
			t.Errorf("second migrate = %v", r)
		}
	})
}
