package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The benchmarks the table reads (names as Parse keeps them).
const (
	core1  = "Transitions/engine_core/runs=1"
	grpc1  = "Transitions/engine/runs=1"
	core32 = "Transitions/engine_core/runs=32"
	grpc32 = "Transitions/engine/runs=32"
	// The same, served as engine-svc serves it: its metrics and its
	// tracing options on.
	deployed32 = "Transitions/engine_metrics/runs=32"
	bare32     = "Transitions/bare_cas/runs=32"
	// noop1 and noop32 are a health check on the engine's server and
	// connection: what gRPC itself costs per call, client and server.
	noop1 = "Transitions/grpc_noop/runs=1"
	// ping1 is a health check whose server first sends one Redis PING,
	// redisPing1 the PING alone; core1p and grpc1p are the 1-run pair on
	// one P (GOMAXPROCS 1).
	ping1      = "Transitions/grpc_ping/runs=1"
	redisPing1 = "Transitions/redis_ping/runs=1"
	core1p     = "Transitions/engine_core_1p/runs=1"
	grpc1p     = "Transitions/engine_1p/runs=1"
	noop32     = "Transitions/grpc_noop/runs=32"
	// paired32 is the floor, the engine core and the engine through gRPC
	// in alternating bursts, 32 runs, and pairedEmbed32 the engine through
	// gRPC on Redis and on the embedded store: the ratios come from them,
	// so the machine's load falls on both sides of each alike.
	paired32      = "Transitions/paired/runs=32"
	pairedEmbed32 = "Transitions/paired_embedded/runs=32"
	mcpNoop       = "MCPFrontDoor/noop-tool/clients=16"
	mcpDoor       = "MCPFrontDoor/execute_step-mcp/clients=16"
	// mcpBound is the bound tool (a go-sdk tool that only makes the
	// door's gRPC call), for its allocations beside the door's.
	mcpBound = "MCPFrontDoor/bound-tool/clients=16"
	// mcpPaired alternates bursts of the no-op tool and the door, so the
	// machine's load falls on both alike; mcpOwn counts the door's own
	// allocations (calls through its handler minus the same gRPC calls).
	mcpPaired = "MCPFrontDoor/paired/clients=16"
	mcpOwn    = "MCPFrontDoor/door-own"
	// mcpApart is mcpPaired with engine-svc and its Redis on a CPU of
	// their own (as deployed: pods of their own), the door and the no-op
	// tool on the others.
	mcpApart = "MCPFrontDoor/paired_engine_apart/clients=16"
	stored   = "StoreSize/stored="
	beside   = "StoreSize/beside="
)

// kind says how a row's figure is printed.
type kind int

const (
	ratio  kind = iota // 0.42
	perSec             // 12,345/s
	micros             // 61 µs
	millis             // 0.08 ms (the figure is in µs)
	count              // 166
	bytes              // 7,479 B
)

// figure computes a row's figure from the i-th repeat; ok is false when
// that repeat lacks a benchmark or metric it needs.
type figure func(r Results, i int) (v float64, ok bool)

// Row is one line of the #23 table: a figure and, unless it is only
// measured alongside, the target it must meet in every repeat.
type Row struct {
	Name    string
	kind    kind
	target  bool
	atLeast bool // the figure must be ≥ limit (else ≤)
	limit   float64
	value   figure
}

// Line is a row as printed.
type Line struct{ Name, Measured, Target, Verdict string }

func metric(name, unit string) figure {
	return func(r Results, i int) (float64, bool) {
		if i >= len(r[name]) {
			return 0, false
		}
		v, ok := r[name][i][unit]
		return v, ok
	}
}

func quotient(a, b figure) figure {
	return func(r Results, i int) (float64, bool) {
		x, ok1 := a(r, i)
		y, ok2 := b(r, i)
		return x / y, ok1 && ok2 && y != 0
	}
}

// minus is a − b − c − ...
func minus(a figure, bs ...figure) figure {
	return func(r Results, i int) (float64, bool) {
		v, ok := a(r, i)
		for _, b := range bs {
			w, ok2 := b(r, i)
			v, ok = v-w, ok && ok2
		}
		return v, ok
	}
}

func atLeast(name string, k kind, limit float64, f figure) Row {
	return Row{Name: name, kind: k, target: true, atLeast: true, limit: limit, value: f}
}

func atMost(name string, k kind, limit float64, f figure) Row {
	return Row{Name: name, kind: k, target: true, limit: limit, value: f}
}

func alongside(name string, k kind, f figure) Row { return Row{Name: name, kind: k, value: f} }

