package engine

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/schema"
	"github.com/realm-go/realm/pkg/workflow"
)

// attemptsField is where a run's refused agent answers live (run-record
// spec §8.1, the original's `<run-id>.attempts.jsonl` sidecar): in the
// run's output hash, beside the outputs, written by the same
// compare-and-set that counts the refusal in validation_rejections, so the
// count and the list never disagree. Like the sidecar it is not part of the
// run document; ExportRun returns it as `attempts` / `attempts_capped`.
// The NUL byte keeps the field apart from every step name.
const attemptsField = "\x00attempts"

// Bounds of the attempts list. The original keeps the first ~256 KB of its
// sidecar (~80+ records) and drops later ones; here the first
// maxAttemptRecords records are kept, later ones only set `capped`, and
// each record is bounded too (summary entries, key names, key length), so
// a looping agent cannot grow the run without limit: at most about
// 80 × (16 summary entries + 50 names of ≤ 128 bytes) ≈ 1 MB in the worst
// case, a few KB per record in practice.
const (
	maxAttemptRecords = 80
	maxAttemptSummary = 16
	maxAttemptKeys    = 50
	maxAttemptKeyLen  = 128
)

// attemptSummary is one schema error of a refused answer, without the
// offending value (run-record spec §8.1).
type attemptSummary struct {
	InstancePath    string `json:"instancePath"`
	SchemaPath      string `json:"schemaPath"`
	Keyword         string `json:"keyword"`
	Message         string `json:"message"`
	MissingProperty string `json:"missing_property,omitempty"`
}

// attemptRecord is one refused answer: metadata only, never the values.
type attemptRecord struct {
	RunID                  string           `json:"run_id"`
	WorkflowID             string           `json:"workflow_id"`
	StepID                 string           `json:"step_id"`
	TS                     string           `json:"ts"`
	ErrorCode              string           `json:"error_code"`
	ValidationErrorSummary []attemptSummary `json:"validation_error_summary"`
	SubmittedKeyCount      int              `json:"submitted_key_count"`
	SubmittedKeys          []string         `json:"submitted_keys"`
	SubmittedBytes         int              `json:"submitted_bytes"`
	TraceEntryCount        int              `json:"trace_entry_count"`
}

// attemptList is the stored value: the records, oldest first, and whether
// later records were dropped.
type attemptList struct {
	Records []json.RawMessage `json:"records"`
	Capped  bool              `json:"capped"`
}

// decodeAttempts reads the stored list; a missing field is an empty list.
func decodeAttempts(raw []byte) (attemptList, error) {
	var l attemptList
	if raw == nil {
		return l, nil
	}
	err := json.Unmarshal(raw, &l)
	return l, err
}

// recordAttempt adds a refused answer to the run's attempts list in this
// transaction's write. An unreadable stored list is started afresh rather
// than refusing the write: the list is a diagnostic, the refusal count in
// the record is what decides the step.
func (t *txn) recordAttempt(s *workflow.Step, answer map[string]any, traceEntries int, code errcode.Code, errs []schema.Error) {
	list, _ := decodeAttempts(t.attempts)
	if len(list.Records) >= maxAttemptRecords {
		if list.Capped {
			return
		}
		list.Capped = true
	} else {
		rec := attemptRecord{
			RunID: t.run.ID, WorkflowID: t.run.WorkflowID, StepID: s.Name, TS: t.stamp(),
			ErrorCode: string(code), ValidationErrorSummary: summarize(errs), SubmittedKeyCount: len(answer),
			SubmittedKeys: keyNames(answer), TraceEntryCount: traceEntries,
		}
		if b, err := json.Marshal(answer); err == nil {
			rec.SubmittedBytes = len(b)
		}
		b, err := json.Marshal(rec)
		if err != nil {
			return
		}
		list.Records = append(list.Records, b)
	}
	b, err := json.Marshal(list)
	if err != nil {
		return
	}
	t.attempts, t.attemptsDirty = b, true
	t.touch()
}

func summarize(errs []schema.Error) []attemptSummary {
	out := make([]attemptSummary, 0, min(len(errs), maxAttemptSummary))
	for _, e := range errs[:min(len(errs), maxAttemptSummary)] {
		a := attemptSummary{InstancePath: e.InstancePath, SchemaPath: e.SchemaPath, Keyword: e.Keyword, Message: e.Message}
		if p, ok := e.Params["missingProperty"].(string); ok && e.Keyword == "required" {
			a.MissingProperty = p
		}
		out = append(out, a)
	}
	return out
}

// keyNames are the answer's top-level field names, sorted, capped in
// number and length.
func keyNames(answer map[string]any) []string {
	keys := make([]string, 0, len(answer))
	for k := range answer {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	keys = keys[:min(len(keys), maxAttemptKeys)]
	for i, k := range keys {
		if len(k) > maxAttemptKeyLen {
			keys[i] = strings.ToValidUTF8(k[:maxAttemptKeyLen], "")
		}
	}
	return keys
}
