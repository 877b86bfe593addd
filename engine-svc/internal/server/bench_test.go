package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/realm-go/realm/pkg/gcpolicy"
	"github.com/realm-go/realm/pkg/gcpolicy/gcpolicytest"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/metrics"
	"github.com/realm-go/realm/pkg/proccpu"
	"github.com/realm-go/realm/pkg/tracing"
)

// benchSteps is how many steps tenSteps chains: a stepper moves to its
// next run after as many answers.
const benchSteps = 10

// tenSteps is a chain of ten agent steps, each with a small schema.
func tenSteps() []byte {
	var b strings.Builder
	b.WriteString("id: bench\nname: Bench\nversion: 1\nsteps:\n")
	for i := 1; i <= benchSteps; i++ {
		fmt.Fprintf(&b, "  s%d:\n    description: Step %d.\n    execution: agent\n", i, i)
		if i > 1 {
			fmt.Fprintf(&b, "    depends_on: [s%d]\n", i-1)
		}
		b.WriteString("    input_schema:\n      type: object\n      required: [n]\n      properties:\n        n: { type: integer }\n        note: { type: string }\n")
	}
	return []byte(b.String())
}

// BenchmarkTransitions measures the engine through gRPC on real Redis:
// step transitions (an accepted agent answer) per second, p50/p99 latency,
// allocations and Redis round trips per transition, with 1 and 32 runs
// driven at once; and, in the same run, the physical floor: a bare Lua
// compare-and-set of a document of the same size.
func BenchmarkTransitions(b *testing.B) {
	engineGC(b)
	for _, runs := range []int{1, 32} {
		b.Run(fmt.Sprintf("engine/runs=%d", runs), func(b *testing.B) { benchEngine(b, runs, false) })
		// The same as engine-svc serves it: every instrument on (engine,
		// gRPC, Redis hook) and its tracing options, after tracing.Setup as
		// its main calls it. The difference is what they cost.
		b.Run(fmt.Sprintf("engine_metrics/runs=%d", runs), func(b *testing.B) {
			benchEngine(b, runs, false, asDeployed(b))
		})
		b.Run(fmt.Sprintf("engine_core/runs=%d", runs), func(b *testing.B) { benchEngine(b, runs, true) })
		// make run's default store: every commit fsynced to the journal
		// before its reply, concurrent commits sharing an fsync.
		b.Run(fmt.Sprintf("engine_embedded/runs=%d", runs), func(b *testing.B) { benchEngineOn(b, "embedded", runs, false) })
		b.Run(fmt.Sprintf("bare_cas/runs=%d", runs), func(b *testing.B) { benchBareCAS(b, runs) })
		b.Run(fmt.Sprintf("grpc_noop/runs=%d", runs), func(b *testing.B) { benchGRPCNoop(b, runs, false) })
	}
	// The ratios of #23, each side measured in bursts alternating with the
	// other's (the table reads these; the rows above give CPU, allocations
	// and latency).
	b.Run("paired/runs=32", func(b *testing.B) { benchPairedFloor(b, 32) })
	b.Run("paired_embedded/runs=32", func(b *testing.B) { benchPairedEmbedded(b, 32) })
	// What gRPC adds to a call whose handler waits on Redis, with no code
	// of ours in it: a health check that first sends one PING, against the
	// same PING sent directly (the pair engine − engine_core is measured
	// as).
	b.Run("grpc_ping/runs=1", func(b *testing.B) { benchGRPCNoop(b, 1, true) })
	b.Run("redis_ping/runs=1", benchRedisPing)
	// The 1-run pair again on one P: client, server and engine share one
	// thread, so no call waits for the OS to wake another (the rest of
	// gRPC's added p50 at 1 run is those wake-ups).
	b.Run("engine_1p/runs=1", func(b *testing.B) { onOneP(b, func() { benchEngine(b, 1, false) }) })
	b.Run("engine_core_1p/runs=1", func(b *testing.B) { onOneP(b, func() { benchEngine(b, 1, true) }) })
}

// engineGC runs a benchmark under engine-svc's GC target, as engine-svc
// sets it (gcpolicy.Apply: GOGC in the environment wins), without its
// memory limit. The loop that drives the engine, and the bare script's
// client, share the process and so the setting.
func engineGC(b *testing.B) { gcpolicytest.Target(b, gcpolicy.DefaultPercent) }

