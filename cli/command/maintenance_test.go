package command

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/realm-go/realm/engine-svc/enginetest"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// maintEnv is a live engine whose store the test can damage past the
// engine, as a crash, an older release or a hand in redis-cli would.
type maintEnv struct {
	*live
	raw   *enginetest.Raw
	clock *testClock
	// names masks run ids in goldens: id -> <name>.
	names map[string]string
}

func eachBackendRaw(t *testing.T, f func(t *testing.T, e *maintEnv)) {
	t.Helper()
	for _, backend := range enginetest.Backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			clock := &testClock{now: time.Date(2026, 10, 2, 1, 0, 0, 0, time.UTC)}
			addr, raw := enginetest.StartRaw(t, backend, enginetest.Options{Clock: clock.Now})
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			e := &maintEnv{live: &live{t: t, realm: runner(addr), engine: realmv1.NewEngineServiceClient(conn)}, raw: raw, clock: clock, names: map[string]string{}}
			if resp, err := e.engine.RegisterWorkflow(e.ctx(), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: []byte(waitingWorkflow), Path: "workflow.yaml"}}); err != nil || !resp.GetRegistered() {
				t.Fatalf("register: %v %v", err, resp.GetReport().GetErrors())
			}
			f(t, e)
		})
	}
}

// started starts a run of the waiting workflow under key, named in goldens.
func (e *maintEnv) started(name, key, onTerminal string) string {
	e.t.Helper()
	resp, err := e.engine.StartRun(e.ctx(), &realmv1.StartRunRequest{WorkflowId: "waiting", IdempotencyKey: key, OnTerminalMatch: onTerminal})
	if err != nil {
		e.t.Fatal(err)
	}
	id := resp.GetReply().GetRunId()
	e.names[id] = "<" + name + ">"
	return id
}

// answered is started, then its only step answered: the run completes.
func (e *maintEnv) answered(name, key, onTerminal string) string {
	e.t.Helper()
	id := e.started(name, key, onTerminal)
	resp, err := e.engine.ExecuteStep(e.ctx(), &realmv1.ExecuteStepRequest{RunId: id, Command: "answer"})
	if err != nil || resp.GetReply().GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
		e.t.Fatalf("answer: %v %v", resp, err)
	}
	return id
}

func (e *maintEnv) edit(run string, fn func(map[string]any)) {
	e.t.Helper()
	if err := e.raw.EditRunDocument(e.ctx(), run, fn); err != nil {
		e.t.Fatal(err)
	}
}

var (
	bucketKey = regexp.MustCompile(`\S*:\{b\d+\}:`)
	keyHash   = regexp.MustCompile(`idem:[0-9a-f]{64}`)
)

// masked replaces run ids by their names and store keys' prefix, bucket
// and hash by placeholders, and sorts each block of bullets (the engine
// lists by run id, which is random).
func (e *maintEnv) masked(s string) string {
	for id, name := range e.names {
		s = strings.ReplaceAll(s, id, name)
	}
	s = bucketKey.ReplaceAllString(s, "<prefix>:{b<n>}:")
	s = keyHash.ReplaceAllString(s, "idem:<sha256>")
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && (strings.HasPrefix(lines[j], "  • ") || strings.HasPrefix(lines[j], "  - ")) {
			j++
		}
		slices.Sort(lines[i:j])
		i = max(j, i+1)
	}
	return strings.Join(lines, "\n")
}

// golden compares a command's masked stdout and exit code with
// testdata/maintenance/<name>.golden.
func (e *maintEnv) golden(name string, got result, code int) {
	e.t.Helper()
	if got.code != code || got.stderr != "" {
		e.t.Errorf("%s: exit %d, stderr %q; want exit %d, no stderr", name, got.code, got.stderr, code)
	}
	path := filepath.Join("testdata", "maintenance", name+".golden")
	out := e.masked(got.stdout)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			e.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			e.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		e.t.Fatalf("%v (run with -update to create it)", err)
	}
	if out != string(want) {
		e.t.Errorf("%s: stdout =\n%s\nwant\n%s", name, out, want)
	}
}

