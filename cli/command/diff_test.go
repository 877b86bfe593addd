package command

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// answer submits an agent step's answer and fails the test if it is refused.
func (l *live) answer(runID, step string, out map[string]any) {
	l.t.Helper()
	resp, err := l.engine.ExecuteStep(l.ctx(), &realmv1.ExecuteStepRequest{RunId: runID, Command: step, Params: mustStruct(l.t, out), Caller: &realmv1.Caller{Channel: realmv1.Channel_CHANNEL_RUN}})
	if err != nil {
		l.t.Fatal(err)
	}
	if len(resp.GetReply().GetErrors()) > 0 {
		l.t.Fatalf("%s on %s refused: %v", step, runID, resp.GetReply().GetErrors())
	}
}

// deltaMS matches the Δ ms cell ending a compared row: durations are
// wall-clock, so tests mask them as <ms>.
var deltaMS = regexp.MustCompile(`(?m)   -?\d+$`)

func maskDelta(s string) string { return deltaMS.ReplaceAllString(s, "   <ms>") }

const (
	diffHeader = "Step                   A status     B status   A hash     B hash     Δ ms"
	diffRule   = "─────────────────────  ─────────  ─────────  ─────────  ─────────  ─────────"
)

// The three diffable runs: A answers both agent steps, B classifies
// differently and stops there, C is A's twin in another workflow. The
// hashes are SHA-256 of the outputs, so they are stable across runs.
func TestRunDiff(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *live) {
		l.register("diffable")
		l.register("diffable", "id: diffable", "id: other")
		a := l.start("diffable", map[string]any{"ticket": "T-1"}).GetRunId()
		l.answer(a, "classify", map[string]any{"label": "billing"})
		l.answer(a, "reply", map[string]any{"text": "Refunded."})
		b := l.start("diffable", map[string]any{"ticket": "T-1"}).GetRunId()
		l.answer(b, "classify", map[string]any{"label": "bug"})
		c := l.start("other", map[string]any{"ticket": "T-1"}).GetRunId()
		l.answer(c, "classify", map[string]any{"label": "billing"})
		l.answer(c, "reply", map[string]any{"text": "Refunded."})

		t.Run("two runs of one workflow", func(t *testing.T) {
			res := l.realm(nil, "run", "diff", a, b)
			res.stdout = maskDelta(res.stdout)
			want(t, res, 0, lines(
				fmt.Sprintf("Diff: %s  vs  %s", a, b),
				"Workflow: diffable",
				"",
				diffHeader,
				diffRule,
				"fetch                  success    = success    e885f615   e885f615   <ms>",
				"classify               success    ≠ success    9892ddfb   8701a9bb   <ms>",
				"reply                  success      missing    74dd2f2d   —          —",
			), "")
		})
		t.Run("the other way round", func(t *testing.T) {
			// A step only B ran comes after A's steps; it is missing on A.
			res := l.realm(nil, "run", "diff", b, a)
			res.stdout = maskDelta(res.stdout)
			want(t, res, 0, lines(
				fmt.Sprintf("Diff: %s  vs  %s", b, a),
				"Workflow: diffable",
				"",
				diffHeader,
				diffRule,
				"fetch                  success    = success    e885f615   e885f615   <ms>",
				"classify               success    ≠ success    8701a9bb   9892ddfb   <ms>",
				"reply                  missing      success    —          74dd2f2d   —",
			), "")
		})
		t.Run("different workflows warn first and go on", func(t *testing.T) {
			res := l.realm(nil, "run", "diff", a, c)
			res.stdout = maskDelta(res.stdout)
			want(t, res, 0, lines(
				"Warning: runs are from different workflows (diffable vs other)",
				fmt.Sprintf("Diff: %s  vs  %s", a, c),
				"Workflow: diffable  vs  other",
				"",
				diffHeader,
				diffRule,
				"fetch                  success    = success    e885f615   e885f615   <ms>",
				"classify               success    = success    9892ddfb   9892ddfb   <ms>",
				"reply                  success    = success    74dd2f2d   74dd2f2d   <ms>",
			), "")
		})
		t.Run("unknown runs", func(t *testing.T) {
			want(t, l.realm(nil, "run", "diff", "r-missing", a), 1, "", "Run not found: r-missing\n")
			want(t, l.realm(nil, "run", "diff", a, "r-missing"), 1, "", "Run not found: r-missing\n")
		})
	})
}

