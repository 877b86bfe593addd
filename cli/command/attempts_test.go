package command

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// On the real engine: a run with no refused answer, and a run that does
// not exist, both print the "no failed attempts" line and exit 0
// (cli.md §1.3, §3.3); --json prints the empty shape.
func TestRunAttempts(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *live) {
		l.register("diffable")
		run := l.start("diffable", map[string]any{"ticket": "T-1"}).GetRunId()
		l.answer(run, "classify", map[string]any{"label": "billing"})
		empty := lines("{", `  "records": [],`, `  "capped": false`, "}")

		want(t, l.realm(nil, "run", "attempts", run), 0, fmt.Sprintf("No failed attempts recorded for run %s.\n", run), "")
		want(t, l.realm(nil, "run", "attempts", run, "--json"), 0, empty, "")
		want(t, l.realm(nil, "run", "attempts", "r-missing"), 0, "No failed attempts recorded for run r-missing.\n", "")
		want(t, l.realm(nil, "run", "attempts", "r-missing", "--json"), 0, empty, "")
	})
}

// On the real engine: the answers the engine refused are listed, oldest
// first, and --json passes the engine's records through.
func TestRunAttemptsListsTheEnginesRefusals(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *live) {
		l.register("replayable")
		run := l.start("replayable", map[string]any{"ticket": "T-1"}).GetRunId()
		for _, answer := range []map[string]any{
			{"category": "billing"},
			{"category": 5.0, "confidence": "high"},
		} {
			resp, err := l.engine.ExecuteStep(l.ctx(), &realmv1.ExecuteStepRequest{RunId: run, Command: "classify", Params: mustStruct(t, answer)})
			if err != nil || resp.GetReply().GetErrorCode() != "VALIDATION_OUTPUT_SCHEMA" {
				t.Fatalf("answer %v: %v %v", answer, resp.GetReply(), err)
			}
		}
		l.answer(run, "classify", map[string]any{"category": "billing", "confidence": 0.9})
		ids := map[string]string{run: "<run>"}

		res := l.realm(nil, "run", "attempts", run)
		if res.code != 0 || res.stderr != "" {
			t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
		}
		golden(t, "attempts.txt", maskIDs(res.stdout, ids))

		res = l.realm(nil, "run", "attempts", run, "--json")
		if res.code != 0 || res.stderr != "" {
			t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
		}
		golden(t, "attempts.json", maskIDs(res.stdout, ids))
	})
}

func TestRunAttemptsRefusals(t *testing.T) {
	t.Parallel()
	// None of these reaches the engine: the address is never dialled.
	realm := runner("127.0.0.1:1")
	want(t, realm(nil, "run", "attempts"), 1, "", "Error: accepts 1 arg(s), received 0\n")
	want(t, realm(nil, "run", "attempts", "r-1", "r-2"), 1, "", "Error: accepts 1 arg(s), received 2\n")
	want(t, realm(nil, "run", "attempts", "r-1", "--verbose"), 1, "", "Error: unknown flag: --verbose\n")
}

// attemptsFake answers ExportRun with a canned bundle, for what a live
// engine does not easily produce (a capped list, input-schema refusals of
// several rules, a failing export).
type attemptsFake struct {
	realmv1.UnimplementedEngineServiceServer
	bundle string
	err    error
}

func (f *attemptsFake) ExportRun(context.Context, *realmv1.ExportRunRequest) (*realmv1.ExportRunResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &realmv1.ExportRunResponse{Bundle: []byte(f.bundle)}, nil
}

func startAttemptsFake(t *testing.T, f *attemptsFake) string {
	t.Helper()
	return serveEngine(t, f)
}

