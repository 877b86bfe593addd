package main

import (
	"math"
	"strings"
	"testing"
)

func TestOwnerIsTheInnermostFrameOutsideTheStandardLibrary(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stack []string
		want  string
	}{
		{"a write syscall belongs to gRPC's writer", []string{"internal/runtime/syscall/linux.Syscall6", "syscall.Syscall", "internal/poll.(*FD).Write", "net.(*conn).Write",
			"google.golang.org/grpc/internal/transport.(*bufWriter).Flush", "google.golang.org/grpc/internal/transport.(*loopyWriter).run"}, ownGRPC},
		{"an allocation belongs to the code that allocated", []string{"runtime.mallocgc", "runtime.newobject", "encoding/json.Marshal",
			"github.com/realm-go/realm/engine-svc/internal/engine.(*txn).change", "google.golang.org/grpc.(*Server).processRPC"}, ownRealm},
		{"protobuf decoding inside a gRPC receive is protobuf's", []string{"runtime.mallocgc", "google.golang.org/protobuf/internal/impl.consumeStringValidateUTF8",
			"google.golang.org/grpc.recv"}, ownProto},
		{"the embedded store's fsync is its journal's", []string{"internal/runtime/syscall/linux.Syscall6", "os.(*File).Sync",
			"github.com/realm-go/realm/engine-svc/internal/store/embedded.(*Server).waitSynced", "github.com/alicebob/miniredis/v2/server.(*Server).Dispatch"}, ownEmbedded},
		{"the embedded store's server is miniredis", []string{"runtime.futex", "github.com/alicebob/miniredis/v2/server.(*Server).servePeer"}, ownMini},
		{"the store's client is go-redis", []string{"bufio.(*Reader).fill", "github.com/redis/go-redis/v9/internal/pool.(*Conn).WithReader"}, ownRedis},
		{"the generated stubs are ours, apart", []string{"runtime.mallocgc", "github.com/realm-go/realm/pkg/gen/realm/v1._EngineService_ExecuteStep_Handler"}, ownStubs},
		{"the benchmark's loop is the caller", []string{"time.Now", "github.com/realm-go/realm/engine-svc/internal/server_test.driveTransitions.func1"}, ownBenchLoop},
		{"run creation is set apart wherever it runs", []string{"runtime.mallocgc", "github.com/realm-go/realm/engine-svc/internal/engine.(*Engine).StartRun",
			"github.com/realm-go/realm/pkg/gen/realm/v1._EngineService_StartRun_Handler"}, ownSetup},
		{"gRPC's register of a handler is not the test's registration", []string{"runtime.mallocgc", "github.com/realm-go/realm/engine-svc/internal/server.(*Server).ExecuteStep",
			"google.golang.org/grpc.(*Server).register.(*Server).wrapUnaryHandler.func1"}, ownRealm},
		{"golang.org/x/net is gRPC's HTTP/2", []string{"golang.org/x/net/http2/hpack.(*Encoder).WriteField"}, ownGRPC},
		{"another module is named by its path", []string{"runtime.mallocgc", "go.opentelemetry.io/otel/trace.SpanFromContext"}, "go.opentelemetry.io/otel/trace"},
		{"a generic of the standard library belongs to its caller", []string{"maps.Clone[go.shape.map[string]*github.com/realm-go/realm/pkg/record.Output]",
			"github.com/realm-go/realm/engine-svc/internal/engine.(*txn).change"}, ownRealm},
		{"the compiler's hash functions belong to their caller", []string{"type:.hash.golang.org/x/net/http2.streamKey", "google.golang.org/grpc/internal/transport.(*http2Client).NewStream"}, ownGRPC},
		{"the profiler's own snapshots are set apart", []string{"runtime.mallocgc", "runtime/pprof.writeHeapInternal",
			"github.com/realm-go/realm/engine-svc/internal/server_test.profileTimed.func1"}, ownProfiler},
		{"the background GC", []string{"runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker.func2", "runtime.systemstack"}, ownGC},
		{"the scheduler", []string{"runtime.futex", "runtime.notesleep", "runtime.stopm", "runtime.findRunnable", "runtime.schedule", "runtime.mcall"}, ownSched},
		{"other runtime work", []string{"runtime.memmove", "runtime.morestack"}, ownRuntime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := owner(tc.stack); got != tc.want {
				t.Errorf("owner = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseTracesReadsEachSampleAndItsStack(t *testing.T) {
	const out = `File: s.test
Type: cpu
Duration: 11.78s, Total samples = 6s (50.92%)
-----------+-------------------------------------------------------
      10ms   runtime.lock2
             runtime.findRunnable
             runtime.schedule
-----------+-------------------------------------------------------
     1.20s   internal/runtime/syscall/linux.Syscall6
             net.(*conn).Write
             google.golang.org/grpc/internal/transport.(*loopyWriter).run
-----------+-------------------------------------------------------
     500us   runtime.mallocgc
             github.com/realm-go/realm/engine-svc/internal/engine.(*txn).change
-----------+-------------------------------------------------------
`
	got := map[string]float64{}
	var stacks int
	err := parseTraces(strings.NewReader(out), func(v float64, stack []string) {
		got[owner(stack)] += v
		stacks++
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{ownSched: 10_000, ownGRPC: 1_200_000, ownRealm: 500}
	if stacks != 3 {
		t.Errorf("read %d samples, want 3", stacks)
	}
	for o, v := range want {
		if math.Abs(got[o]-v) > 1e-6 {
			t.Errorf("%s = %v µs, want %v", o, got[o], v)
		}
	}
}

func TestParseTracesReadsCounts(t *testing.T) {
	const out = `Type: alloc_objects
-----------+-------------------------------------------------------
      5001   google.golang.org/protobuf/internal/impl.consumeStringValidateUTF8
             google.golang.org/grpc.recv
-----------+-------------------------------------------------------
         0   runtime/pprof.writeHeapInternal
`
	total := 0.0
	if err := parseTraces(strings.NewReader(out), func(v float64, _ []string) { total += v }); err != nil {
		t.Fatal(err)
	}
	if total != 5001 {
		t.Errorf("total = %v, want 5001", total)
	}
}

func TestAttributionTableListsOwnersInOrderWithTotals(t *testing.T) {
	got := attributionTable("T", "owner", []string{"a", "b"}, []Attribution{
		{ownGRPC: 40, ownRealm: 10, ownSched: 0.2},
		{ownRealm: 12, "example.com/x/y": 3},
	})
	want := `T

| owner | a | b |
| --- | ---: | ---: |
| Realm's code (engine, store client, server) | 10 | 12 |
| gRPC-go (transport, HTTP/2, client and server) | 40 | 0 |
| example.com/x/y | 0 | 3 |
| total (owners under 0.5 left out) | 50 | 15 |
`
	if got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}
