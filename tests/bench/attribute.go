package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Owners: who a profile sample's cost belongs to. A sample goes to the
// innermost frame of its stack that is not the Go standard library (a
// write syscall belongs to whoever wrote, an allocation to whoever
// allocated, GC assists included); a stack of the standard library alone
// is the runtime's own work (the background GC, the scheduler).
const (
	ownRealm     = "Realm's code (engine, store client, server)"
	ownEmbedded  = "Realm's embedded store server (hook, native commit, journal write and fsync)"
	ownStubs     = "Realm's generated gRPC stubs"
	ownBenchLoop = "the benchmark's loop (the caller)"
	ownSetup     = "run creation before the clock starts"
	ownGRPC      = "gRPC-go (transport, HTTP/2, client and server)"
	ownProto     = "protobuf-go (messages encoded and decoded)"
	ownRedis     = "go-redis (the store's client)"
	ownMini      = "miniredis (the embedded store's server)"
	ownSchema    = "jsonschema (answers the flat check refuses)"
	ownGC        = "Go runtime: background GC"
	ownSched     = "Go runtime: scheduler, idle and wake-ups"
	ownRuntime   = "Go runtime: other"
	// ownProfiler is the profile snapshots' own work, left out of the
	// tables.
	ownProfiler = "the profiler"
)

// ownerOrder is the order owners are printed in.
var ownerOrder = []string{ownRealm, ownEmbedded, ownStubs, ownBenchLoop, ownSetup, ownGRPC, ownProto, ownRedis, ownMini, ownSchema, ownGC, ownSched, ownRuntime}

// owner says whose cost a sample with this stack (innermost frame first)
// is.
func owner(stack []string) string {
	for _, f := range stack {
		if strings.HasPrefix(f, "runtime/pprof.") {
			return ownProfiler
		}
	}
	for _, f := range stack {
		if strings.Contains(f, "StartRun") || strings.Contains(f, "server_test.(*env).register") || strings.Contains(f, "server_test.setup") {
			return ownSetup
		}
	}
	for _, f := range stack {
		if strings.Contains(f, "/internal/server_test.") {
			return ownBenchLoop
		}
		for _, p := range ownerPrefixes {
			if strings.HasPrefix(f, p.prefix) {
				return p.owner
			}
		}
		if !isStdlib(f) {
			return modulePath(f)
		}
	}
	for _, f := range stack {
		switch {
		case strings.HasPrefix(f, "runtime.gcBgMarkWorker"), strings.HasPrefix(f, "runtime.bgsweep"), strings.HasPrefix(f, "runtime.bgscavenge"):
			return ownGC
		case strings.HasPrefix(f, "runtime.schedule"), strings.HasPrefix(f, "runtime.findRunnable"), strings.HasPrefix(f, "runtime.mstart"),
			strings.HasPrefix(f, "runtime.park_m"), strings.HasPrefix(f, "runtime.sysmon"), strings.HasPrefix(f, "runtime.netpoll"):
			return ownSched
		}
	}
	return ownRuntime
}

// ownerPrefixes name the owner of a frame by its package path, the first
// match winning.
var ownerPrefixes = []struct{ prefix, owner string }{
	{"github.com/realm-go/realm/pkg/gen/", ownStubs},
	{"github.com/realm-go/realm/engine-svc/internal/store/embedded.", ownEmbedded},
	{"github.com/realm-go/realm/", ownRealm},
	{"google.golang.org/grpc", ownGRPC},
	{"golang.org/x/net/", ownGRPC},
	{"google.golang.org/protobuf", ownProto},
	{"github.com/redis/go-redis", ownRedis},
	{"github.com/alicebob/miniredis", ownMini},
	{"github.com/yuin/gopher-lua", ownMini},
	{"github.com/santhosh-tekuri/jsonschema", ownSchema},
}