// Rows are issue #23's targets, in the order, with the figures
// they are ratios of measured alongside. The store-size rows follow the
// sizes found in r.
func Rows(r Results) []Row {
	tps := func(n string) figure { return metric(n, "transitions/s") }
	calls := func(n string) figure { return metric(n, "calls/s") }
	allocs := func(n string) figure { return metric(n, "allocs/op") }
	paired := func(unit string) figure { return metric(paired32, unit) }
	rows := []Row{
		alongside("bare compare-and-set script, 32 runs (the floor)", perSec, paired("bare/s")),
		alongside("engine core, 32 runs", perSec, paired("core/s")),
		alongside("engine through gRPC, 32 runs", perSec, paired("grpc/s")),
		atLeast("engine core ÷ bare script, 32 runs (alternating bursts)", ratio, 0.5, paired("core/bare")),
		atLeast("engine through gRPC ÷ bare script, 32 runs (alternating bursts)", ratio, 0.33, paired("grpc/bare")),
		alongside("engine core ÷ bare script, 32 runs, one benchmark after the other", ratio, quotient(tps(core32), tps(bare32))),
		alongside("engine through gRPC ÷ bare script, 32 runs, one benchmark after the other", ratio, quotient(tps(grpc32), tps(bare32))),
		atMost("gRPC's added p50 at 1 run (engine − engine core)", millis, 100, minus(metric(grpc1, "p50-µs"), metric(core1, "p50-µs"))),
		alongside("a no-op gRPC call's p50, 1 caller (the transport's round trip)", millis, metric(noop1, "p50-µs")),
		alongside("gRPC's added p50 for a handler that waits on one Redis PING (no code of ours)", millis, minus(metric(ping1, "p50-µs"), metric(redisPing1, "p50-µs"))),
		alongside("gRPC's added p50 at 1 run on one P (GOMAXPROCS 1: no thread wake-ups)", millis, minus(metric(grpc1p, "p50-µs"), metric(core1p, "p50-µs"))),
		atMost("CPU per transition, engine core, 32 runs (process user+sys)", micros, 60, metric(core32, "cpu-µs/op")),
		alongside("CPU per transition through gRPC, 32 runs (client included)", micros, metric(grpc32, "cpu-µs/op")),
		alongside("CPU per no-op gRPC call, 32 callers (client and server): gRPC's own", micros, metric(noop32, "cpu-µs/op")),
		atMost("allocations per transition, engine core, 32 runs", count, 80, allocs(core32)),
		atMost("allocations per transition through gRPC, 32 runs (client included)", count, 200, allocs(grpc32)),
		alongside("CPU per transition through gRPC, 32 runs, as engine-svc serves it (its metrics and tracing handler on)", micros, metric(deployed32, "cpu-µs/op")),
		alongside("allocations per transition through gRPC, 32 runs, as engine-svc serves it (its metrics and tracing handler on)", count, allocs(deployed32)),
		alongside("allocations of a no-op gRPC call (health check), 32 callers, client and server: gRPC's own", count, allocs(noop32)),
		alongside("allocations through gRPC less the no-op call's: the engine's and its messages'", count, minus(allocs(grpc32), allocs(noop32))),
		alongside("go-sdk no-op tool, 16 clients", perSec, calls(mcpNoop)),
		alongside("MCP door execute_step, 16 clients", perSec, calls(mcpDoor)),
		alongside("go-sdk no-op tool, 16 clients, engine-svc and its Redis on another CPU (paired bursts)", perSec, metric(mcpApart, "noop-calls/s")),
		alongside("MCP door execute_step, 16 clients, engine-svc and its Redis on another CPU (paired bursts)", perSec, metric(mcpApart, "mcp-calls/s")),
		atLeast("MCP door ÷ go-sdk no-op tool, calls/s at 16 clients, engine-svc and its Redis on another CPU, as deployed (paired bursts)", ratio, 0.8, metric(mcpApart, "mcp/noop")),
		alongside("the same pair's CPU per call in its process, go-sdk no-op tool (engine apart)", micros, metric(mcpApart, "noop-cpu-µs/call")),
		alongside("the same pair's CPU per call in its process, MCP door execute_step (engine apart)", micros, metric(mcpApart, "mcp-cpu-µs/call")),
		alongside("a go-sdk tool that only makes the door's gRPC call and answers its reply's bytes (the bound: none of the door's code), 16 clients, engine apart (paired bursts)", perSec, metric(mcpApart, "bound-calls/s")),
		alongside("the same pair's CPU per call in its process, the bound tool (engine apart)", micros, metric(mcpApart, "bound-cpu-µs/call")),
		alongside("the same pair's CPU per call in its process, the door's gRPC call alone, 16 callers (engine apart): what calling the engine adds to any door", micros, metric(mcpApart, "grpc-cpu-µs/call")),
		alongside("the bound ÷ go-sdk no-op tool, engine apart: what any door that calls the engine over gRPC reaches on this SDK", ratio, metric(mcpApart, "bound/noop")),
		alongside("MCP door ÷ the bound, engine apart: what the door's own code leaves of it (1.00: nothing measurable)", ratio, metric(mcpApart, "mcp/bound")),
		alongside("MCP door ÷ go-sdk no-op tool, calls/s at 16 clients, the engine and Redis on the same cores (paired bursts)", ratio, metric(mcpPaired, "mcp/noop")),
		alongside("a door that cost nothing ÷ go-sdk no-op tool, 16 clients, the engine and Redis on the same cores (the bound there)", ratio, metric(mcpPaired, "free-door/noop")),
		atMost("MCP door's own allocations per call (its handler − the same gRPC call)", count, 100, metric(mcpOwn, "door-allocs/call")),
		alongside("allocations per call in the process, 16 clients, the engine in it too: go-sdk no-op tool", count, allocs(mcpNoop)),
		alongside("allocations per call in the process, 16 clients, the engine in it too: the bound tool", count, allocs(mcpBound)),
		alongside("allocations per call in the process, 16 clients, the engine in it too: MCP door execute_step", count, allocs(mcpDoor)),
		alongside("MCP door − the bound, allocations per call: the door's code and its HTTP layer (token, request metrics, trace context)", count, minus(allocs(mcpDoor), allocs(mcpBound))),
	}
	small, grown := storeSizes(r)
	if small == 0 {
		small = 1000 // for the "not measured" rows
	}
	// Each grown size N is measured beside the small store (the pair
	// takes turns, repeat i with repeat i); with no grown size, the small
	// store alone.
	// The small store's first measurement (it carries bytes per run).
	smallFirst := stored + strconv.Itoa(small)
	if len(grown) > 0 {
		smallFirst = besideName(grown[0], small)
	}
	for _, n := range grown {
		beside, big := besideName(n, small), besideName(n, n)
		sn, nn := thousands(float64(small)), thousands(float64(n))
		rows = append(rows,
			alongside(fmt.Sprintf("transitions/s through gRPC, 32 runs, %s stored runs (beside %s)", sn, nn), perSec, tps(beside)),
			alongside(fmt.Sprintf("transitions/s through gRPC, 32 runs, %s stored runs", nn), perSec, tps(big)),
			alongside(fmt.Sprintf("Redis's own time per commit script, %s / %s stored runs (INFO commandstats)", sn, nn), micros, metric(beside, "redis-µs/commit")),
			alongside(fmt.Sprintf("Redis's own time per commit script, %s stored runs (INFO commandstats)", nn), micros, metric(big, "redis-µs/commit")),
			atLeast(fmt.Sprintf("transitions/s at %s stored ÷ at %s, side by side", nn, sn), ratio, 0.8, quotient(tps(big), tps(beside))),
			atMost(fmt.Sprintf("`run list` page p99, %s stored (beside %s)", sn, nn), millis, 20000, metric(beside, "list-p99-µs")),
			atMost(fmt.Sprintf("`run list` page p99, %s stored", nn), millis, 20000, metric(big, "list-p99-µs")),
			atMost(fmt.Sprintf("`run list --stuck` p99, %s stored (beside %s)", sn, nn), millis, 20000, metric(beside, "stuck-p99-µs")),
			atMost(fmt.Sprintf("`run list --stuck` p99, %s stored", nn), millis, 20000, metric(big, "stuck-p99-µs")),
		)
	}
	if len(grown) == 0 {
		sn := thousands(float64(small))
		rows = append(rows,
			alongside(fmt.Sprintf("transitions/s through gRPC, 32 runs, %s stored runs", sn), perSec, tps(smallFirst)),
			atMost(fmt.Sprintf("`run list` page p99, %s stored", sn), millis, 20000, metric(smallFirst, "list-p99-µs")),
			atMost(fmt.Sprintf("`run list --stuck` p99, %s stored", sn), millis, 20000, metric(smallFirst, "stuck-p99-µs")))
	}
	rows = append(rows,
		alongside("Redis memory per finished ten-step run as written (before the sweep packs it)", bytes, metric(smallFirst, "B/finished-run-unpacked")),
		atMost("Redis memory per finished ten-step run, packed", bytes, 2048, metric(smallFirst, "B/finished-run")))
	return append(rows,
		alongside("engine through gRPC on the embedded store, 32 runs", perSec, metric(pairedEmbed32, "embedded/s")),
		alongside("engine through gRPC on Redis, 32 runs (in bursts with the embedded store)", perSec, metric(pairedEmbed32, "redis/s")),
		atLeast("embedded store ÷ Redis, engine through gRPC, 32 runs (alternating bursts)", ratio, 0.5, metric(pairedEmbed32, "embedded/redis")))
}

