package server_test

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/realm-go/realm/agent-svc/internal/server"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// A detached drive is owed until its run ends: when engine-svc cannot be
// reached for a while (a replica died, a deploy) the drive waits it out
// and goes on from the run's record, rather than ending and leaving the
// run open with nobody to drive it. The attached control case ends.
func TestADetachedDriveWaitsOutAnEngineOutage(t *testing.T) {
	t.Parallel()
	engineAddr, eng := startEngineAt(t)
	for _, detach := range []bool{true, false} {
		// Each case has its own way to the engine, cut while the run
		// waits at its gate.
		proxy := newCutProxy(t, engineAddr)
		viaProxy := realmv1.NewEngineServiceClient(dial(t, proxy.addr()))
		st := newStub(t, "openai", triageAnswers)
		agent := startAgent(t, server.Config{Engine: viaProxy, Services: openaiAt(st.URL()), GatePoll: 20 * time.Millisecond})
		gate, leave := driveToGate(t, agent, detach)
		proxy.cut()
		time.Sleep(300 * time.Millisecond) // gate polls fail meanwhile
		if _, err := eng.SubmitHumanResponse(ctx(t), &realmv1.SubmitHumanResponseRequest{RunId: gate.GetRunId(), GateId: gate.GetGate().GetGateId(), Choice: "send"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		proxy.mend()
		phase := realmv1.RunPhase_RUN_PHASE_UNSPECIFIED
		for i := 0; i < 250; i++ {
			if phase = phaseOf(t, eng, gate.GetRunId()); phase == realmv1.RunPhase_RUN_PHASE_COMPLETED {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		leave()
		switch {
		case detach && phase != realmv1.RunPhase_RUN_PHASE_COMPLETED:
			t.Errorf("detached: the run is %v after the outage, want completed by the drive that waited it out", phase)
		case !detach && phase == realmv1.RunPhase_RUN_PHASE_COMPLETED:
			t.Errorf("attached: the run completed; the control case proves nothing")
		}
	}
}

// cutProxy forwards TCP to an upstream until cut: then every connection
// is closed and new ones are closed as they arrive, until mend.
type cutProxy struct {
	lis net.Listener
	mu  sync.Mutex
	off bool
	cs  []net.Conn
}

func newCutProxy(t *testing.T, upstream string) *cutProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{lis: lis}
	t.Cleanup(func() { lis.Close(); p.cut() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.off {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.cs = append(p.cs, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) addr() string { return p.lis.Addr().String() }

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.off = true
	for _, c := range p.cs {
		c.Close()
	}
	p.cs = nil
}

func (p *cutProxy) mend() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.off = false
}