// realm run gc reaps what a run leaves once its document is gone — only
// what is old enough where the store knows an age, only with --force —
// and heals runs whose stored phase disagrees with their record.
func TestRunGcReapsRunLessResidueAndHealsStalePhases(t *testing.T) {
	t.Parallel()
	eachBackendRaw(t, func(t *testing.T, e *maintEnv) {
		crashed := e.answered("crashed", "k1", "")
		purged := e.answered("purged", "k2", "")
		live := e.started("live", "k3", "")
		if _, err := e.engine.PurgeRun(e.ctx(), &realmv1.PurgeRunRequest{RunId: purged, Force: true}); err != nil {
			t.Fatal(err)
		}
		if err := e.raw.DropRunDocument(e.ctx(), crashed); err != nil {
			t.Fatal(err)
		}

		// At 01:00 the evidence and the run index entry are too young.
		e.golden("gc-young", e.realm(nil, "run", "gc", "--older-than", "1h"), 0)
		e.clock.Set(time.Date(2026, 10, 2, 4, 0, 0, 0, time.UTC))
		e.golden("gc-dry", e.realm(nil, "run", "gc", "--older-than", "1h"), 0)
		e.golden("gc-dry", e.realm(nil, "run", "gc", "--older-than", "1h"), 0) // the dry run changed nothing
		e.golden("gc-force", e.realm(nil, "run", "gc", "--older-than", "1h", "--force"), 0)
		want(t, e.realm(nil, "run", "gc", "--older-than", "1h", "--force"), 0, lines("No run-less orphaned WAL/sidecar artifacts found to reap."), "")

		want(t, e.realm(nil, "run", "gc", "--heal"), 0, lines("No stale-phase records found to heal."), "")
		e.edit(live, func(d map[string]any) { d["run_phase"] = "completed" })
		e.golden("gc-heal-dry", e.realm(nil, "run", "gc", "--older-than", "1h", "--heal"), 0)
		if s := e.state(live); s.GetRunVersion() != 0 {
			t.Fatalf("the dry heal wrote version %d", s.GetRunVersion())
		}
		e.golden("gc-heal-force", e.realm(nil, "run", "gc", "--heal", "--force"), 0)
		if s := e.state(live); s.GetRunVersion() != 1 || s.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_RUNNING {
			t.Errorf("healed run: version %d phase %v", s.GetRunVersion(), s.GetRunPhase())
		}
		want(t, e.realm(nil, "run", "gc", "--heal", "--force"), 0, lines("No stale-phase records found to heal."), "")
	})
}

// realm run migrate --stamp-seals stamps the arm of ended runs recorded
// without one, lists what it cannot classify, and says so in its exit code
// with --detailed-exitcode.
func TestRunMigrateStampsSealsAndReportsResidue(t *testing.T) {
	t.Parallel()
	eachBackendRaw(t, func(t *testing.T, e *maintEnv) {
		legacy := e.answered("legacy", "a", "")
		mystery := e.answered("mystery", "b", "")
		e.answered("sealed", "c", "")
		e.edit(legacy, func(d map[string]any) { delete(d, "sealed_by") })
		e.edit(mystery, func(d map[string]any) { delete(d, "sealed_by"); d["terminal_reason"] = "Ended somehow." })

		e.golden("migrate-dry", e.realm(nil, "run", "migrate", "--stamp-seals"), 0)
		e.golden("migrate-dry", e.realm(nil, "run", "migrate", "--stamp-seals", "--detailed-exitcode"), ExitResidue)
		e.golden("migrate-force", e.realm(nil, "run", "migrate", "--stamp-seals", "--force", "--detailed-exitcode"), ExitResidue)
		if s := e.state(legacy); s.GetSealedByArm() != "complete" || !s.GetSealedByClassified() || s.GetRunVersion() != 2 {
			t.Errorf("stamped run: arm %q classified %v version %d", s.GetSealedByArm(), s.GetSealedByClassified(), s.GetRunVersion())
		}
		e.edit(mystery, func(d map[string]any) { d["sealed_by"] = map[string]any{"arm": "complete"} })
		e.golden("migrate-nothing", e.realm(nil, "run", "migrate", "--stamp-seals", "--force", "--detailed-exitcode"), 0)
	})
}