// besideName is the StoreSize measurement of the store holding stored
// runs, taken in turns with the other store of the pair for grown size n.
func besideName(n, stored int) string {
	return fmt.Sprintf("%s%d/stored=%d", beside, n, stored)
}

// storeSizes reads the StoreSize samples' sizes: the small store's, and
// the grown sizes it was measured beside, ascending. small is 0 when no
// store-size sample is in r.
func storeSizes(r Results) (small int, grown []int) {
	for name := range r {
		if rest, ok := strings.CutPrefix(name, beside); ok {
			n, m, ok := strings.Cut(rest, "/stored=")
			nv, err1 := strconv.Atoi(n)
			mv, err2 := strconv.Atoi(m)
			if !ok || err1 != nil || err2 != nil {
				continue
			}
			if nv != mv {
				small = mv
			}
			if !slices.Contains(grown, nv) {
				grown = append(grown, nv)
			}
		} else if rest, ok := strings.CutPrefix(name, stored); ok {
			if n, err := strconv.Atoi(rest); err == nil && small == 0 {
				small = n
			}
		}
	}
	slices.Sort(grown)
	return small, grown
}

// maxRepeats bounds the repeats a row is computed for.
const maxRepeats = 100

// Evaluate computes each row over every repeat that has its figures: the
// range, and whether the target is met in all of them, some or none.
func Evaluate(r Results) []Line {
	var out []Line
	for _, row := range Rows(r) {
		var vals []float64
		for i := range maxRepeats {
			v, ok := row.value(r, i)
			if !ok {
				break
			}
			vals = append(vals, v)
		}
		l := Line{Name: row.Name, Measured: "not measured", Target: "—", Verdict: "—"}
		if row.target {
			l.Target = row.targetText()
			l.Verdict = "not measured"
		}
		if len(vals) > 0 {
			l.Measured = rangeText(row.kind, vals)
			if row.target {
				l.Verdict = row.verdict(vals)
			}
		}
		out = append(out, l)
	}
	return out
}

