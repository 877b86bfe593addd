package handler_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/realm-go/realm/pkg/handler"
)

// The values the contract's helper examples use.
func seedValues() (resources map[string]any, data any, candidates []any) {
	resources = map[string]any{"fetch": map[string]any{"text": "Payment is due in 30 days.", "pages": 2}}
	data = map[string]any{"clauses": []any{
		map[string]any{"quote": "due in 30 days", "page": 1},
		map[string]any{"quote": "due in 60 days", "nested": map[string]any{"quote": "Payment"}},
	}}
	candidates = []any{
		map[string]any{"quote": "due in 30 days"},
		map[string]any{"quote": "due in 60 days"},
		map[string]any{"quote": 30},
		map[string]any{"other": "x"},
		map[string]any{"quote": "payment"},
	}
	return resources, data, candidates
}

// sameJSON fails t unless got encodes to the same JSON value as want (key
// order aside).
func sameJSON(t *testing.T, got any, want string) {
	t.Helper()
	raw, err := json.Marshal(got)
	if err != nil {
		t.Fatalf("marshal %v: %v", got, err)
	}
	var g, w any
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("got %s, want %s", raw, want)
	}
}

func TestResolveResourceFollowsTheContractTable(t *testing.T) {
	t.Parallel()
	resources, _, _ := seedValues()
	tests := []struct {
		name      string
		resources map[string]any
		step      string
		field     string
		want      any
		wantOK    bool
	}{
		{"a present field is returned", resources, "fetch", "text", "Payment is due in 30 days.", true},
		{"a missing field is undefined", resources, "fetch", "missing", nil, false},
		{"a missing step is undefined", resources, "nope", "text", nil, false},
		{"nil resources are undefined", nil, "fetch", "text", nil, false},
		{"an entry that is not an object is undefined", map[string]any{"fetch": "text"}, "fetch", "text", nil, false},
		{"a field holding null is present", map[string]any{"fetch": map[string]any{"text": nil}}, "fetch", "text", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := handler.ResolveResource(tt.resources, tt.step, tt.field)
			if ok != tt.wantOK || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ResolveResource = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestWalkFieldFollowsTheContractTable(t *testing.T) {
	t.Parallel()
	_, data, _ := seedValues()
	tests := []struct {
		name  string
		data  any
		field string
		want  string
	}{
		{"objects at every depth, parent before child", data, "quote",
			`[{"quote":"due in 30 days","page":1},{"quote":"due in 60 days","nested":{"quote":"Payment"}},{"quote":"Payment"}]`},
		{"a string has no objects", "text", "quote", `[]`},
		{"the value itself can match", map[string]any{"quote": 1}, "quote", `[{"quote":1}]`},
		{"nil gives an empty list", nil, "quote", `[]`},
		{"a list of lists is searched", []any{[]any{map[string]any{"quote": "a"}}}, "quote", `[{"quote":"a"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sameJSON(t, handler.WalkField(tt.data, tt.field), tt.want)
		})
	}
}

func TestWalkFieldVisitsKeysInSortedOrder(t *testing.T) {
	t.Parallel()
	data := map[string]any{
		"b": map[string]any{"q": "second"},
		"a": map[string]any{"q": "first"},
		"c": []any{map[string]any{"q": "third"}},
	}
	for range 20 { // map iteration order varies between calls
		sameJSON(t, handler.WalkField(data, "q"), `[{"q":"first"},{"q":"second"},{"q":"third"}]`)
	}
}

func TestPartitionBySubstringFollowsTheContractTable(t *testing.T) {
	t.Parallel()
	_, _, candidates := seedValues()
	tests := []struct {
		name       string
		candidates []any
		source     string
		want       string
	}{
		{"exact substring, letter case included", candidates, "Payment is due in 30 days.",
			`{"accepted":[{"quote":"due in 30 days"}],"rejected":[{"quote":"due in 60 days"},{"quote":30},{"other":"x"},{"quote":"payment"}]}`},
		{"an empty quote is in any text", []any{map[string]any{"quote": ""}}, "abc",
			`{"accepted":[{"quote":""}],"rejected":[]}`},
		{"an empty source rejects everything", []any{map[string]any{"quote": ""}, map[string]any{"quote": "x"}}, "",
			`{"accepted":[],"rejected":[{"quote":""},{"quote":"x"}]}`},
		{"a candidate that is not an object is rejected", []any{"due", nil}, "due",
			`{"accepted":[],"rejected":["due",null]}`},
		{"no candidates", nil, "abc", `{"accepted":[],"rejected":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sameJSON(t, handler.PartitionBySubstring(tt.candidates, "quote", tt.source), tt.want)
		})
	}
}

func TestCountResultsFollowsTheContractTable(t *testing.T) {
	t.Parallel()
	_, _, candidates := seedValues()
	p := handler.PartitionBySubstring(candidates, "quote", "Payment is due in 30 days.")
	tests := []struct {
		name               string
		accepted, rejected []any
		want               string
	}{
		{"the seed's partition", p.Accepted, p.Rejected, `{"accepted_count":1,"rejected_count":4,"candidates_found":5}`},
		{"two empty lists", []any{}, []any{}, `{"accepted_count":0,"rejected_count":0,"candidates_found":0}`},
		{"nil lists count as empty", nil, nil, `{"accepted_count":0,"rejected_count":0,"candidates_found":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sameJSON(t, handler.CountResults(tt.accepted, tt.rejected), tt.want)
		})
	}
}

func TestCompareStringsFollowsTheContractTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b, mode string
		want       bool
		wantOK     bool // false: the contract's undefined
	}{
		{"INV-2041", "INV-2041", "exact", true, true},
		{"INV-2041", "inv-2041", "exact", false, true},
		{"INV-2041", "INV-", "prefix", true, true},
		{"INV-2041", "2041", "prefix", false, true},
		{"INV-2041", `^INV-\d+$`, "regex", true, true},
		{"INV-2041", `\d+`, "regex", true, true},
		{"INV-2041", `^\d+$`, "regex", false, true},
		{"INV-2041", "(", "regex", false, true},
		{"INV-2041", "INV", "other", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.mode+" "+tt.b, func(t *testing.T) {
			t.Parallel()
			got, ok := handler.CompareStrings(tt.a, tt.b, tt.mode)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("CompareStrings(%q, %q, %q) = %v, %v; want %v, %v", tt.a, tt.b, tt.mode, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
