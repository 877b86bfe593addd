package golden

import (
	"encoding/json"
	"strings"
	"testing"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return v
}

// TestCompareFollowsTheRulesItDocuments pins the comparison itself: each
// case is a golden, a reply, and the paths that must differ (none: equal).
func TestCompareFollowsTheRulesItDocuments(t *testing.T) {
	t.Parallel()
	const runA, runB = "7da561ee-5987-497d-83a5-1eded6dc9b63", "2f22727f-1709-4a9d-8f04-a325cbee6c59"
	const runX, runY = "11111111-2222-4333-8444-555555555555", "66666666-7777-4888-8999-000000000000"
	cases := []struct {
		name         string
		golden, got  string
		opts         Options
		wantDiffPath []string
	}{
		{"ids are masked consistently", `{"run_id":"` + runA + `","context_hint":"Run '` + runA + `' created."}`,
			`{"run_id":"` + runX + `","context_hint":"Run '` + runX + `' created."}`, Options{}, nil},
		{"a reply naming another run fails", `{"run_id":"` + runA + `","context_hint":"Run '` + runA + `' created."}`,
			`{"run_id":"` + runX + `","context_hint":"Run '` + runY + `' created."}`, Options{}, []string{"run_id"}},
		{"two ids are not one", `{"a":"` + runA + `","b":"` + runB + `"}`, `{"a":"` + runX + `","b":"` + runX + `"}`, Options{}, []string{"b"}},
		{"the placeholder <run> is an id", `{"params":{"run_id":"<run>"},"h":"Run '<run>'"}`,
			`{"params":{"run_id":"` + runX + `"},"h":"Run '` + runX + `'"}`, Options{}, nil},
		{"times are masked", `{"at":"2026-10-09T09:14:02.511Z"}`, `{"at":"2027-01-01T00:00:00.000Z"}`, Options{}, nil},
		{"minted workflow ids are masked by their slug", `{"w":"release-notes-88c897726fbda006"}`, `{"w":"release-notes-0123456789abcdef"}`, Options{}, nil},
		{"a minted id's slug is compared", `{"w":"release-notes-88c897726fbda006"}`, `{"w":"dynamic-0123456789abcdef"}`, Options{}, []string{"w"}},
		{"hashes are masked", `{"h":"sha256:` + strings.Repeat("a", 64) + `"}`, `{"h":"sha256:` + strings.Repeat("b", 64) + `"}`, Options{}, nil},
		{"a missing field fails", `{"a":1,"b":2}`, `{"a":1}`, Options{}, []string{"b"}},
		{"a different value fails", `{"a":"x"}`, `{"a":"y"}`, Options{}, []string{"a"}},
		{"an extra empty field passes", `{"a":1}`, `{"a":1,"w":[],"d":{},"s":"","n":null}`, Options{}, nil},
		{"an extra false or 0 fails", `{"a":1}`, `{"a":1,"deduped":false,"n":0}`, Options{}, []string{"deduped", "n"}},
		{"trace counts are empty at 0", `{"a":1}`, `{"a":1,"adopted_own":0,"adopted_anonymous":0,"preserved_foreign":0}`, Options{}, nil},
		{"trace counts above 0 fail", `{"a":1}`, `{"a":1,"adopted_own":1}`, Options{}, []string{"adopted_own"}},
		{"an extra non-empty field fails", `{"a":1}`, `{"a":1,"chained_auto_steps":[{"step":"g"}]}`, Options{}, []string{"chained_auto_steps"}},
		{"… is present, not compared", `{"a":"…"}`, `{"a":{"any":"thing"}}`, Options{}, nil},
		{"… must be present", `{"a":"…"}`, `{}`, Options{}, []string{"a"}},
		{`["…"] is a non-empty list`, `{"n":["…"]}`, `{"n":[{"x":1},{"y":2}]}`, Options{}, nil},
		{`["…"] refuses an empty list`, `{"n":["…"]}`, `{"n":[]}`, Options{}, []string{"n"}},
		{"an object with … may hold more keys", `{"s":{"type":"object","…":"…"}}`, `{"s":{"type":"object","x":1}}`, Options{}, nil},
		{"an object with … still compares its keys", `{"s":{"type":"object","…":"…"}}`, `{"s":{"type":"array"}}`, Options{}, []string{"s.type"}},
		{"lists compare length and order", `{"c":["a","b"]}`, `{"c":["b","a"]}`, Options{}, []string{"c[0]", "c[1]"}},
		{"run_version is masked", `{"run_version":6}`, `{"run_version":3}`, Options{}, nil},
		{"run_version must be a number", `{"run_version":6}`, `{"run_version":"3"}`, Options{}, []string{"run_version"}},
		{"overdue_ms must be > 0", `{"e":{"overdue_ms":184311}}`, `{"e":{"overdue_ms":0}}`, Options{}, []string{"e.overdue_ms"}},
		{"overdue_ms is masked", `{"e":{"overdue_ms":184311}}`, `{"e":{"overdue_ms":12}}`, Options{}, nil},
		{"a fragment ignores other top-level fields", `{"a":1}`, `{"a":1,"b":[1]}`, Options{Fragment: true}, nil},
		{"a fragment is strict below the top", `{"a":{"x":1}}`, `{"a":{"x":1,"y":2}}`, Options{Fragment: true}, []string{"a.y"}},
		{"an elided field must be present", `{"a":1}`, `{"a":1}`, Options{Elided: []string{"gate_claim"}}, []string{"gate_claim"}},
		{"an elided field is not compared", `{"a":1}`, `{"a":1,"gate":{"claim_token":"x"}}`, Options{Elided: []string{"gate.claim_token"}, Fragment: true}, nil},
		{"an absent field must be absent", `{"a":1}`, `{"a":1,"pending_gate":{"g":1}}`, Options{Fragment: true, Absent: []string{"pending_gate"}}, []string{"pending_gate"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			diffs := Compare(decode(t, tc.golden), decode(t, tc.got), tc.opts)
			var paths []string
			for _, d := range diffs {
				paths = append(paths, d.Path)
			}
			if strings.Join(paths, ",") != strings.Join(tc.wantDiffPath, ",") {
				t.Errorf("diff paths = %v, want %v\n%s", paths, tc.wantDiffPath, Report(tc.name, diffs))
			}
		})
	}
}

func TestReportNamesEachDifferenceWithBothValues(t *testing.T) {
	t.Parallel()
	diffs := Compare(decode(t, `{"context_hint":"Gate 'draft' resolved."}`), decode(t, `{"context_hint":"Gate 'draft' done."}`), Options{})
	got := Report("submit_ok", diffs)
	for _, want := range []string{"golden submit_ok: 1 difference(s)", "context_hint: differs", `want: "Gate 'draft' resolved."`, `got:  "Gate 'draft' done."`} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}