func (row Row) meets(v float64) bool {
	if row.atLeast {
		return v >= row.limit
	}
	return v <= row.limit
}

func (row Row) verdict(vals []float64) string {
	met := 0
	for _, v := range vals {
		if row.meets(v) {
			met++
		}
	}
	switch met {
	case len(vals):
		return "met"
	case 0:
		return "not met"
	}
	return fmt.Sprintf("met in %d of %d", met, len(vals))
}

func (row Row) targetText() string {
	op := "≤ "
	if row.atLeast {
		op = "≥ "
	}
	return op + format(row.kind, row.limit)
}

// rangeText is "min – max" of vals with the unit once, or the one figure
// when they agree.
func rangeText(k kind, vals []float64) string {
	lo, unit := number(k, slices.Min(vals))
	hi, _ := number(k, slices.Max(vals))
	if lo == hi {
		return lo + unit
	}
	return lo + " – " + hi + unit
}

func format(k kind, v float64) string {
	n, unit := number(k, v)
	return n + unit
}

// number is v printed for its kind, and the unit that follows it.
func number(k kind, v float64) (string, string) {
	switch k {
	case ratio:
		return strconv.FormatFloat(v, 'f', 2, 64), ""
	case perSec:
		return thousands(v), "/s"
	case micros:
		return thousands(v), " µs"
	case millis:
		return strconv.FormatFloat(v/1000, 'f', 2, 64), " ms"
	case bytes:
		return thousands(v), " B"
	}
	return thousands(v), ""
}

// thousands rounds v and groups its digits by three: 1234567 → 1,234,567.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(math.Round(math.Abs(v))), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if v < 0 && s != "0" {
		s = "−" + s
	}
	return s
}

// Markdown prints lines as a Markdown table.
func Markdown(lines []Line) string {
	var b strings.Builder
	b.WriteString("| Row | Measured (range of repeats) | Target | Verdict |\n| --- | ---: | ---: | --- |\n")
	for _, l := range lines {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", l.Name, l.Measured, l.Target, l.Verdict)
	}
	return b.String()
}
