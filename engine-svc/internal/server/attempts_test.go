package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// exportedAttempts is the part of the export bundle the refused answers
// fill (run-record spec §9).
type exportedAttempts struct {
	Attempts []map[string]any `json:"attempts"`
	Capped   bool             `json:"attempts_capped"`
	Complete bool             `json:"complete"`
	Run      struct {
		Version              int64          `json:"version"`
		ValidationRejections map[string]int `json:"validation_rejections"`
		Outputs              map[string]any `json:"outputs"`
	} `json:"run"`
}

func exportAttempts(t *testing.T, e *env, run string) (exportedAttempts, string) {
	t.Helper()
	resp, err := e.client.ExportRun(ctx(t), &realmv1.ExportRunRequest{RunId: run})
	if err != nil {
		t.Fatal(err)
	}
	var b exportedAttempts
	if err := json.Unmarshal(resp.GetBundle(), &b); err != nil {
		t.Fatal(err)
	}
	return b, string(resp.GetBundle())
}

// An answer the step's input_schema or output_schema refuses is recorded
// (metadata only, never the values) in the same write that counts it, and
// the export returns the records oldest first.
func TestRefusedAnswersAreRecordedAndExported(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, readFile(t, "testdata/refusals.yaml"))
		run := start(t, e, "refusals", nil).GetRunId()
		if b, _ := exportAttempts(t, e, run); len(b.Attempts) != 0 || b.Capped || !b.Complete || b.Attempts == nil {
			t.Fatalf("a fresh run exports attempts %v (capped %v, complete %v), want []", b.Attempts, b.Capped, b.Complete)
		}
		r := step(t, e, run, "classify", map[string]any{"category": "secret-value", "confidence": 0.4})
		if r.GetErrorCode() != "VALIDATION_INPUT_SCHEMA" {
			t.Fatalf("first answer: %v", r)
		}
		r = step(t, e, run, "classify", map[string]any{"category": "bug"})
		if r.GetErrorCode() != "VALIDATION_OUTPUT_SCHEMA" {
			t.Fatalf("second answer: %v", r)
		}
		if r := step(t, e, run, "classify", map[string]any{"category": "bug", "confidence": 0.9}); r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK {
			t.Fatalf("third answer: %v", r)
		}

		b, raw := exportAttempts(t, e, run)
		if len(b.Attempts) != 2 || b.Capped || !b.Complete {
			t.Fatalf("attempts = %v (capped %v, complete %v)", b.Attempts, b.Capped, b.Complete)
		}
		// Two refusals and one answer: three writes, and each refusal
		// was recorded by the write that counted it.
		if b.Run.Version != 3 || b.Run.ValidationRejections["classify"] != 2 {
			t.Errorf("version %d, rejections %v", b.Run.Version, b.Run.ValidationRejections)
		}
		if _, leaked := b.Run.Outputs["\x00attempts"]; leaked || len(b.Run.Outputs) != 1 {
			t.Errorf("outputs = %v, want only classify's", b.Run.Outputs)
		}
		if strings.Contains(raw, "secret-value") {
			t.Error("the export holds a refused answer's value")
		}
		first, second := b.Attempts[0], b.Attempts[1]
		if len(first) != 10 {
			t.Errorf("record has %d fields, want the 10 of run-record spec §8.1: %v", len(first), first)
		}
		want := map[string]any{"run_id": run, "workflow_id": "refusals", "step_id": "classify", "error_code": "VALIDATION_INPUT_SCHEMA",
			"submitted_key_count": 2.0, "submitted_bytes": float64(len(`{"category":"secret-value","confidence":0.4}`)), "trace_entry_count": 0.0}
		for k, v := range want {
			if first[k] != v {
				t.Errorf("first[%s] = %v, want %v", k, first[k], v)
			}
		}
		if keys, _ := json.Marshal(first["submitted_keys"]); string(keys) != `["category","confidence"]` {
			t.Errorf("submitted_keys = %s", keys)
		}
		if ts, _ := first["ts"].(string); !strings.HasSuffix(ts, "Z") || len(ts) != len("2026-10-02T01:52:37.120Z") {
			t.Errorf("ts = %v", first["ts"])
		}
		// Re-encoded from maps: keys in sorted order.
		summary, _ := json.Marshal(first["validation_error_summary"])
		if string(summary) != `[{"instancePath":"/category","keyword":"enum","message":"must be equal to one of the allowed values","schemaPath":"#/properties/category/enum"}]` {
			t.Errorf("first summary = %s", summary)
		}
		summary, _ = json.Marshal(second["validation_error_summary"])
		if second["error_code"] != "VALIDATION_OUTPUT_SCHEMA" ||
			string(summary) != `[{"instancePath":"","keyword":"required","message":"must have required property 'confidence'","missing_property":"confidence","schemaPath":"#/required"}]` {
			t.Errorf("second = %v, summary %s", second, summary)
		}
	})
}

// A looping agent cannot grow the record without limit: the first 80
// refusals are kept, later ones only mark the list capped; the refusal
// count goes on.
func TestRefusedAnswersListIsBounded(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, readFile(t, "testdata/refusals.yaml"))
		run := start(t, e, "refusals", nil).GetRunId()
		for i := 0; i < 83; i++ {
			if r := step(t, e, run, "classify", map[string]any{"category": "nope"}); r.GetErrorCode() != "VALIDATION_INPUT_SCHEMA" {
				t.Fatalf("answer %d: %v", i, r)
			}
		}
		b, _ := exportAttempts(t, e, run)
		if len(b.Attempts) != 80 || !b.Capped || b.Run.ValidationRejections["classify"] != 83 {
			t.Fatalf("%d records, capped %v, rejections %d; want 80, true, 83", len(b.Attempts), b.Capped, b.Run.ValidationRejections["classify"])
		}
	})
}
