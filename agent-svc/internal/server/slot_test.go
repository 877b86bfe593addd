package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/agent-svc/internal/limit"
	"github.com/realm-go/realm/agent-svc/internal/server"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// A drive waiting on a person holds no slot: with a limit of one, a second
// drive runs to its end while the first waits at its gate, and the first
// goes on once the gate is answered.
func TestADriveAtAGateHoldsNoSlot(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	st := newStub(t, "openai", triageAnswers)
	agent := startAgent(t, server.Config{Engine: eng, Services: openaiAt(st.URL()), Limiter: limit.NewLocal(1)})
	gated := make(chan *realmv1.DriveEvent, 1)
	first := make(chan []*realmv1.DriveEvent, 1)
	go func() {
		first <- drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "support", Params: params(t, map[string]any{"ticket": 3}), Options: opts("openai", "gpt-test")},
			func(ev *realmv1.DriveEvent) {
				if ev.GetKind() == realmv1.DriveEventKind_DRIVE_EVENT_KIND_GATE_OPENED {
					gated <- ev
				}
			})
	}()
	var g *realmv1.DriveEvent
	select {
	case g = <-gated:
	case <-time.After(20 * time.Second):
		t.Fatal("the first drive never reached its gate")
	}
	second := drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "one", Params: params(t, map[string]any{"n": 1}), Options: opts("openai", "gpt-test")}, nil)
	if last(second).GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
		t.Fatalf("the second drive, while the first waits at its gate: %v\n%s", last(second), texts(second))
	}
	if _, err := eng.SubmitHumanResponse(ctx(t), &realmv1.SubmitHumanResponseRequest{RunId: g.GetRunId(), GateId: g.GetGate().GetGateId(), Choice: "send"}); err != nil {
		t.Fatal(err)
	}
	evs := <-first
	if last(evs).GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
		t.Fatalf("the first drive after its gate: %v\n%s", last(evs), texts(evs))
	}
}

// freezer is a TCP proxy to Redis that can stop forwarding, as a network
// that partitions one agent-svc from Redis.
type freezer struct {
	l      net.Listener
	frozen atomic.Bool
	wg     sync.WaitGroup
}

func startFreezer(t *testing.T, upstream string) *freezer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{l: l}
	t.Cleanup(func() { _ = l.Close(); f.wg.Wait() })
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = c.Close()
				continue
			}
			for _, p := range [][2]net.Conn{{c, u}, {u, c}} {
				f.wg.Add(1)
				go func() {
					defer f.wg.Done()
					defer p[0].Close()
					defer p[1].Close()
					buf := make([]byte, 32<<10)
					for {
						n, err := p[0].Read(buf)
						for f.frozen.Load() { // held, as by a partition
							time.Sleep(5 * time.Millisecond)
						}
						if n > 0 {
							if _, werr := p[1].Write(buf[:n]); werr != nil {
								return
							}
						}
						if err != nil {
							if err != io.EOF {
								return
							}
							return
						}
					}
				}()
			}
		}
	}()
	return f
}

// The drive limit is not exceeded when a holder loses its lease: an
// agent-svc cut off from Redis stops its model call before its lease can
// expire and pass to another drive, queues again, and finishes once Redis
// is back. At no time are two model calls in flight under a limit of one.
func TestALostSlotCutsItsModelCallBeforeAnotherDriveTakesIt(t *testing.T) {
	t.Parallel()
	rc := redisFor(t, "redis")
	opt := rc.(*redis.Client).Options()
	proxy := startFreezer(t, opt.Addr)
	cut := redis.NewClient(&redis.Options{Addr: proxy.l.Addr().String(), DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = cut.Close() })
	prefix := fmt.Sprintf("realm-test:%d:drives", time.Now().UnixNano())
	t.Cleanup(func() {
		for _, k := range []string{"holders", "queue", "alive", "ticket"} {
			rc.Del(context.Background(), "{"+prefix+"}:"+k)
		}
	})
	const ttl = 600 * time.Millisecond
	eng := startEngine(t)
	hold := make(chan struct{})
	st := newStubHolding(t, "openai", triageAnswers, hold)
	a := startAgent(t, server.Config{Engine: eng, Services: openaiAt(st.URL()),
		Limiter: limit.NewRedis(cut, 1, limit.RedisOptions{Prefix: prefix, TTL: ttl, Poll: 5 * time.Millisecond})})
	b := startAgent(t, server.Config{Engine: eng, Services: openaiAt(st.URL()),
		Limiter: limit.NewRedis(rc, 1, limit.RedisOptions{Prefix: prefix, TTL: ttl, Poll: 5 * time.Millisecond})})

	firstDone := make(chan []*realmv1.DriveEvent, 1)
	go func() {
		firstDone <- drive(t, a, &realmv1.DriveRunRequest{WorkflowId: "one", Params: params(t, map[string]any{"n": 1}), Options: opts("openai", "gpt-test")}, nil)
	}()
	for i := 0; st.inFlight.Load() == 0 && i < 2000; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if st.inFlight.Load() != 1 {
		t.Fatal("the first drive's model call never started")
	}
	proxy.frozen.Store(true) // a's agent-svc can no longer reach Redis
	second := drive(t, b, &realmv1.DriveRunRequest{WorkflowId: "one", Params: params(t, map[string]any{"n": 2}), Options: opts("openai", "gpt-test")}, nil)
	if last(second).GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
		t.Fatalf("the second drive: %v\n%s", last(second), texts(second))
	}
	proxy.frozen.Store(false)
	close(hold)
	first := <-firstDone
	if last(first).GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
		t.Fatalf("the first drive after Redis came back: %v\n%s", last(first), texts(first))
	}
	if n := st.cancelled.Load(); n != 1 {
		t.Errorf("model calls cut = %d, want the first drive's (1)", n)
	}
	if m := st.maxIn.Load(); m > 1 {
		t.Errorf("model calls in flight at once = %d under a limit of 1", m)
	}
}