const attemptsBundleJSON = `{
  "realm_export_version": 4,
  "run": {"run_id": "r-1", "workflow_id": "support"},
  "attempts": [
    {"run_id": "r-1", "workflow_id": "support", "step_id": "draft", "ts": "2026-10-02T01:52:37.120Z",
     "error_code": "VALIDATION_INPUT_SCHEMA",
     "validation_error_summary": [
       {"instancePath": "", "schemaPath": "#/required", "keyword": "required", "message": "must have required property 'reply'", "missing_property": "reply"},
       {"instancePath": "/tone", "schemaPath": "#/properties/tone/type", "keyword": "type", "message": "must be string"}],
     "submitted_key_count": 2, "submitted_keys": ["text", "tone"], "submitted_bytes": 31, "trace_entry_count": 0},
    {"run_id": "r-1", "workflow_id": "support", "step_id": "draft", "ts": "2026-10-02T01:53:02.004Z",
     "error_code": "VALIDATION_OUTPUT_SCHEMA",
     "validation_error_summary": [
       {"instancePath": "/reply", "schemaPath": "#/properties/reply/type", "keyword": "type", "message": "must be string"}],
     "submitted_key_count": 1, "submitted_keys": ["reply"], "submitted_bytes": 12, "trace_entry_count": 0}
  ],
  "attempts_capped": %s,
  "complete": true
}`

func TestRunAttemptsListsTheRefusedAnswers(t *testing.T) {
	t.Parallel()
	rows := []string{
		"Failed attempts for run r-1 (2):",
		"",
		"2026-10-02T01:52:37.120Z  draft  VALIDATION_INPUT_SCHEMA  2 key(s)  required (root) (+1 more)",
		"2026-10-02T01:53:02.004Z  draft  VALIDATION_OUTPUT_SCHEMA  1 key(s)  type /reply",
	}
	t.Run("text", func(t *testing.T) {
		t.Parallel()
		realm := runner(startAttemptsFake(t, &attemptsFake{bundle: fmt.Sprintf(attemptsBundleJSON, "false")}))
		want(t, realm(nil, "run", "attempts", "r-1"), 0, lines(rows...), "")
	})
	t.Run("capped", func(t *testing.T) {
		t.Parallel()
		realm := runner(startAttemptsFake(t, &attemptsFake{bundle: fmt.Sprintf(attemptsBundleJSON, "true")}))
		want(t, realm(nil, "run", "attempts", "r-1"), 0, lines(append(rows, "",
			"Note: the attempts file reached its size cap; only the first 2 attempts were kept, later attempts were dropped.")...), "")
	})
	t.Run("json passes the records through", func(t *testing.T) {
		t.Parallel()
		realm := runner(startAttemptsFake(t, &attemptsFake{bundle: fmt.Sprintf(attemptsBundleJSON, "true")}))
		res := realm(nil, "run", "attempts", "r-1", "--json")
		if res.code != 0 || res.stderr != "" {
			t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
		}
		got := decodeJSON(t, res.stdout)
		if len(got) != 2 || got["capped"] != true {
			t.Fatalf("top level = %v, want exactly records and capped: true", got)
		}
		records, _ := got["records"].([]any)
		if len(records) != 2 {
			t.Fatalf("records = %v", got["records"])
		}
		first := records[0].(map[string]any)
		for _, k := range []string{"run_id", "workflow_id", "step_id", "ts", "error_code", "validation_error_summary",
			"submitted_key_count", "submitted_keys", "submitted_bytes", "trace_entry_count"} {
			if _, ok := first[k]; !ok {
				t.Errorf("record lost %q: %v", k, first)
			}
		}
		if s := first["validation_error_summary"].([]any)[0].(map[string]any); s["missing_property"] != "reply" {
			t.Errorf("summary = %v", s)
		}
	})
	t.Run("other engine failures are refusals", func(t *testing.T) {
		t.Parallel()
		realm := runner(startAttemptsFake(t, &attemptsFake{err: status.Error(codes.Internal, "store down")}))
		want(t, realm(nil, "run", "attempts", "r-1"), 1, "", "Error: store down\n")
	})
}