// isStdlib reports a frame of the standard library: its package path has
// no dot in its first element.
func isStdlib(frame string) bool {
	if strings.HasPrefix(frame, "type:") {
		return true // the compiler's hash and equality functions
	}
	frame, _, _ = strings.Cut(frame, "[") // a generic's type arguments
	first, _, slash := strings.Cut(frame, "/")
	if !slash {
		first, _, _ = strings.Cut(frame, ".")
	}
	return !strings.Contains(first, ".")
}

// modulePath is a frame's module as its first three path elements.
func modulePath(frame string) string {
	parts := strings.SplitN(frame, "/", 4)
	if len(parts) > 3 {
		parts = parts[:3]
	}
	last := parts[len(parts)-1]
	if i := strings.Index(last, "."); i > 0 {
		parts[len(parts)-1] = last[:i]
	}
	return strings.Join(parts, "/")
}

// parseTraces reads `go tool pprof -traces` output: each sample's value
// (CPU time in µs, or a count) and its stack, innermost frame first.
func parseTraces(in io.Reader, each func(v float64, stack []string)) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	var (
		value float64
		stack []string
		open  bool
	)
	flush := func() {
		if open && len(stack) > 0 {
			each(value, stack)
		}
		stack, open = stack[:0], false
	}
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			flush()
			open = true
			continue
		}
		if !open {
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(strings.TrimSpace(line), "bytes:") {
			continue
		}
		if len(stack) == 0 && len(f) >= 2 {
			v, err := parseValue(f[0])
			if err != nil {
				return fmt.Errorf("pprof -traces: %q: %w", line, err)
			}
			value = v
			stack = append(stack, f[1])
			continue
		}
		stack = append(stack, f[0])
	}
	flush()
	return sc.Err()
}

// parseValue reads a sample value: a duration ("10ms", "1.20s") as µs,
// or a plain count.
func parseValue(s string) (float64, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return float64(d) / float64(time.Microsecond), nil
	}
	return strconv.ParseFloat(s, 64)
}

// Attribution is a profile's total per operation, by owner.
type Attribution map[string]float64

// attribute reads a profile through `go tool pprof -traces` (args: its
// options, then the profile) and divides each owner's share by ops.
func attribute(ctx context.Context, bin string, ops int, args ...string) (Attribution, error) {
	profile := args[len(args)-1]
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"tool", "pprof", "-traces"}, args[:len(args)-1]...), bin, profile)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a := Attribution{}
	perr := parseTraces(out, func(v float64, stack []string) {
		if o := owner(stack); o != ownProfiler {
			a[o] += v / float64(ops)
		}
	})
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("go tool pprof %s: %w", profile, err)
	}
	return a, perr
}

// attributionTable prints one column per benchmark: each owner's cost per
// transition, and the total.
func attributionTable(title, unit string, names []string, cols []Attribution) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n| %s |", title, unit)
	for _, n := range names {
		fmt.Fprintf(&b, " %s |", n)
	}
	b.WriteString("\n| --- |" + strings.Repeat(" ---: |", len(names)) + "\n")
	var owners []string
	for _, o := range ownerOrder {
		for _, c := range cols {
			if c[o] >= 0.5 {
				owners = append(owners, o)
				break
			}
		}
	}
	var extra []string
	for _, c := range cols {
		for o, v := range c {
			if v >= 0.5 && !slices.Contains(ownerOrder, o) && !slices.Contains(extra, o) {
				extra = append(extra, o)
			}
		}
	}
	slices.Sort(extra)
	owners = append(owners, extra...)
	totals := make([]float64, len(cols))
	for _, o := range owners {
		fmt.Fprintf(&b, "| %s |", o)
		for i, c := range cols {
			fmt.Fprintf(&b, " %s |", thousands(c[o]))
			totals[i] += c[o]
		}
		b.WriteString("\n")
	}
	b.WriteString("| total (owners under 0.5 left out) |")
	for _, t := range totals {
		fmt.Fprintf(&b, " %s |", thousands(t))
	}
	b.WriteString("\n")
	return b.String()
}

