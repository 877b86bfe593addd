package quote

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/realm-go/realm/pkg/errcode"
)

func setup(t *testing.T, values ...any) (map[string]any, map[string]any) {
	t.Helper()
	cfg := map[string]any{"source_step": "fetch_document", "candidates_step": "extract_fields", "candidates_field": "fields"}
	res := map[string]any{
		"fetch_document": map[string]any{"text": rentDoc},
		"extract_fields": map[string]any{"fields": values},
	}
	return cfg, res
}

func TestCheckQuotesSeedExample(t *testing.T) {
	t.Parallel()
	cfg, res := setup(t,
		map[string]any{"field": "annual_rent", "value": "48000", "quote": "The rent is €48,000 a year"},
		map[string]any{"field": "payment", "value": "quarterly", "quote": "the rent is paid quarterly"},
	)
	out, warn, err := CheckQuotes(cfg, res)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(out)
	want := `{"all_found":false,"by_state":{"exact":1,"not_found":1,"reformatted":0,"stitched":0,"stitched_out_of_order":0,"unquoted":0},"candidates_found":2,"results":[{"field":"annual_rent","quote":"The rent is €48,000 a year","quote_check":{"occurrences":1,"parts":[{"end":26,"start":0}],"state":"exact"},"value":"48000"},{"field":"payment","quote":"the rent is paid quarterly","quote_check":{"nearest":{"end":42,"start":28},"occurrences":0,"parts":[],"state":"not_found"},"value":"quarterly"}]}`
	if string(got) != want {
		t.Fatalf("output\n got %s\nwant %s", got, want)
	}
	wantWarn := `Quote check: 1 of 2 values not found in 'fetch_document.text': payment — "the rent is paid quarterly" (nearest match at 28–42).`
	if warn != wantWarn {
		t.Fatalf("warning\n got %q\nwant %q", warn, wantWarn)
	}
}

func TestCheckQuotesValuesWithoutAQuote(t *testing.T) {
	t.Parallel()
	cfg, res := setup(t,
		map[string]any{"field": "a", "value": nil},
		map[string]any{"field": "b", "value": ""},
		map[string]any{"field": "c"},
		map[string]any{"field": "d", "value": "x"},
		map[string]any{"field": "e", "value": "x", "quote": 30.0},
		map[string]any{"field": "f", "value": "x", "quote": "nothing like it\x1b here"},
	)
	out, warn, err := CheckQuotes(cfg, res)
	if err != nil {
		t.Fatal(err)
	}
	by := out["by_state"].(map[string]any)
	if by["unquoted"] != 2.0 || by["not_found"] != 4.0 || out["all_found"] != false {
		t.Fatalf("by_state %v all_found %v", by, out["all_found"])
	}
	want := `Quote check: 4 of 6 values not found in 'fetch_document.text': c — no quote given; d — no quote given; e — the quote is not text; f — "nothing like it\u001b here" (no nearby match).`
	if warn != want {
		t.Fatalf("warning\n got %q\nwant %q", warn, want)
	}
}

func TestCheckQuotesAllUnquotedIsAllFound(t *testing.T) {
	t.Parallel()
	cfg, res := setup(t, map[string]any{"field": "a", "value": nil})
	out, warn, err := CheckQuotes(cfg, res)
	if err != nil || warn != "" || out["all_found"] != true {
		t.Fatalf("out %v warn %q err %v", out, warn, err)
	}
}

func TestCheckQuotesWarningNamesTenThenCounts(t *testing.T) {
	t.Parallel()
	var vals []any
	for i := range 12 {
		vals = append(vals, map[string]any{"field": fmt.Sprintf("f%d", i), "value": "x", "quote": "zzz"})
	}
	vals = append(vals, map[string]any{"field": "long", "value": "x", "quote": strings.Repeat("q", 85)})
	cfg, res := setup(t, vals...)
	_, warn, err := CheckQuotes(cfg, res)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(warn, "; and 3 more.") || strings.Count(warn, " — ") != 10 {
		t.Fatalf("warning %q", warn)
	}
	if got := printable(strings.Repeat("q", 80) + "\u0301rest"); got != strings.Repeat("q", 80)+"…" {
		t.Fatalf("printable cut = %q", got)
	}
	if got := printable("line\nbreak"); got != `line\u000abreak` {
		t.Fatalf("printable control = %q", got)
	}
}

func TestCheckQuotesConfigFaultsNamedAtOnce(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  map[string]any
		res  map[string]any
		want []string
	}{
		{name: "every config fault at once", cfg: map[string]any{"colour": "red", "min_part_chars": 3.0, "quote_field": 5.0},
			want: []string{"5 problems", "unknown key 'colour'", "'source_step' is missing", "'candidates_step' is missing", "'min_part_chars' must be a whole number of at least 4", "'quote_field' must be a non-empty string"}},
		{name: "steps with no output", cfg: map[string]any{"source_step": "s", "candidates_step": "c"}, res: map[string]any{},
			want: []string{"step 's' has no output yet", "step 'c' has no output yet", "depends_on"}},
		{name: "a document that is not text", cfg: map[string]any{"source_step": "s", "candidates_step": "c"},
			res:  map[string]any{"s": map[string]any{"text": 3.0}, "c": map[string]any{"candidates": []any{}}},
			want: []string{"'s.text' is not text"}},
		{name: "values that are not a list of objects", cfg: map[string]any{"source_step": "s", "candidates_step": "c"},
			res:  map[string]any{"s": map[string]any{"text": "x"}, "c": map[string]any{"candidates": []any{"a"}}},
			want: []string{"'c.candidates' is not a list of objects"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := CheckQuotes(tc.cfg, tc.res)
			if !errcode.HasCode(err, errcode.EngineHandlerFailed) {
				t.Fatalf("err = %v, want ENGINE_HANDLER_FAILED", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q lacks %q", err.Error(), w)
				}
			}
		})
	}
}

func TestCheckQuotesMinPartChars(t *testing.T) {
	t.Parallel()
	doc := "Rent is due monthly. Water is included. Pets are not allowed in the flat."
	quote := "Rent is due … Pets are not allowed"
	for _, tc := range []struct {
		min   float64
		state string
	}{{4, "stitched"}, {20, "not_found"}} {
		cfg := map[string]any{"source_step": "s", "candidates_step": "c", "min_part_chars": tc.min}
		res := map[string]any{"s": map[string]any{"text": doc}, "c": map[string]any{"candidates": []any{map[string]any{"value": "x", "quote": quote}}}}
		out, _, err := CheckQuotes(cfg, res)
		if err != nil {
			t.Fatal(err)
		}
		got := out["results"].([]any)[0].(map[string]any)["quote_check"].(map[string]any)["state"]
		if got != tc.state {
			t.Errorf("min_part_chars %v: state %v, want %s", tc.min, got, tc.state)
		}
	}
}
