package main

import (
	"os"
	"strings"
	"testing"
)

func TestParseLineReadsResultLinesOnly(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       string
		units      map[string]float64
	}{
		{name: "a result line loses its prefix and GOMAXPROCS suffix",
			line: "BenchmarkTransitions/engine/runs=32-2   \t   30000\t  200000 ns/op\t  5000 transitions/s\t  465 allocs/op",
			want: "Transitions/engine/runs=32", units: map[string]float64{"N": 30000, "ns/op": 200000, "transitions/s": 5000, "allocs/op": 465}},
		{name: "without a GOMAXPROCS suffix the name is kept whole",
			line: "BenchmarkStoreSize/stored=1000 \t 10 \t 5 ns/op\t 7479 B/finished-run",
			want: "StoreSize/stored=1000", units: map[string]float64{"N": 10, "ns/op": 5, "B/finished-run": 7479}},
		{name: "a repeated sub-benchmark's #NN goes, so its repeats share a name",
			line: "BenchmarkStoreSize/beside=1000000/stored=1000#02-2 \t 10 \t 5 ns/op",
			want: "StoreSize/beside=1000000/stored=1000", units: map[string]float64{"N": 10, "ns/op": 5}},
		{name: "a benchmark's name line alone is not a result", line: "BenchmarkTransitions/engine/runs=32"},
		{name: "a failure line is not a result", line: "--- FAIL: BenchmarkStoreSize/stored=1000"},
		{name: "a figure without a unit is not a result", line: "BenchmarkX-2  10  5 ns/op 7"},
		{name: "PASS is not a result", line: "PASS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, s, ok := ParseLine(tc.line)
			if ok != (tc.want != "") || name != tc.want {
				t.Fatalf("ParseLine = %q, %v; want %q", name, ok, tc.want)
			}
			for u, v := range tc.units {
				if s[u] != v {
					t.Errorf("%s = %v, want %v", u, s[u], v)
				}
			}
			if ok && len(s) != len(tc.units) {
				t.Errorf("sample %v has units beyond %v", s, tc.units)
			}
		})
	}
}