// profiled is one benchmark the attribution profiles.
type profiled struct{ label, bench string }

// measureAttribution profiles the engine's transition benchmarks at 32
// runs (engine core, through gRPC, a no-op gRPC call, the embedded store)
// and prints where their CPU and allocations go, by owner, per
// transition: the figures behind the #23 rows a project cannot meet in
// its own code.
func measureAttribution(ctx context.Context, cfg config) error {
	root, tmp, done, err := workspace(ctx, "realm-attribution-")
	if err != nil {
		return err
	}
	defer done()
	bin := engineBinary(root)
	progress("building the engine benchmarks (go test -c %s)", bin.pkg)
	if err := bin.build(ctx, filepath.Join(tmp, "engine.test")); err != nil {
		return err
	}
	benches := []profiled{
		{"engine core", "Transitions/^engine_core$/^runs=32$"},
		{"through gRPC", "Transitions/^engine$/^runs=32$"},
		{"no-op gRPC call", "Transitions/^grpc_noop$/^runs=32$"},
		{"embedded, through gRPC", "Transitions/^engine_embedded$/^runs=32$"},
	}
	// Allocations are counted exactly (every one sampled), on fewer
	// transitions: counting slows each one down.
	allocN := max(cfg.transitions/6, 1000)
	var names []string
	var cpu, allocs []Attribution
	for i, b := range benches {
		names = append(names, b.label)
		for _, kind := range []string{"cpu", "alloc"} {
			dir := filepath.Join(tmp, fmt.Sprintf("%d.%s", i, kind))
			if err := os.Mkdir(dir, 0o755); err != nil {
				return err
			}
			n := cfg.transitions
			args := []string{"-test.run", "^$", "-test.bench", b.bench, "-test.benchmem", "-test.timeout", "0"}
			if kind == "alloc" {
				n = allocN
				args = append(args, "-test.memprofilerate", "1")
			}
			args = append(args, "-test.benchtime", fmt.Sprintf("%dx", n))
			progress("%s: %s profile of the timed loop (%dx)", b.label, kind, n)
			cmd := exec.CommandContext(ctx, bin.path, args...)
			cmd.Dir = bin.pkgDir
			cmd.Env = append(os.Environ(), "REALM_BENCH_PROFILE_DIR="+dir)
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				return fmt.Errorf("%s: %w\n%s", b.bench, err, out)
			}
			for _, line := range strings.Split(string(out), "\n") {
				if name, s, ok := ParseLine(line); ok {
					fmt.Printf("    %s: %s\n", name, summary(s))
				}
			}
			cpuProf, err := filepath.Glob(filepath.Join(dir, "*.cpu"))
			if err != nil || len(cpuProf) != 1 {
				return fmt.Errorf("%s: want one profile of the timed loop in %s, found %v", b.bench, dir, cpuProf)
			}
			prof := strings.TrimSuffix(cpuProf[0], ".cpu")
			var a Attribution
			if kind == "cpu" {
				a, err = attribute(ctx, bin.path, n, prof+".cpu")
				cpu = append(cpu, a)
			} else {
				a, err = attribute(ctx, bin.path, n, "-sample_index=alloc_objects", "-base", prof+".allocs0", prof+".allocs1")
				allocs = append(allocs, a)
			}
			if err != nil {
				return err
			}
		}
	}
	fmt.Println()
	fmt.Print(attributionTable(fmt.Sprintf("CPU per transition by owner, µs (the timed loop's CPU profile, %d transitions each)", cfg.transitions), "owner", names, cpu))
	fmt.Println()
	fmt.Print(attributionTable(fmt.Sprintf("Allocations per transition by owner (every allocation of the timed loop counted, %d transitions each)", allocN), "owner", names, allocs))
	return nil
}
