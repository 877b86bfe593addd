package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// owingWorkflow ends once answered and then owes a cleanup step no runner
// serves: each run stays in the cleanup index for drain to find.
const owingWorkflow = "id: owing\nname: Owing\nversion: 1\nsteps:\n  answer:\n    description: Answer.\n    execution: agent\n  audit:\n    description: Audit.\n    execution: finalizer\n    handler: audit\n    on_outcome: always\n"

// BenchmarkOperatorCommandsPeakHeap runs each operator batch command over
// stores of 1,000 and 10,000 ended runs (half owing a cleanup step, half
// not) and reports the peak live heap the command added above the
// filled store's: the engine, its gRPC client and (embedded) the store share this
// process, so a command that read the store whole would grow with it. Run
// with -benchtime=1x (purge-force deletes, so it is last and acts once):
//
//	go test ./internal/server -run '^$' -bench OperatorCommandsPeakHeap -benchtime=1x
//
// The store is the embedded one (miniredis with its journal) and, when
// REDIS_URL is set, real Redis under a key prefix of the benchmark's own,
// removed when it ends.
func BenchmarkOperatorCommandsPeakHeap(b *testing.B) {
	backends := []string{"embedded"}
	if os.Getenv("REDIS_URL") != "" {
		backends = append(backends, "redis")
	}
	for _, backend := range backends {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("%s/runs=%d", backend, n), func(b *testing.B) {
				e := setup(b, backend)
				fillEnded(b, e, n)
				e.clock.Advance(2 * time.Hour)
				for _, op := range operatorOps(e) {
					b.Run(op.name, func(b *testing.B) {
						var peak, selected int64
						for b.Loop() {
							p, s := peakHeap(b, op.do)
							peak, selected = max(peak, p), s
						}
						b.ReportMetric(float64(peak), "peak-heap-B")
						b.ReportMetric(float64(selected), "selected")
					})
				}
			})
		}
	}
}

// operatorOp is one command: it returns how many runs it selected.
type operatorOp struct {
	name string
	do   func(context.Context) (int64, error)
}

func operatorOps(e *env) []operatorOp {
	stream := func(open func(context.Context) (func() (*realmv1.OperatorEvent, error), error)) func(context.Context) (int64, error) {
		return func(ctx context.Context) (int64, error) {
			next, err := open(ctx)
			if err != nil {
				return 0, err
			}
			for {
				ev, err := next()
				if errors.Is(err, io.EOF) {
					return 0, errors.New("no summary")
				}
				if err != nil {
					return 0, err
				}
				if sum := ev.GetSummary(); sum != nil {
					return sum.GetSelected(), nil
				}
			}
		}
	}
	purge := func(force bool) func(context.Context) (int64, error) {
		return stream(func(ctx context.Context) (func() (*realmv1.OperatorEvent, error), error) {
			s, err := e.client.PurgeRuns(ctx, &realmv1.PurgeRunsRequest{OlderThanSeconds: 3600, Force: force})
			return func() (*realmv1.OperatorEvent, error) {
				r, err := s.Recv()
				return r.GetEvent(), err
			}, err
		})
	}
	return []operatorOp{
		{"purge-dry", purge(false)},
		{"drain-dry", stream(func(ctx context.Context) (func() (*realmv1.OperatorEvent, error), error) {
			s, err := e.client.DrainRuns(ctx, &realmv1.DrainRunsRequest{Expired: true})
			return func() (*realmv1.OperatorEvent, error) {
				r, err := s.Recv()
				return r.GetEvent(), err
			}, err
		})},
		{"gc-heal-dry", func(ctx context.Context) (int64, error) {
			r, err := e.client.GcRuns(ctx, &realmv1.GcRunsRequest{Heal: true})
			return r.GetRunsScanned(), err
		}},
		{"gc-sweep-dry", func(ctx context.Context) (int64, error) {
			r, err := e.client.GcRuns(ctx, &realmv1.GcRunsRequest{Sweep: true, OlderThanSeconds: 3600})
			return int64(len(r.GetResidue())), err
		}},
		{"purge-force", purge(true)},
	}
}

// fillEnded fills the store with n ended runs: half of answerWorkflow,
// half of owingWorkflow (left owing their cleanup).
func fillEnded(b *testing.B, e *env, n int) {
	b.Helper()
	e.register(b, []byte(answerWorkflow))
	e.register(b, []byte(owingWorkflow))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const workers = 16
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				wf := "answer"
				if i%2 == 1 {
					wf = "owing"
				}
				r, err := e.client.StartRun(ctx, &realmv1.StartRunRequest{WorkflowId: wf})
				if err == nil {
					_, err = e.client.ExecuteStep(ctx, &realmv1.ExecuteStepRequest{RunId: r.GetReply().GetRunId(), Command: "answer", Params: params(b, map[string]any{"text": "hi"})})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// peakHeap runs do and returns the most live heap it held above the live
// heap before it, and what do returned. Live heap is what the last
// collection found reachable (runtime/metrics /gc/heap/live:bytes),
// sampled every 2 ms; the collector runs at GOGC=1 meanwhile, so a
// collection follows every 1% of allocation and the samples track what
// the command holds, not the garbage the pacer would let pile up (whose
// slack grows with the store when the store lives in this process).
func peakHeap(b *testing.B, do func(context.Context) (int64, error)) (int64, int64) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	live := func() int64 {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64())
	}
	runtime.GC()
	base := live()
	old := debug.SetGCPercent(1)
	defer debug.SetGCPercent(old)
	stop := make(chan struct{})
	peak := base
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // owned here: stopped and waited for before peakHeap returns
		defer wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				peak = max(peak, live())
			}
		}
	}()
	selected, err := do(ctx)
	close(stop)
	wg.Wait()
	if err != nil {
		b.Fatal(err)
	}
	return peak - base, selected
}