// recorded is testdata/recorded.txt: three rounds and a store-size run,
// with figures chosen so each verdict occurs.
func recorded(t *testing.T) Results {
	t.Helper()
	f, err := os.Open("testdata/recorded.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestEvaluateGivesEachRowItsRangeAndVerdict(t *testing.T) {
	lines := map[string]Line{}
	for _, l := range Evaluate(recorded(t)) {
		lines[l.Name] = l
	}
	for _, want := range []Line{
		{"bare compare-and-set script, 32 runs (the floor)", "40,000/s", "—", "—"},
		{"engine core ÷ bare script, 32 runs (alternating bursts)", "0.25 – 0.50", "≥ 0.50", "met in 1 of 3"},
		{"engine through gRPC ÷ bare script, 32 runs (alternating bursts)", "0.10 – 0.12", "≥ 0.33", "not met"},
		{"engine core ÷ bare script, 32 runs, one benchmark after the other", "0.25 – 0.50", "—", "—"},
		{"gRPC's added p50 at 1 run (engine − engine core)", "0.07 – 0.35 ms", "≤ 0.10 ms", "met in 2 of 3"},
		{"a no-op gRPC call's p50, 1 caller (the transport's round trip)", "0.04 ms", "—", "—"},
		{"gRPC's added p50 for a handler that waits on one Redis PING (no code of ours)", "0.08 – 0.09 ms", "—", "—"},
		{"gRPC's added p50 at 1 run on one P (GOMAXPROCS 1: no thread wake-ups)", "0.05 – 0.06 ms", "—", "—"},
		{"CPU per transition, engine core, 32 runs (process user+sys)", "129 – 140 µs", "≤ 60 µs", "not met"},
		{"CPU per transition through gRPC, 32 runs (client included)", "341 – 360 µs", "—", "—"},
		{"CPU per no-op gRPC call, 32 callers (client and server): gRPC's own", "46 µs", "—", "—"},
		{"allocations per transition, engine core, 32 runs", "168 – 170", "≤ 80", "not met"},
		{"allocations per transition through gRPC, 32 runs (client included)", "465 – 467", "≤ 200", "not met"},
		{"CPU per transition through gRPC, 32 runs, as engine-svc serves it (its metrics and tracing handler on)", "372 – 380 µs", "—", "—"},
		{"allocations per transition through gRPC, 32 runs, as engine-svc serves it (its metrics and tracing handler on)", "488 – 490", "—", "—"},
		{"allocations of a no-op gRPC call (health check), 32 callers, client and server: gRPC's own", "135 – 136", "—", "—"},
		{"allocations through gRPC less the no-op call's: the engine's and its messages'", "330 – 332", "—", "—"},
		{"MCP door ÷ go-sdk no-op tool, calls/s at 16 clients, engine-svc and its Redis on another CPU, as deployed (paired bursts)", "0.78 – 0.91", "≥ 0.80", "met in 2 of 3"},
		{"MCP door execute_step, 16 clients, engine-svc and its Redis on another CPU (paired bursts)", "780 – 1,001/s", "—", "—"},
		{"the same pair's CPU per call in its process, MCP door execute_step (engine apart)", "690 – 720 µs", "—", "—"},
		{"the same pair's CPU per call in its process, the door's gRPC call alone, 16 callers (engine apart): what calling the engine adds to any door", "90 – 95 µs", "—", "—"},
		{"the bound ÷ go-sdk no-op tool, engine apart: what any door that calls the engine over gRPC reaches on this SDK", "0.76 – 0.90", "—", "—"},
		{"MCP door ÷ the bound, engine apart: what the door's own code leaves of it (1.00: nothing measurable)", "0.98 – 1.03", "—", "—"},
		{"MCP door ÷ go-sdk no-op tool, calls/s at 16 clients, the engine and Redis on the same cores (paired bursts)", "0.60 – 0.85", "—", "—"},
		{"MCP door's own allocations per call (its handler − the same gRPC call)", "40 – 120", "≤ 100", "met in 2 of 3"},
		{"transitions/s through gRPC, 32 runs, 1,000,000 stored runs", "3,000 – 4,000/s", "—", "—"},
		{"transitions/s through gRPC, 32 runs, 1,000 stored runs (beside 1,000,000)", "4,000 – 4,200/s", "—", "—"},
		{"transitions/s at 1,000,000 stored ÷ at 1,000, side by side", "0.75 – 0.98", "≥ 0.80", "met in 2 of 3"},
		{"Redis's own time per commit script, 1,000,000 stored runs (INFO commandstats)", "26 – 27 µs", "—", "—"},
		{"`run list` page p99, 1,000 stored (beside 1,000,000)", "15.00 – 17.00 ms", "≤ 20.00 ms", "met"},
		{"`run list` page p99, 1,000,000 stored", "19.00 – 25.00 ms", "≤ 20.00 ms", "met in 1 of 3"},
		{"`run list --stuck` p99, 1,000,000 stored", "5.00 – 5.20 ms", "≤ 20.00 ms", "met"},
		{"Redis memory per finished ten-step run as written (before the sweep packs it)", "7,532 B", "—", "—"},
		{"Redis memory per finished ten-step run, packed", "1,545 B", "≤ 2,048 B", "met"},
		{"engine through gRPC on the embedded store, 32 runs", "2,000 – 2,500/s", "—", "—"},
		{"embedded store ÷ Redis, engine through gRPC, 32 runs (alternating bursts)", "0.40 – 0.62", "≥ 0.50", "met in 2 of 3"},
	} {
		if got, ok := lines[want.Name]; !ok {
			t.Errorf("no row %q", want.Name)
		} else if got != want {
			t.Errorf("row %q:\n got %+v\nwant %+v", want.Name, got, want)
		}
	}
}

func TestEvaluateSaysWhatWasNotMeasured(t *testing.T) {
	r := recorded(t)
	delete(r, mcpOwn)
	delete(r, mcpApart) // a machine of one CPU, or without taskset
	delete(r, besideName(1000000, 1000000))
	delete(r, besideName(1000000, 1000))
	var names []string
	for _, l := range Evaluate(r) {
		names = append(names, l.Name)
		if strings.HasPrefix(l.Name, "MCP door's own allocations") && (l.Measured != "not measured" || l.Verdict != "not measured") {
			t.Errorf("row without its door-own figures reads %+v", l)
		}
		if strings.Contains(l.Name, "on another CPU") && l.Measured != "not measured" {
			t.Errorf("row without the engine apart reads %+v", l)
		}
		if strings.Contains(l.Name, "1,000,000") {
			t.Errorf("row for a store size not measured: %q", l.Name)
		}
	}
	if md := Markdown(Evaluate(r)); strings.Count(md, "\n") != len(names)+2 {
		t.Errorf("the Markdown table has %d lines for %d rows:\n%s", strings.Count(md, "\n"), len(names), md)
	}
}
