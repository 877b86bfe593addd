// Command bench is `make bench`: it measures the rows of issue #23 (the
// engine against the bare compare-and-set floor, CPU and allocations per
// transition, the MCP door against the go-sdk floor, costs as the store
// grows to a million runs, the embedded store against Redis) and prints
// one table: each row's range over the repeats, its target, met or not.
//
// It builds the engine-svc and mcp-svc test binaries once and runs their
// Go benchmarks: the transition, embedded and MCP benchmarks in rounds
// (round 1 of each, then round 2, ...), so the repeats alternate; each
// ratio's two sides are measured in alternating bursts within one
// benchmark (Transitions/paired and paired_embedded, MCPFrontDoor/paired); the store-size
// benchmark once, with two stores at once: the smallest size throughout,
// and one grown through the larger sizes, each measured in turns with it.
// Redis is the server at REDIS_URL (default 127.0.0.1:6379); the
// benchmarks write under key prefixes of their own and delete them. For
// the MCP door's ratio as deployed it also builds engine-svc and runs it,
// with a redis-server of its own, on the last CPU (taskset), and the MCP
// benchmark on the others.
//
//	go run ./tests/bench            # the full table (up to an hour)
//	BENCH_QUICK=1 go run ./tests/bench   # fewer transitions, no 1M store
//	go run ./tests/bench -from out.txt   # the table of a recorded output
//	go run ./tests/bench -attribute      # where a transition's CPU and allocations go, by owner
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"
)

// config is what one invocation measures.
type config struct {
	rounds      int
	transitions int    // per transition benchmark
	mcpCalls    int    // per MCP benchmark
	sizes       string // stored runs, comma-separated
	listCalls   int    // ListRuns calls per p99
	parts       string // "rounds", "store" or both
}

func defaults(quick bool) config {
	if quick {
		return config{rounds: 3, transitions: 3000, mcpCalls: 1000, sizes: "1000,10000", listCalls: 50}
	}
	return config{rounds: 3, transitions: 30000, mcpCalls: 30000, sizes: "1000,100000,1000000", listCalls: 300}
}

