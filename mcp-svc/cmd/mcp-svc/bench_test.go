package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/realm-go/realm/engine-svc/enginetest"
	"github.com/realm-go/realm/mcp-svc/internal/sdkworkaround"
	"github.com/realm-go/realm/mcp-svc/mcpserver"
	"github.com/realm-go/realm/pkg/gcpolicy"
	"github.com/realm-go/realm/pkg/gcpolicy/gcpolicytest"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/proccpu"
	"github.com/realm-go/realm/pkg/tracing"
)

// envEngineAddr names an engine-svc for BenchmarkMCPFrontDoor to call
// instead of one it starts in its own process.
const envEngineAddr = "REALM_BENCH_ENGINE_ADDR"

// benchWorkflow has one agent step with no schema: every execute_step
// completes it, so each call does the same work.
const benchWorkflow = `id: bench
name: Bench
version: 1
steps:
  answer:
    description: Answer anything.
    execution: agent
`

// BenchmarkMCPFrontDoor measures, over real HTTP on loopback with 1 and 16
// concurrent clients: a no-op tool on the same go-sdk server setup (the
// SDK's floor), execute_step through mcp-svc, and the same execute_step
// straight over gRPC. It reports p50/p99 latency, calls/s and allocs/call
// (allocations of client, front door and engine together: one process).
//
// With REALM_BENCH_ENGINE_ADDR set, the engine is that engine-svc instead
// of one in this process, and the pair is named paired_engine_apart:
// `make bench` runs engine-svc and its Redis on the other core, as they
// are deployed, so the door and the no-op tool share a core with nothing
// else.
func BenchmarkMCPFrontDoor(b *testing.B) {
	// mcp-svc's GC target; the no-op tool and the bound share the process
	// and so the setting.
	gcpolicytest.Target(b, gcpolicy.DefaultPercent)
	engineAddr, paired := os.Getenv(envEngineAddr), "paired"
	if engineAddr != "" {
		paired = "paired_engine_apart"
	} else {
		engineAddr = enginetest.Start(b, "redis")
	}
	// The door as deployed: tracing set up as main sets it up (the
	// environment decides whether spans are exported), and its engine
	// connection and /mcp handler are main's, metrics and spans included.
	shutdownTracing, err := tracing.Setup(context.Background(), "mcp-svc")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tracing.Stop(shutdownTracing, func(err error) { b.Error(err) }) })
	reg := prometheus.NewRegistry()
	conn, err := engineConn(engineAddr, reg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	eng := realmv1.NewEngineServiceClient(conn)
	if resp, err := eng.RegisterWorkflow(context.Background(), &realmv1.RegisterWorkflowRequest{
		Source: &realmv1.WorkflowSource{Yaml: []byte(benchWorkflow), Path: "bench.yaml"},
	}); err != nil || !resp.GetRegistered() {
		b.Fatalf("register: %v %v", err, resp.GetReport().GetErrors())
	}

	// The SDK's floor: one no-op tool, the same stateless JSON handler.
	noop := mcp.NewServer(&mcp.Implementation{Name: "noop", Version: "0"}, nil)
	noop.AddTool(&mcp.Tool{Name: "noop", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}}, nil
		})
	noopSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return noop },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	b.Cleanup(noopSrv.Close)

	realm := mcpserver.New(mcpserver.Options{Engine: eng, EngineAddr: engineAddr, Caller: &realmv1.Caller{Channel: realmv1.Channel_CHANNEL_MCP_HTTP}, ErrorLog: io.Discard, Metrics: reg})
	realmSrv := httptest.NewServer(doorHandler(realm, reg, mcpserver.HTTPOptions{Token: "bench"}))
	b.Cleanup(realmSrv.Close)
	// Each kind keeps a connection per client: http.DefaultClient keeps
	// two idle ones per host, and the other clients would connect anew.
	keepConns := func() *http.Transport { return &http.Transport{MaxIdleConnsPerHost: 64} }
	plain := &http.Client{Transport: keepConns()}
	authed := &http.Client{Transport: bearer{"bench", keepConns()}}
	boundSrv, boundRuns := boundTool(b, eng, realmSrv.URL, authed)

	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("noop-tool/clients=%d", clients), func(b *testing.B) {
			sessions := benchSessions(b, noopSrv.URL, plain, clients)
			measure(b, clients, func(w, _ int) error {
				res, err := sessions[w].CallTool(context.Background(), &mcp.CallToolParams{Name: "noop", Arguments: map[string]any{}})
				return toolErr(res, err)
			})
		})
		b.Run(fmt.Sprintf("execute_step-mcp/clients=%d", clients), func(b *testing.B) {
			runs := benchRuns(b, eng)
			sessions := benchSessions(b, realmSrv.URL, authed, clients)
			measure(b, clients, func(w, i int) error {
				res, err := sessions[w].CallTool(context.Background(), &mcp.CallToolParams{Name: "execute_step",
					Arguments: map[string]any{"run_id": runs[i], "command": "answer", "params": map[string]any{"ok": true}}})
				return toolErr(res, err)
			})
		})
		// The bound tool (boundTool): the same execute_step with none of
		// the door's code, from clients that send the same token, so the
		// door's allocations less these are its code's and its HTTP
		// layer's.
		b.Run(fmt.Sprintf("bound-tool/clients=%d", clients), func(b *testing.B) {
			runs := benchRuns(b, eng)
			for _, r := range runs {
				boundRuns <- r
			}
			sessions := benchSessions(b, boundSrv.URL, authed, clients)
			measure(b, clients, func(w, i int) error {
				res, err := sessions[w].CallTool(context.Background(), &mcp.CallToolParams{Name: "execute_step",
					Arguments: map[string]any{"run_id": runs[i], "command": "answer", "params": map[string]any{"ok": true}}})
				return toolErr(res, err)
			})
		})
		b.Run(fmt.Sprintf("execute_step-grpc/clients=%d", clients), func(b *testing.B) {
			runs := benchRuns(b, eng)
			measure(b, clients, func(_, i int) error { return grpcStep(eng, runs[i]) })
		})
	}

	// The 0.8× target, measured in pairs: bursts of doorChunk calls of the
	// no-op tool, of execute_step through the door and of the bound tool
	// (boundTool: the same gRPC call with none of the door's code) take
	// turns, 16 clients each, so a change in the machine's load falls on
	// each alike. A fourth burst of the same execute_step straight over
	// gRPC gives the ratio a door costing nothing would reach when the
	// engine shares the cores (with the engine apart it is only the gRPC
	// bursts' wait).
	b.Run(paired+"/clients=16", func(b *testing.B) {
		const clients = 16
		// The bound's clients send the door's token too (its server reads
		// none): adding the header is the client's work, not the door's.
		//
		// Each round's runs are started just before its bursts, as an
		// assistant starts a run and then answers its step: the engine
		// still holds them, rather than having let go of thousands made
		// before the clock started.
		runs, grpcRuns, forBound := make([]string, b.N), make([]string, b.N), make([]string, b.N)
		noops, doors, bounds := benchSessions(b, noopSrv.URL, plain, clients), benchSessions(b, realmSrv.URL, authed, clients), benchSessions(b, boundSrv.URL, &http.Client{Transport: bearer{"bench", keepConns()}}, clients)
		var noopTime, doorTime, boundTime, grpcTime, noopCPU, doorCPU, boundCPU, grpcCPU time.Duration
		// kind is one burst of calls lo..hi-1, timed, with this
		// process's CPU over it.
		kind := func(took, cpu *time.Duration, call func(w, i int) error) func(lo, hi int) {
			return func(lo, hi int) {
				c0 := proccpu.Used()
				*took += burst(b, clients, lo, hi, call)
				*cpu += proccpu.Used() - c0
			}
		}
		kinds := []func(lo, hi int){
			kind(&noopTime, &noopCPU, func(w, _ int) error {
				res, err := noops[w].CallTool(context.Background(), &mcp.CallToolParams{Name: "noop", Arguments: map[string]any{}})
				return toolErr(res, err)
			}),
			kind(&doorTime, &doorCPU, func(w, i int) error {
				res, err := doors[w].CallTool(context.Background(), &mcp.CallToolParams{Name: "execute_step",
					Arguments: map[string]any{"run_id": runs[i], "command": "answer", "params": map[string]any{"ok": true}}})
				return toolErr(res, err)
			}),
			kind(&boundTime, &boundCPU, func(w, i int) error {
				res, err := bounds[w].CallTool(context.Background(), &mcp.CallToolParams{Name: "execute_step",
					Arguments: map[string]any{"run_id": forBound[i], "command": "answer", "params": map[string]any{"ok": true}}})
				return toolErr(res, err)
			}),
		}
		b.ResetTimer()
		for lo := 0; lo < b.N; lo += doorChunk {
			hi := min(lo+doorChunk, b.N)
			startRuns(b, eng, runs[lo:hi])
			startRuns(b, eng, grpcRuns[lo:hi])
			startRuns(b, eng, forBound[lo:hi])
			for _, r := range forBound[lo:hi] {
				boundRuns <- r
			}
			// The kinds take turns going first, so the work the run
			// starts leave behind (a collection, say) falls on each alike.
			first := lo / doorChunk
			for k := range kinds {
				kinds[(first+k)%len(kinds)](lo, hi)
			}
			kind(&grpcTime, &grpcCPU, func(_, i int) error { return grpcStep(eng, grpcRuns[i]) })(lo, hi)
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/noopTime.Seconds(), "noop-calls/s")
		b.ReportMetric(float64(b.N)/doorTime.Seconds(), "mcp-calls/s")
		b.ReportMetric(float64(b.N)/boundTime.Seconds(), "bound-calls/s")
		if noopCPU > 0 {
			// This process's CPU in each kind's bursts, per call: with
			// the engine apart, what the door itself costs.
			b.ReportMetric(float64(noopCPU.Microseconds())/float64(b.N), "noop-cpu-µs/call")
			b.ReportMetric(float64(doorCPU.Microseconds())/float64(b.N), "mcp-cpu-µs/call")
			b.ReportMetric(float64(boundCPU.Microseconds())/float64(b.N), "bound-cpu-µs/call")
			// The gRPC call alone, its client's side: what calling the
			// engine adds to any door's CPU.
			b.ReportMetric(float64(grpcCPU.Microseconds())/float64(b.N), "grpc-cpu-µs/call")
		}
		b.ReportMetric(noopTime.Seconds()/doorTime.Seconds(), "mcp/noop")
		b.ReportMetric(noopTime.Seconds()/boundTime.Seconds(), "bound/noop")
		b.ReportMetric(boundTime.Seconds()/doorTime.Seconds(), "mcp/bound")
		b.ReportMetric(noopTime.Seconds()/(noopTime+grpcTime).Seconds(), "free-door/noop")
	})

	// The door's own allocations, measured rather than estimated: each round
	// makes doorChunk execute_steps straight over gRPC, then doorChunk through
	// Server.Call (the door's tool handler without the MCP transport: argument
	// check, protobuf request, the same gRPC call, reply JSON, metrics as in
	// production). The difference of the two counts is the door's work.
	b.Run("door-own", func(b *testing.B) {
		door := mcpserver.New(mcpserver.Options{Engine: eng, EngineAddr: engineAddr, Caller: &realmv1.Caller{Channel: realmv1.Channel_CHANNEL_MCP_HTTP},
			ErrorLog: io.Discard, Metrics: prometheus.NewRegistry()})
		grpcRuns, doorRuns := benchRuns(b, eng), benchRuns(b, eng)
		raw := make([][]byte, b.N)
		for i, run := range doorRuns {
			raw[i], _ = json.Marshal(map[string]any{"run_id": run, "command": "answer", "params": map[string]any{"ok": true}})
		}
		var grpcAllocs, doorAllocs, grpcBytes, doorBytes uint64
		var ms runtime.MemStats
		b.ReportAllocs()
		b.ResetTimer()
		grpcCalls := func(lo, hi int) {
			for i := lo; i < hi; i++ {
				if err := grpcStep(eng, grpcRuns[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
		doorCalls := func(lo, hi int) {
			for i := lo; i < hi; i++ {
				res, err := door.Call(context.Background(), "execute_step", raw[i])
				if err := toolErr(res, err); err != nil {
					b.Fatal(err)
				}
			}
		}
		// allocs counts what f allocates, in this goroutine or any other.
		allocs := func(f func(lo, hi int), lo, hi int) (objects, bytes uint64) {
			runtime.ReadMemStats(&ms)
			m0, b0 := ms.Mallocs, ms.TotalAlloc
			f(lo, hi)
			runtime.ReadMemStats(&ms)
			return ms.Mallocs - m0, ms.TotalAlloc - b0
		}
		for lo := 0; lo < b.N; lo += doorChunk {
			hi := min(lo+doorChunk, b.N)
			// The kinds take turns going first, so work the engine or the
			// runtime does in the background falls on both alike.
			var gm, gb, dm, db uint64
			if lo/doorChunk%2 == 0 {
				gm, gb = allocs(grpcCalls, lo, hi)
				dm, db = allocs(doorCalls, lo, hi)
			} else {
				dm, db = allocs(doorCalls, lo, hi)
				gm, gb = allocs(grpcCalls, lo, hi)
			}
			grpcAllocs, grpcBytes, doorAllocs, doorBytes = grpcAllocs+gm, grpcBytes+gb, doorAllocs+dm, doorBytes+db
		}
		b.StopTimer()
		n := float64(b.N)
		b.ReportMetric((float64(doorAllocs)-float64(grpcAllocs))/n, "door-allocs/call")
		b.ReportMetric((float64(doorBytes)-float64(grpcBytes))/n, "door-B/call")
		b.ReportMetric(float64(grpcAllocs)/n, "grpc-allocs/call")
	})
}

// boundTool serves a go-sdk tool registered as the door registers
// execute_step (its input schema, through sdkworkaround.ListedSchemas, on
// the same stateless JSON handler) whose handler makes the same gRPC call
// on the next run sent to runs and answers with the text of a door reply
// taken once: the calls cost what they cost through the door, less the
// door's own code. It is the bound for any door that calls the engine over
// gRPC on this SDK.
func boundTool(b *testing.B, eng realmv1.EngineServiceClient, doorURL string, hc *http.Client) (*httptest.Server, chan string) {
	b.Helper()
	door := benchSessions(b, doorURL, hc, 1)[0]
	list, err := door.ListTools(context.Background(), nil)
	if err != nil {
		b.Fatal(err)
	}
	var schema any
	for _, t := range list.Tools {
		if t.Name == "execute_step" {
			schema = t.InputSchema
		}
	}
	if schema == nil {
		b.Fatal("the door lists no execute_step")
	}
	spare := make([]string, 1)
	startRuns(b, eng, spare)
	res, err := door.CallTool(context.Background(), &mcp.CallToolParams{Name: "execute_step",
		Arguments: map[string]any{"run_id": spare[0], "command": "answer", "params": map[string]any{"ok": true}}})
	if err := toolErr(res, err); err != nil {
		b.Fatal(err)
	}
	reply := res.Content[0].(*mcp.TextContent).Text

	runs := make(chan string, 1<<16)
	srv := mcp.NewServer(&mcp.Implementation{Name: "bound", Version: "0"}, nil)
	listed := sdkworkaround.NewListedSchemas()
	listed.AddTool(srv, &mcp.Tool{Name: "execute_step"}, sdkworkaround.RawSchema(schema),
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := grpcStep(eng, <-runs); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: reply}}}, nil
		})
	srv.AddReceivingMiddleware(listed.Middleware())
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	b.Cleanup(hs.Close)
	return hs, runs
}

