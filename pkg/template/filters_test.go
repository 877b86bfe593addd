package template

import (
	"testing"
	"time"
	"unicode/utf8"
)

// TestFilters renders `{{ run.params.v | <chain> }}` with v set to the
// case's input. want == "" with failed == true means the expression must be
// left as written (filter failure rule).
func TestFilters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		v      any
		chain  string
		want   string
		failed bool
	}{
		// bullets
		{"bullets one line per item", []any{"a", 2.0}, "bullets", "• a\n• 2", false},
		{"bullets empty list fails", []any{}, "bullets", "", true},
		{"bullets on text fails", "a", "bullets", "", true},
		// join
		{"join default separator", []any{"a", "b", "c"}, "join", "a, b, c", false},
		{"join custom separator", []any{"a", "b"}, `join: " | "`, "a | b", false},
		{"join empty list", []any{}, "join", "", false},
		{"join on text fails", "abc", "join", "", true},
		// default
		{"default keeps present", "x", `default: "y"`, "x", false},
		// upper / lower
		{"upper", "Refund", "upper", "REFUND", false},
		{"lower", "Refund", "lower", "refund", false},
		{"upper on number fails", 3.0, "upper", "", true},
		// capitalize (doc example)
		{"capitalize doc example", "refund request", "capitalize", "Refund request", false},
		{"capitalize empty", "", "capitalize", "", false},
		// truncate (doc: limit 30 gave a 25-character result ending …)
		{"truncate at word boundary", "Please review the refund request for order 1182", "truncate: 30", "Please review the refund…", false},
		{"truncate short text unchanged", "short", "truncate: 30", "short", false},
		{"truncate without spaces", "abcdefghij", "truncate: 5", "abcd…", false},
		{"truncate bad limit fails", "abc", "truncate: x", "", true},
		// pluck
		{"pluck key", []any{map[string]any{"id": "A"}, map[string]any{"id": "B"}}, `pluck: "id" | join`, "A, B", false},
		{"pluck absent key gives null", []any{map[string]any{"id": "A"}, map[string]any{}}, `pluck: "id" | compact | join`, "A", false},
		{"pluck on list of text fails", []any{"a"}, `pluck: "id"`, "", true},
		// count / limit
		{"count", []any{1.0, 2.0, 3.0}, "count", "3", false},
		{"count on text fails", "abc", "count", "", true},
		{"limit", []any{"a", "b", "c"}, "limit: 2 | join", "a, b", false},
		{"limit beyond length", []any{"a"}, "limit: 5 | join", "a", false},
		// compact (doc: "a,b,,c" | split | compact | join "+" → a+b++c)
		{"compact keeps empty strings", "a,b,,c", `split: "," | compact | join: "+"`, "a+b++c", false},
		{"compact removes nulls", []any{"a", nil, "b"}, "compact | join", "a, b", false},
		// round / floor / ceil / abs
		{"round doc example", 1234.5678, "round: 1", "1234.6", false},
		{"round default 0", 2.5, "round", "3", false},
		{"round on text fails", "1.5", "round", "", true},
		{"floor", 2.7, "floor", "2", false},
		{"ceil", 2.1, "ceil", "3", false},
		{"abs", -4.5, "abs", "4.5", false},
		// number_format (doc example 1,234.57)
		{"number_format doc example", 1234.5678, "number_format: 2", "1,234.57", false},
		{"number_format default 0", 1234567.0, "number_format", "1,234,567", false},
		{"number_format negative", -9876.5, "number_format: 1", "-9,876.5", false},
		{"number_format small", 12.0, "number_format", "12", false},
		// percent (doc example 0.857 → 85.7% with 1)
		{"percent doc example", 0.857, "percent: 1", "85.7%", false},
		{"percent default 0", 0.5, "percent", "50%", false},
		// replace (all occurrences)
		{"replace all occurrences", "a-b-c", `replace: "-", "+"`, "a+b+c", false},
		{"replace on number fails", 1.0, `replace: "1", "2"`, "", true},
		// yesno
		{"yesno default true", true, "yesno", "yes", false},
		{"yesno default false", false, "yesno", "no", false},
		{"yesno custom words", true, `yesno: "Approved", "Rejected"`, "Approved", false},
		{"yesno on text fails", "true", "yesno", "", true},
		// and_join
		{"and_join two", []any{"a", "b"}, "and_join", "a and b", false},
		{"and_join three", []any{"a", "b", "c"}, "and_join", "a, b and c", false},
		{"and_join one", []any{"a"}, "and_join", "a", false},
		{"and_join empty fails", []any{}, "and_join", "", true},
		// trim
		{"trim", "  hi \n", "trim", "hi", false},
		// first / last
		{"first", []any{"a", "b"}, "first", "a", false},
		{"last", []any{"a", "b"}, "last", "b", false},
		{"first empty fails", []any{}, "first", "", true},
		{"last empty fails", []any{}, "last", "", true},
		// sum
		{"sum", []any{1.0, 2.5, 3.0}, "sum", "6.5", false},
		{"sum with text fails", []any{1.0, "2"}, "sum", "", true},
		// flatten (doc: [[1,2],[3]] → 1, 2, 3 after join)
		{"flatten doc example", []any{[]any{1.0, 2.0}, []any{3.0}}, "flatten | join", "1, 2, 3", false},
		{"flatten one level only", []any{[]any{[]any{1.0}}}, "flatten | count", "1", false},
		// split
		{"split keeps empty parts", "a,,b", `split: "," | count`, "3", false},
		{"split on list fails", []any{"a"}, `split: ","`, "", true},
		// sort / unique
		{"sort numbers", []any{3.0, 1.0, 2.0}, "sort | join", "1, 2, 3", false},
		{"sort text", []any{"b", "a", "c"}, "sort | join", "a, b, c", false},
		{"sort mixed fails", []any{"b", 1.0}, "sort", "", true},
		{"unique first occurrence order", []any{"b", "a", "b", "c", "a"}, "unique | join", "b, a, c", false},
		// title
		{"title", "ada lovelace", "title", "Ada Lovelace", false},
		// code (doc example DATABASE_DOWN unchanged; recommendation: upper snake)
		{"code doc example", "DATABASE_DOWN", "code", "DATABASE_DOWN", false},
		{"code from words", "database down", "code", "DATABASE_DOWN", false},
		{"code from camel case", "databaseDown", "code", "DATABASE_DOWN", false},
		// indent
		{"indent every line", "a\nb", "indent: 4", "    a\n    b", false},
		// date (doc formats)
		{"date short default", "2026-01-28T14:05:00Z", "date", "Jan 28, 2026", false},
		{"date short", "2026-01-28T14:05:00Z", `date: "short"`, "Jan 28, 2026", false},
		{"date long", "2026-01-28T14:05:00Z", `date: "long"`, "January 28, 2026", false},
		{"date iso", "2026-01-28T14:05:00Z", `date: "iso"`, "2026-01-28", false},
		{"date time", "2026-01-28T14:05:00Z", `date: "time"`, "14:05", false},
		{"date datetime", "2026-01-28T14:05:00Z", `date: "datetime"`, "Jan 28, 2026, 14:05", false},
		{"date converts to UTC", "2026-01-28T15:05:00+01:00", `date: "time"`, "14:05", false},
		{"date bare day", "2026-01-28", "date", "Jan 28, 2026", false},
		{"date not a date fails", "soon", "date", "", true},
		{"date unknown format fails", "2026-01-28", `date: "weird"`, "", true},
		// from_now (clock fixed at 2026-10-02T12:00Z)
		{"from_now doc example", "2026-01-28T14:05:00Z", "from_now", "246 days ago", false},
		{"from_now hours", "2026-10-02T09:00:00Z", "from_now", "3 hours ago", false},
		{"from_now singular", "2026-10-02T11:59:00Z", "from_now", "1 minute ago", false},
		{"from_now future", "2026-10-05T12:00:00Z", "from_now", "in 3 days", false},
		// duration (doc example 83000 → 1m 23s)
		{"duration doc example", 83000.0, "duration", "1m 23s", false},
		{"duration hours", 3723000.0, "duration", "1h 2m 3s", false},
		{"duration exact minute", 60000.0, "duration", "1m", false},
		{"duration milliseconds", 500.0, "duration", "500ms", false},
		{"duration on text fails", "83000", "duration", "", true},
	}
	now := func() time.Time { return time.Date(2026, 10, 2, 12, 0, 0, 0, time.UTC) }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			text := "{{ run.params.v | " + tt.chain + " }}"
			s := Scope{Params: map[string]any{"v": tt.v}, Now: now}
			got, unresolved, err := Render(text, s, ModePrompt)
			if err != nil || len(unresolved) != 0 {
				t.Fatalf("err %v unresolved %v", err, unresolved)
			}
			want := tt.want
			if tt.failed {
				want = text
			}
			if got != want {
				t.Errorf("got %q want %q", got, want)
			}
		})
	}
}

func TestTruncateLength(t *testing.T) {
	t.Parallel()
	out, ok := fTruncate("Please review the refund request for order 1182", []string{"30"}, Scope{})
	if !ok || utf8.RuneCountInString(out.(string)) != 25 {
		t.Errorf("got %q, want 25 characters", out)
	}
}

func TestEveryFilterRefusesWrongKind(t *testing.T) {
	t.Parallel()
	// A map is a kind no filter except default accepts; none may panic.
	for _, name := range FilterNames() {
		if name == "default" {
			continue
		}
		if _, ok := filters[name](map[string]any{"a": 1}, nil, Scope{}); ok {
			t.Errorf("filter %s accepted a map", name)
		}
	}
}
