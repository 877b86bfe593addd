package apistub

import "testing"

func TestTheStubEvaluatesTheFormulasTheAdapterWrites(t *testing.T) {
	t.Parallel()
	rec := map[string]any{"Subject": `Quote "urgent" \ now`, "Status": "Open", "n": 2.0}
	tests := []struct {
		formula string
		want    bool
	}{
		{`FIND("urgent", {Subject})`, true},
		{`FIND("\"urgent\" \\ now", {Subject})`, true},
		{`FIND("closed", {Subject})`, false},
		{`FIND("x", {Missing})`, false},
		{`OR(FIND("nope", {Subject}),FIND("Op", {Status}))`, true},
		{`OR(FIND("nope", {Subject}), FIND("no", {Status}))`, false},
		{`{Status} = 'Open'`, true},
		{`{n} = "2"`, true},
		{`{Status} = "Closed"`, false},
	}
	for _, tt := range tests {
		match, err := airtableFormula(tt.formula)
		if err != nil {
			t.Errorf("%s: %v", tt.formula, err)
			continue
		}
		if got := match(rec); got != tt.want {
			t.Errorf("%s = %v, want %v", tt.formula, got, tt.want)
		}
	}
	for _, bad := range []string{`NOT((`, `FIND("x" {a})`, `FIND("x", {a}) junk`, `{a} = "unclosed`, `{a = 'x'`, `AND({a} = 'x')`} {
		if _, err := airtableFormula(bad); err == nil {
			t.Errorf("%s was read; Airtable answers 422 to it", bad)
		}
	}
}