// burst makes calls lo..hi-1 over clients goroutines and returns the time
// they took.
func burst(b *testing.B, clients, lo, hi int, do func(worker, i int) error) time.Duration {
	var next atomic.Int64
	next.Store(int64(lo))
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for w := 0; w < clients; w++ {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < hi; i = int(next.Add(1)) - 1 {
				if err := do(w, i); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return took
}

// doorChunk is how many calls of each kind door-own and paired make in
// turn. Each burst of the pair starts its 16 clients together, so their
// first calls reach the engine together and the process waits on them, and
// its last calls are waited on as they drain. At 50 calls (3 a client) that
// start and end took a tenth of a door burst; at 400 the burst is mostly
// the steady state a door serving 16 assistants sees.
const doorChunk = 400

// benchParams is execute_step's answer on the gRPC rows, encoded once as
// the door sends it (params_json): the rows measure the call, not
// encoding the answer.
var benchParams = []byte(`{"ok":true}`)

func grpcStep(eng realmv1.EngineServiceClient, run string) error {
	resp, err := eng.ExecuteStep(context.Background(), &realmv1.ExecuteStepRequest{RunId: run, Command: "answer", ParamsJson: benchParams})
	if err == nil && resp.GetReply().GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK {
		err = fmt.Errorf("status %v: %v", resp.GetReply().GetStatus(), resp.GetReply().GetErrors())
	}
	return err
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (t bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.next.RoundTrip(r)
}

func benchSessions(b *testing.B, url string, hc *http.Client, n int) []*mcp.ClientSession {
	b.Helper()
	out := make([]*mcp.ClientSession, n)
	for i := range out {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil)
		s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		out[i] = s
	}
	return out
}

// benchRuns starts b.N runs before the clock starts, one per call.
func benchRuns(b *testing.B, eng realmv1.EngineServiceClient) []string {
	b.Helper()
	runs := make([]string, b.N)
	startRuns(b, eng, runs)
	return runs
}

// startRuns starts a run of the bench workflow for each element of into
// and sets it to the run's id.
func startRuns(b *testing.B, eng realmv1.EngineServiceClient, into []string) {
	b.Helper()
	for i := range into {
		resp, err := eng.StartRun(context.Background(), &realmv1.StartRunRequest{WorkflowId: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		into[i] = resp.GetReply().GetRunId()
	}
}

// measure runs b.N calls spread over clients goroutines and reports
// latency percentiles and throughput.
func measure(b *testing.B, clients int, do func(worker, i int) error) {
	b.Helper()
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				if err := do(w, i); err != nil {
					failed.Store(err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
}

func toolErr(res *mcp.CallToolResult, err error) error {
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("tool error: %v", res.Content[0].(*mcp.TextContent).Text)
	}
	return nil
}