func main() {
	quick := flag.Bool("quick", os.Getenv("BENCH_QUICK") == "1", "fewer transitions and calls, stores of 1,000 and 10,000 runs (also BENCH_QUICK=1)")
	from := flag.String("from", "", "print the table of recorded benchmark outputs (files separated by commas) instead of measuring")
	out := flag.String("out", "", "write the raw benchmark output to this file (default: a file in the temp folder)")
	rounds := flag.Int("rounds", 0, "repeats of every benchmark (default 3)")
	transitions := flag.Int("transitions", 0, "transitions per engine benchmark (default 30000; quick 3000)")
	mcpCalls := flag.Int("mcp-calls", 0, "calls per MCP benchmark (default 30000; quick 1000)")
	sizes := flag.String("store-sizes", "", "stored runs the store-size benchmark grows through (default 1000,100000,1000000; quick 1000,10000)")
	listCalls := flag.Int("list-calls", 0, "ListRuns calls behind each list and stuck p99 (default 300; quick 50)")
	parts := flag.String("parts", "rounds,store", "what to measure: rounds (engine, embedded, MCP), store (the store-size benchmark)")
	attribution := flag.Bool("attribute", false, "instead of the table: profile the transition benchmarks at 32 runs and print their CPU and allocations per transition by owner (Realm's code, gRPC-go, protobuf-go, go-redis, miniredis, the Go runtime)")
	flag.Parse()

	if *from != "" {
		r, err := parseFiles(strings.Split(*from, ","))
		if err != nil {
			fail(err)
		}
		fmt.Print(Markdown(Evaluate(r)))
		return
	}
	cfg := defaults(*quick)
	for _, o := range []struct {
		flag int
		to   *int
	}{{*rounds, &cfg.rounds}, {*transitions, &cfg.transitions}, {*mcpCalls, &cfg.mcpCalls}, {*listCalls, &cfg.listCalls}} {
		if o.flag > 0 {
			*o.to = o.flag
		}
	}
	if *sizes != "" {
		cfg.sizes = *sizes
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *attribution {
		if err := measureAttribution(ctx, cfg); err != nil {
			fail(err)
		}
		return
	}
	for _, p := range strings.Split(*parts, ",") {
		if p != "rounds" && p != "store" {
			fail(fmt.Errorf("-parts %q: each part is rounds or store", *parts))
		}
	}
	cfg.parts = *parts
	if err := measure(ctx, cfg, *out, *quick); err != nil {
		fail(err)
	}
}

func measure(ctx context.Context, cfg config, outPath string, quick bool) error {
	root, tmp, done, err := workspace(ctx, "realm-bench-")
	if err != nil {
		return err
	}
	defer done()
	if outPath == "" {
		outPath = filepath.Join(os.TempDir(), "realm-bench-"+time.Now().UTC().Format("20060102-150405")+".txt")
	}
	raw, err := os.Create(outPath)
	if err != nil {
		return err
	}
	defer raw.Close()

	started := time.Now()
	load0 := loadAverage()
	progress("load average %s; raw output in %s", load0, outPath)
	bins := map[string]*testBinary{
		"engine": engineBinary(root),
		"mcp":    {pkgDir: filepath.Join(root, "mcp-svc", "cmd", "mcp-svc"), module: filepath.Join(root, "mcp-svc"), pkg: "./cmd/mcp-svc"},
	}
	for name, b := range bins {
		progress("building the %s benchmarks (go test -c %s)", name, b.pkg)
		if err := b.build(ctx, filepath.Join(tmp, name+".test")); err != nil {
			return err
		}
	}
	results := Results{}
	// A job that fails is reported and the others still run: the table
	// then says which rows were not measured.
	var failed []string
	run := func(j job) error {
		progress("%s", j.label)
		if err := j.run(ctx, raw, results); err != nil {
			if ctx.Err() != nil {
				return err
			}
			progress("FAILED: %v", err)
			failed = append(failed, j.label)
		}
		return nil
	}
	// The MCP door's ratio with engine-svc and its Redis on a CPU of
	// their own, as deployed; without one the row says not measured.
	var apart *engineApart
	if strings.Contains(cfg.parts, "rounds") {
		progress("starting engine-svc and a Redis of its own on the last CPU, for the MCP door's ratio with the engine apart")
		if apart, err = startEngineApart(ctx, root, tmp); err != nil {
			if ctx.Err() != nil {
				return err
			}
			progress("NOT MEASURED, the MCP door with the engine apart: %v", err)
			failed = append(failed, "the MCP door with the engine apart")
		} else {
			defer apart.stop()
		}
	}
	for round := 1; round <= cfg.rounds && strings.Contains(cfg.parts, "rounds"); round++ {
		jobs := []job{
			{label: "engine transitions, 1 and 32 runs: engine, engine as engine-svc serves it, engine core, bare script, no-op gRPC call; at 1 run, a PING through gRPC and alone, the engine on one P", bin: bins["engine"], bench: "Transitions/^(engine|engine_metrics|engine_core|bare_cas|grpc_noop|grpc_ping|redis_ping|engine_1p|engine_core_1p)$/", n: cfg.transitions},
			{label: "the ratios, 32 runs, each side in bursts alternating with the other: bare script, engine core, engine through gRPC; the engine through gRPC on Redis and on the embedded store", bin: bins["engine"], bench: "Transitions/^(paired|paired_embedded)$/^runs=32$", n: cfg.transitions},
			{label: "MCP door and go-sdk no-op tool, 16 clients (rows, and the paired ratio)", bin: bins["mcp"], bench: "MCPFrontDoor//^clients=16$", n: cfg.mcpCalls},
			// door-own runs alone: run just after other rows its absolute
			// counts shift (docs/benchmarks.md).
			{label: "MCP door's own allocations", bin: bins["mcp"], bench: "MCPFrontDoor/^door-own$", n: cfg.mcpCalls},
		}
		if apart != nil {
			jobs = append(jobs, job{label: "MCP door and go-sdk no-op tool, 16 clients, paired, engine-svc and its Redis on the last CPU (as deployed)",
				bin: bins["mcp"], bench: "MCPFrontDoor/^paired_engine_apart$/", n: cfg.mcpCalls,
				env: []string{"REALM_BENCH_ENGINE_ADDR=" + apart.addr}, wrap: apart.wrap})
		}
		for _, j := range jobs {
			j.label = fmt.Sprintf("round %d/%d: %s (%dx)", round, cfg.rounds, j.label, j.n)
			if err := run(j); err != nil {
				return err
			}
		}
	}
	if strings.Contains(cfg.parts, "store") {
		if err := run(job{
			label: fmt.Sprintf("store size: %s stored runs, each larger size in turns with the smallest, %dx transitions each, %d repeats (fills two Redis databases under prefixes of its own, then deletes them)", cfg.sizes, cfg.transitions, cfg.rounds),
			bin:   bins["engine"], bench: "^BenchmarkStoreSize$", n: cfg.transitions,
			env: []string{"REALM_BENCH_STORE_SIZES=" + cfg.sizes, fmt.Sprintf("REALM_BENCH_LIST_CALLS=%d", cfg.listCalls), fmt.Sprintf("REALM_BENCH_STORE_REPEATS=%d", cfg.rounds)},
		}); err != nil {
			return err
		}
	}

	mode := "full"
	if quick {
		mode = "quick"
	}
	fmt.Printf("\nIssue #23 table, %s, %s mode, %d repeats, %s; load average %s at the start, %s at the end; took %s.\n\n",
		started.UTC().Format("2006-01-02 15:04 UTC"), mode, cfg.rounds, strings.Join(append([]string{"go run ./tests/bench"}, os.Args[1:]...), " "), load0, loadAverage(), time.Since(started).Round(time.Second))
	fmt.Print(Markdown(Evaluate(results)))
	if len(failed) > 0 {
		return fmt.Errorf("failed: %s", strings.Join(failed, "; "))
	}
	return nil
}

// parseFiles reads the results of several recorded outputs, in order.
func parseFiles(paths []string) (Results, error) {
	all := Results{}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		r, err := Parse(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		for name, samples := range r {
			all[name] = append(all[name], samples...)
		}
	}
	return all, nil
}

// loadAverage is the 1, 5 and 15 minute load averages, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func progress(format string, args ...any) {
	fmt.Printf("[%s] %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}
