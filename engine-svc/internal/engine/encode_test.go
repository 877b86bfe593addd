package engine

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/realm-go/realm/engine-svc/internal/record"
)

// The memoised encoding must write exactly what json.Marshal writes: the
// evidence hash and the stored entries are compared byte for byte.
func TestMemoisedEntryEncodingMatchesMarshal(t *testing.T) {
	answer := map[string]any{"a": "<b>&\u2028x", "n": 1.5, "z": []any{map[string]any{"q": nil}}}
	tests := []struct {
		name  string
		entry *record.Entry
	}{
		{"answer as input and output summary", &record.Entry{StepID: "s", InputSummary: answer, OutputSummary: answer, Diagnostics: map[string]any{"x": 1}}},
		{"distinct summaries", &record.Entry{StepID: "s", InputSummary: map[string]any{"i": "<"}, OutputSummary: answer}},
		{"nil map summary", &record.Entry{StepID: "s", OutputSummary: map[string]any(nil)}},
		{"non-map summary", &record.Entry{StepID: "s", OutputSummary: []any{"x"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tx := &txn{}
			got, err := tx.encodeJSON(tc.entry.OutputSummary)
			if want, _ := json.Marshal(tc.entry.OutputSummary); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("summary: got %s (%v), want %s", got, err, want)
			}
			got, err = tx.encodeEntry(tc.entry)
			if want, _ := json.Marshal(tc.entry); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("entry:\n got %s (%v)\nwant %s", got, err, want)
			}
		})
	}
}