// asDeployed serves the engine as engine-svc does: its metrics, and its
// tracing options built after tracing.Setup (the environment decides
// whether spans are exported; on this machine they are not).
func asDeployed(b *testing.B) setupOption {
	shutdown, err := tracing.Setup(context.Background(), "engine-svc")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tracing.Stop(shutdown, func(err error) { b.Error(err) }) })
	metered := withMetrics(metrics.NewRegistry())
	return func(c *setupConfig) {
		metered(c)
		c.server = append(c.server, tracing.ServerOptions()...)
	}
}

// onOneP runs f with GOMAXPROCS 1.
func onOneP(b *testing.B, f func()) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
}

// benchRedisPing is one caller sending PINGs to the Redis the engine
// uses: the handler of grpc_ping without gRPC.
func benchRedisPing(b *testing.B) {
	e := setup(b, "redis")
	c := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	cpu0 := proccpu.Used()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := e.rc.Ping(c).Err(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportTimed(b, [][]time.Duration{lat}, proccpu.Used()-cpu0, "calls/s")
}

// benchGRPCNoop is gRPC's own share of a transition through it: a health
// check (a call that does nothing) on the engine's server and connection,
// from as many callers as engine/runs=N has runs. Its allocations and
// latency are the transport's, client and server, before any message of
// ours. With ping, the server sends one Redis PING before it answers.
func benchGRPCNoop(b *testing.B, workers int, ping bool) {
	var opts []setupOption
	var rc redis.UniversalClient
	if ping {
		opts = append(opts, func(c *setupConfig) {
			c.server = append(c.server, grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				if err := rc.Ping(ctx).Err(); err != nil {
					return nil, err
				}
				return h(ctx, req)
			}))
		})
	}
	e := setup(b, "redis", opts...)
	rc = e.rc
	c := context.Background()
	req := &healthpb.HealthCheckRequest{}
	var done atomic.Int64
	lat := make([][]time.Duration, workers)
	b.ReportAllocs()
	stopProfile := profileTimed(b)
	cpu0 := proccpu.Used()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if _, err := e.health.Check(c, req); err != nil {
					b.Errorf("health check: %v", err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	cpu := proccpu.Used() - cpu0
	stopProfile()
	reportTimed(b, lat, cpu, "calls/s")
}

// benchEngine drives transitions through gRPC, or with core set, by calling
// the engine directly (no gRPC, no protobuf on the wire): the difference is
// what the transport costs.
func benchEngine(b *testing.B, workers int, core bool, opts ...setupOption) {
	benchEngineOn(b, "redis", workers, core, opts...)
}

// benchEngineOn is benchEngine on another store (a backend of setup).
func benchEngineOn(b *testing.B, backend string, workers int, core bool, opts ...setupOption) {
	e := benchEnv(b, backend, opts...)
	runIDs := driveTransitions(b, e, workers, core)
	// The document size the floor is measured with.
	if doc, err := e.st.LoadRun(context.Background(), runIDs[0]); err == nil {
		b.ReportMetric(float64(len(doc.Doc)), "doc-bytes")
	}
}

// driveTransitions makes b.N transitions of the registered ten-step
// "bench" workflow with workers runs at once and reports transitions/s,
// p50/p99 latency, Redis round trips and the process's CPU (user + sys)
// per transition. It returns the runs it started.
func driveTransitions(b *testing.B, e *env, workers int, core bool) []string {
	s := newStepper(b, e, workers, b.N, core)
	lat := make([][]time.Duration, workers)
	e.counter.Reset()
	b.ReportAllocs()
	stopProfile := profileTimed(b)
	cpu0 := proccpu.Used()
	b.ResetTimer()
	s.burst(b, b.N, lat)
	b.StopTimer()
	cpu := proccpu.Used() - cpu0
	stopProfile()
	reportTimed(b, lat, cpu, "transitions/s")
	b.ReportMetric(float64(e.counter.Count())/float64(b.N), "roundtrips/op")
	return s.runIDs
}

// stepper makes transitions of the registered "bench" workflow's runs:
// each of its workers answers its run's steps in order and takes the next
// run when one ends. A worker keeps its place between bursts, so bursts
// of other work can come between them.
type stepper struct {
	e      *env
	core   bool // call the engine directly, not through gRPC
	runIDs []string
	next   int // next run to take (read and written by burst's workers under mu)
	mu     sync.Mutex
	at     []stepAt // each worker's run and its next step
}

type stepAt struct {
	run  string
	step int // 1..benchSteps; past it (or a zero stepAt) takes the next run
}

// benchAnswer is each step's answer, as the front doors send it: JSON, no
// google.protobuf.Struct.
var benchAnswer = []byte(`{"n":1,"note":"fine"}`)

// newStepper creates, before any clock starts, the runs that n
// transitions with workers at once can reach.
func newStepper(b *testing.B, e *env, workers, n int, core bool) *stepper {
	c := context.Background()
	s := &stepper{e: e, core: core, runIDs: make([]string, n/benchSteps+workers+1), at: make([]stepAt, workers)}
	for i := range s.runIDs {
		resp, err := e.client.StartRun(c, &realmv1.StartRunRequest{WorkflowId: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		s.runIDs[i] = resp.GetReply().GetRunId()
	}
	return s
}

// take is the next unstarted run.
func (s *stepper) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	run := s.runIDs[s.next]
	s.next++
	return run
}

// burst makes n transitions with every worker at once; lat, when not
// nil, gets each worker's latencies.
func (s *stepper) burst(b *testing.B, n int, lat [][]time.Duration) {
	c := context.Background()
	var done atomic.Int64
	var wg sync.WaitGroup
	for w := range s.at {
		wg.Go(func() {
			// A copy, written back at the end: the workers' places share
			// cache lines.
			at := s.at[w]
			defer func() { s.at[w] = at }()
			for done.Add(1) <= int64(n) {
				if at.step == 0 || at.step > benchSteps {
					at = stepAt{run: s.take(), step: 1}
				}
				t0 := time.Now()
				req := &realmv1.ExecuteStepRequest{RunId: at.run, Command: "s" + strconv.Itoa(at.step), ParamsJson: benchAnswer}
				var reply *realmv1.Reply
				var err error
				if s.core {
					reply, err = s.e.eng.ExecuteStep(c, req)
				} else {
					var resp *realmv1.ExecuteStepResponse
					resp, err = s.e.client.ExecuteStep(c, req)
					reply = resp.GetReply()
				}
				if lat != nil {
					lat[w] = append(lat[w], time.Since(t0))
				}
				if err != nil || reply.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK {
					b.Errorf("step s%d: %v %v", at.step, err, reply)
					return
				}
				at.step++
			}
		})
	}
	wg.Wait()
}

// reportTimed reports a timed loop's p50 and p99 latency (each worker's
// latencies in lat), the process's CPU per operation and the rate, per
// second, under rate's unit.
func reportTimed(b *testing.B, lat [][]time.Duration, cpu time.Duration, rate string) {
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), rate)
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	}
}