// realm run reconcile points every key at the newest run holding it and
// lists the keys several runs share.
func TestRunReconcileRebuildsKeyPointers(t *testing.T) {
	t.Parallel()
	eachBackendRaw(t, func(t *testing.T, e *maintEnv) {
		first := e.answered("first", "k", "")
		e.clock.Set(time.Date(2026, 10, 2, 1, 5, 0, 0, time.UTC))
		e.answered("second", "k", "rerun")
		if err := e.raw.PointKey(e.ctx(), "waiting", "k", first); err != nil {
			t.Fatal(err)
		}
		dupes := "Duplicate-key groups: 1\n  - workflow 'waiting' → canonical <second>; other runs: <first>\n"
		reconcile := func(args ...string) string {
			t.Helper()
			got := e.realm(nil, append([]string{"run", "reconcile"}, args...)...)
			if got.code != 0 || got.stderr != "" {
				t.Errorf("reconcile %v: exit %d, stderr %q", args, got.code, got.stderr)
			}
			return e.masked(got.stdout)
		}
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--dry-run"}, "Would write 1 pointer(s) across 1 key group(s); 0 already current.\n" + dupes},
			{[]string{"--workflow", "elsewhere"}, "Wrote 0 pointer(s) across 0 key group(s); 0 already current.\n"},
			{nil, "Wrote 1 pointer(s) across 1 key group(s); 0 already current.\n" + dupes},
			{nil, "Wrote 0 pointer(s) across 1 key group(s); 1 already current.\n" + dupes},
		} {
			if got := reconcile(c.args...); got != c.want {
				t.Errorf("reconcile %v =\n%s\nwant\n%s", c.args, got, c.want)
			}
		}
	})
}

// realm workflow migrate adds origin: human to stored copies lacking one,
// once.
func TestWorkflowMigrateAddsHumanOrigin(t *testing.T) {
	t.Parallel()
	eachBackendRaw(t, func(t *testing.T, e *maintEnv) {
		if err := e.raw.EditWorkflow(e.ctx(), "waiting", func(d map[string]any) { delete(d, "origin") }); err != nil {
			t.Fatal(err)
		}
		want(t, e.realm(nil, "workflow", "migrate"), 0, lines("Done. 1 migrated, 0 already up to date."), "")
		want(t, e.realm(nil, "workflow", "migrate"), 0, lines("Done. 0 migrated, 1 already up to date."), "")
	})
}

func TestMaintenanceRefusals(t *testing.T) {
	t.Parallel()
	realm := runner("127.0.0.1:1") // every refusal comes before any call
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"run", "gc"}, "--older-than <duration> is required (at least 1h, e.g. 30d, 6h) unless --heal is given alone."},
		{[]string{"run", "gc", "--force"}, "--older-than <duration> is required (at least 1h, e.g. 30d, 6h) unless --heal is given alone."},
		{[]string{"run", "gc", "--older-than", "5x"}, "Invalid duration '5x'. Use format: <number>(d|h|m), e.g. 30d, 6h, 10m"},
		{[]string{"run", "gc", "--older-than", "0", "--heal"}, "Invalid duration '0'. Use format: <number>(d|h|m), e.g. 30d, 6h, 10m"},
		{[]string{"run", "gc", "--older-than", "59m", "--force"}, "--older-than must be at least 1h (got '59m'). gc refuses to reap crash residue younger than that, even with --force."},
		{[]string{"run", "gc", "--older-than", "0m"}, "--older-than must be at least 1h (got '0m'). gc refuses to reap crash residue younger than that, even with --force."},
		{[]string{"run", "migrate"}, "realm run migrate needs --stamp-seals (its only migration). See what it would stamp: realm run migrate --stamp-seals"},
		{[]string{"run", "migrate", "--force", "--detailed-exitcode"}, "realm run migrate needs --stamp-seals (its only migration). See what it would stamp: realm run migrate --stamp-seals"},
	} {
		want(t, realm(nil, c.args...), 1, "", c.stderr+"\n")
	}
}