func TestRunDiffRefusals(t *testing.T) {
	t.Parallel()
	// None of these reaches the engine: the address is never dialled.
	realm := runner("127.0.0.1:1")
	mixed := "Error: cannot diff a run against a replay. Provide two run IDs or two replay IDs.\n"
	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"run against replay", []string{"run", "diff", "r-1", "rpl_2"}, mixed},
		{"replay against run", []string{"run", "diff", "rpl_1", "r-2"}, mixed},
		{"unknown replays", []string{"run", "diff", "rpl_1", "rpl_2"}, "Replay not found: rpl_1\n"},
		{"no run", []string{"run", "diff"}, "Error: accepts 2 arg(s), received 0\n"},
		{"one run", []string{"run", "diff", "r-1"}, "Error: accepts 2 arg(s), received 1\n"},
		{"three runs", []string{"run", "diff", "r-1", "r-2", "r-3"}, "Error: accepts 2 arg(s), received 3\n"},
		{"no flags", []string{"run", "diff", "r-1", "r-2", "--json"}, "Error: unknown flag: --json\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want(t, realm(nil, tc.args...), 1, "", tc.stderr)
		})
	}
}

// diffFake answers ExportRun with canned bundles: the shapes a scripted
// run on the real engine does not produce (retries, errors, gate answers,
// long step names).
type diffFake struct {
	realmv1.UnimplementedEngineServiceServer
	bundles map[string]string
}

func (f *diffFake) ExportRun(_ context.Context, r *realmv1.ExportRunRequest) (*realmv1.ExportRunResponse, error) {
	b, ok := f.bundles[r.GetRunId()]
	if !ok {
		// As engine-svc answers: the code travels in the status details.
		return nil, errcode.ToStatus(errcode.Newf(errcode.StateRunNotFound, "Run not found: %s", r.GetRunId())).Err()
	}
	return &realmv1.ExportRunResponse{Bundle: []byte(b)}, nil
}

func startDiffFake(t *testing.T, f *diffFake) string {
	t.Helper()
	return serveEngine(t, f)
}

func TestRunDiffComparesTheLastAttemptOfEachStep(t *testing.T) {
	t.Parallel()
	ev := func(step, kind, status string, ms int, hash string) string {
		return fmt.Sprintf(`{"step_id":%q,"kind":%q,"status":%q,"duration_ms":%d,"evidence_hash":%q,"output_summary":{}}`, step, kind, status, ms, hash)
	}
	long := "a_step_name_longer_than_the_column"
	f := &diffFake{bundles: map[string]string{
		"r-a": `{"run":{"workflow_id":"sync","evidence":[` +
			ev("fetch", "", "error", 10, "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a") + "," +
			ev("fetch", "", "success", 30, "aaaaaaaa11") + "," +
			ev("approve", "", "success", 5, "bbbbbbbb22") + "," +
			ev("approve", "gate_response", "success", 0, "cccccccc33") + "," +
			ev(long, "", "success", 7, "dddddddd44") + `]}}`,
		"r-b": `{"run":{"workflow_id":"sync","evidence":[` +
			ev("fetch", "", "success", 12, "aaaaaaaa11") + "," +
			ev("approve", "", "error", 5, "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a") + "," +
			ev("approve", "gate_response", "success", 0, "eeeeeeee55") + "," +
			ev("notify", "", "success", 3, "ffffffff66") + `]}}`,
	}}
	realm := runner(startDiffFake(t, f))
	want(t, realm(nil, "run", "diff", "r-a", "r-b"), 0, lines(
		"Diff: r-a  vs  r-b",
		"Workflow: sync",
		"",
		"Step                                A status     B status   A hash     B hash     Δ ms",
		"──────────────────────────────────  ─────────  ─────────  ─────────  ─────────  ─────────",
		"fetch                               success    = success    aaaaaaaa   aaaaaaaa   -18",
		"approve                             success    ≠ error      bbbbbbbb   44136fa3   0",
		"a_step_name_longer_than_the_column  success      missing    dddddddd   —          —",
		"notify                              missing      success    —          ffffffff   —",
	), "")
	want(t, realm(nil, "run", "diff", "r-a", "nope"), 1, "", "Run not found: nope\n")
}