// benchBareCAS is the floor: each worker compare-and-sets its own key with
// a script that only checks and writes the version and a 1,200-byte
// document (the size of a finished ten-step run's document).
func benchBareCAS(b *testing.B, workers int) {
	cas := newBareCAS(b, setup(b, "redis"), workers)
	b.ReportAllocs()
	b.ResetTimer()
	cas.burst(b, b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "transitions/s")
}

// bareCAS is the floor's workers, each with its key and the version it
// holds, kept between bursts.
type bareCAS struct {
	rc      redis.UniversalClient
	script  *redis.Script
	doc     string
	keys    []string
	version []int
}

func newBareCAS(b *testing.B, e *env, workers int) *bareCAS {
	cas := &bareCAS{
		rc: e.rc,
		script: redis.NewScript(`
if redis.call('HGET', KEYS[1], 'v') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'doc', ARGV[3])
return 1`),
		doc:     strings.Repeat("x", 1200),
		keys:    make([]string, workers),
		version: make([]int, workers),
	}
	for w := range cas.keys {
		cas.keys[w] = fmt.Sprintf("%s:{b%d}:bare", e.prefix, w)
		if err := e.rc.HSet(context.Background(), cas.keys[w], "v", "0").Err(); err != nil {
			b.Fatal(err)
		}
	}
	return cas
}

// burst makes n compare-and-sets with every worker at once.
func (cas *bareCAS) burst(b *testing.B, n int) {
	c := context.Background()
	var done atomic.Int64
	var wg sync.WaitGroup
	for w, key := range cas.keys {
		wg.Go(func() {
			v := cas.version[w]
			defer func() { cas.version[w] = v }()
			for done.Add(1) <= int64(n) {
				ok, err := cas.script.Run(c, cas.rc, []string{key}, strconv.Itoa(v), strconv.Itoa(v+1), cas.doc).Int()
				if err != nil || ok != 1 {
					b.Errorf("cas: %v %d", err, ok)
					return
				}
				v++
			}
		})
	}
	wg.Wait()
}

// burstKind is one side of a paired benchmark: what it counts and a burst
// of n of it.
type burstKind struct {
	unit  string
	burst func(n int)
}

// benchPairedFloor is the engine's ratios to the floor in alternating
// bursts: the bare script, the engine core and the engine through gRPC,
// each engine with a Redis prefix, a server and a run cache of its own
// (as in the benchmarks of each alone). Measured one after another, each
// for seconds, the ratios moved with the machine's load between
// benchmarks (0.21 and 0.37 through gRPC for the same binary a minute
// apart); in bursts the load falls on every side alike.
func benchPairedFloor(b *testing.B, workers int) {
	eCore, eGRPC := benchEnv(b, "redis"), benchEnv(b, "redis")
	cas := newBareCAS(b, eCore, workers)
	core := newStepper(b, eCore, workers, b.N, true)
	viaGRPC := newStepper(b, eGRPC, workers, b.N, false)
	rate := pairBursts(b, []burstKind{
		{"bare/s", func(n int) { cas.burst(b, n) }},
		{"core/s", func(n int) { core.burst(b, n, nil) }},
		{"grpc/s", func(n int) { viaGRPC.burst(b, n, nil) }},
	})
	b.ReportMetric(rate["core/s"]/rate["bare/s"], "core/bare")
	b.ReportMetric(rate["grpc/s"]/rate["bare/s"], "grpc/bare")
}

// benchPairedEmbedded is the embedded store against Redis, the engine
// through gRPC on each, in alternating bursts.
func benchPairedEmbedded(b *testing.B, workers int) {
	onRedis := newStepper(b, benchEnv(b, "redis"), workers, b.N, false)
	embedded := newStepper(b, benchEnv(b, "embedded"), workers, b.N, false)
	rate := pairBursts(b, []burstKind{
		{"redis/s", func(n int) { onRedis.burst(b, n, nil) }},
		{"embedded/s", func(n int) { embedded.burst(b, n, nil) }},
	})
	b.ReportMetric(rate["embedded/s"]/rate["redis/s"], "embedded/redis")
}

// benchEnv is an engine on backend with the ten-step workflow registered.
func benchEnv(b *testing.B, backend string, opts ...setupOption) *env {
	e := setup(b, backend, opts...)
	if r := e.register(b, tenSteps()); !r.GetRegistered() {
		b.Fatal(r.GetReport().GetText())
	}
	return e
}

// pairBursts runs b.N operations of each kind in bursts of about a
// fifteenth of b.N, the kinds in turn and their order rotated from one
// round to the next, and reports each kind's rate over its own bursts.
func pairBursts(b *testing.B, kinds []burstKind) map[string]float64 {
	size := max(b.N/15, 100)
	spent := make([]time.Duration, len(kinds))
	b.ResetTimer()
	for round, left := 0, b.N; left > 0; round++ {
		n := min(size, left)
		for j := range kinds {
			k := (round + j) % len(kinds)
			t0 := time.Now()
			kinds[k].burst(n)
			spent[k] += time.Since(t0)
		}
		left -= n
	}
	b.StopTimer()
	rate := make(map[string]float64, len(kinds))
	for k, kind := range kinds {
		rate[kind.unit] = float64(b.N) / spent[k].Seconds()
		b.ReportMetric(rate[kind.unit], kind.unit)
	}
	return rate
}

// envProfileDir names a folder for profiles of the timed loops alone
// (`go run ./tests/bench -attribute` reads them): -test.cpuprofile and
// -test.memprofile cover the whole process, run creation and cleanup
// included.
const envProfileDir = "REALM_BENCH_PROFILE_DIR"

// profileTimed starts, when REALM_BENCH_PROFILE_DIR is set, a CPU profile
// of the timed loop and snapshots the allocation profile before it; the
// function it returns stops the CPU profile and snapshots the allocations
// again (diff the two with pprof -base). Allocations are counted at
// -test.memprofilerate. go test's first call with b.N 1 is left out.
func profileTimed(b *testing.B) (stop func()) {
	dir := os.Getenv(envProfileDir)
	if dir == "" || b.N == 1 {
		return func() {}
	}
	base := filepath.Join(dir, strings.NewReplacer("/", "_", "=", "-").Replace(b.Name()))
	heap := func(path string) {
		runtime.GC() // the allocation profile is as of the last GC
		f, err := os.Create(path)
		if err == nil {
			err = pprof.Lookup("allocs").WriteTo(f, 0)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			b.Fatalf("allocation profile: %v", err)
		}
	}
	heap(base + ".allocs0")
	f, err := os.Create(base + ".cpu")
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatalf("CPU profile (is -test.cpuprofile set too?): %v", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		heap(base + ".allocs1")
	}
}
