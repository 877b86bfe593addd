package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/engine-svc/internal/store/respproxy"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// lostReplyFault is how the proxy loses the reply of the commit it picks.
type lostReplyFault struct {
	name string
	// fault is what happens to the picked commit's reply; the next `more`
	// commits (the client's repeats) lose theirs too, by Drop.
	fault respproxy.Fault
	more  int
}

var lostReplyFaults = []lostReplyFault{
	// The connection drops after Redis ran the commit: go-redis sends it
	// again on a new connection.
	{name: "dropped", fault: respproxy.Drop},
	// The reply comes after the client's read timeout.
	{name: "late", fault: respproxy.Delay},
	// Every answer go-redis waits for is lost (its first send and its
	// three retries), so the store's own settling has to find the truth.
	{name: "dropped-5x", fault: respproxy.Drop, more: 4},
}

// TestALostCommitReplyIsNeitherLostNorDoneTwice drives one run of a
// workflow with every kind of commit (start, an agent step's record, a
// handler step's claim and record, a gate's opening and answer, the seal,
// a finalizer's lease and record) through a proxy that loses the reply of
// one commit, for each commit in turn. Every call must answer what the same
// call answers with no fault, the workflow must have exactly one run, each
// handler must run once, and the run must end completed with no claim left.
func TestALostCommitReplyIsNeitherLostNorDoneTwice(t *testing.T) {
	t.Parallel()
	base := driveLostReply(t, nil, 0)
	// The commits of the clean run, by the call that makes each: every
	// commit point of the issue (start, claim, record, seal, finalizer
	// lease, gate answer) is one of them.
	points := []struct{ call, what string }{
		{"start_run", "create"},
		{"execute_step", "record_draft_and_claim_price"},
		{"execute_step", "record_price_and_open_gate"},
		{"submit_human_response", "answer_gate_and_seal"},
		{"drain_run", "lease_finalizer"},
		{"drain_run", "record_finalizer"},
	}
	if len(base.commits) != len(points) {
		t.Fatalf("the clean run made %d commits (%v), want %d:\n%s", len(base.commits), base.commits, len(points), strings.Join(base.replies, "\n"))
	}
	for i, p := range points {
		if base.commits[i] != p.call {
			t.Fatalf("commit %d was made by %s, want %s (%s)", i+1, base.commits[i], p.call, p.what)
		}
	}
	for _, f := range lostReplyFaults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			for k := 1; k <= len(base.commits); k++ {
				t.Run(fmt.Sprintf("%d_%s_%s", k, points[k-1].call, points[k-1].what), func(t *testing.T) {
					got := driveLostReply(t, &f, k)
					if got.settled == 0 && f.more > 0 {
						t.Errorf("no commit needed settling: the fault did not reach past go-redis's retries")
					}
					for i := range base.replies {
						if i >= len(got.replies) || got.replies[i] != base.replies[i] {
							t.Errorf("reply %d differs from the clean run's:\n got %s\nwant %s", i+1, at(got.replies, i), base.replies[i])
						}
					}
				})
			}
		})
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}

// lostReplyRun is what one drive saw.
type lostReplyRun struct {
	commits []string // for each commit, the call that made it
	replies []string // each call's reply, fingerprinted
	settled int64    // commits the store had to settle
}

// driveLostReply runs the workflow once, the k-th commit's reply lost by
// f (f nil: no fault), and checks the run's end state.
func driveLostReply(t *testing.T, f *lostReplyFault, k int) lostReplyRun {
	t.Helper()
	direct, prefix := realRedis(t)
	proxy, err := respproxy.Start(direct.Options().Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	proxy.Delay = 400 * time.Millisecond

	var (
		mu      sync.Mutex
		call    = "setup"
		out     lostReplyRun
		commits int
		lose    int // replies still to lose: the picked one and its repeats
	)
	sha := store.CommitScriptHash()
	proxy.SetRule(func(c respproxy.Command) respproxy.Fault {
		if !strings.EqualFold(c.Name(), "evalsha") && !strings.EqualFold(c.Name(), "eval") {
			return respproxy.Pass
		}
		if len(c) < 2 || (string(c[1]) != sha && !strings.Contains(string(c[1]), "cids")) {
			return respproxy.Pass
		}
		mu.Lock()
		defer mu.Unlock()
		if lose > 0 {
			lose--
			return respproxy.Drop
		}
		commits++
		out.commits = append(out.commits, call)
		if f != nil && commits == k {
			lose = f.more
			return f.fault
		}
		return respproxy.Pass
	})
	// The store goes through the proxy with a read timeout shorter than
	// the proxy's delay; the registry (runner leases) talks to Redis directly.
	rc := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ReadTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rc.Close() })
	st := store.NewRedis(rc, store.Options{Prefix: prefix, Buckets: 16})
	// Scripts loaded up front: a first EVALSHA answered NOSCRIPT and sent
	// again as EVAL would count as two commits.
	if err := st.Check(ctx(t)); err != nil {
		t.Fatal(err)
	}
	e := engineOn(t, st, direct, prefix)

	var priced, released atomic.Int64
	startRunner(t, e, map[string]handlerFunc{
		"price": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			priced.Add(1)
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"total": 42.0})}, nil
		},
		"release": func(context.Context, *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			released.Add(1)
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{"released": true})}, nil
		},
	})
	if r := e.register(t, readFile(t, "testdata/lostreply.yaml")); !r.GetRegistered() {
		t.Fatal(r.GetReport().GetText())
	}

	during := func(name string) {
		mu.Lock()
		call = name
		mu.Unlock()
	}
	var run, gate string
	note := func(r *realmv1.Reply) {
		s := fmt.Sprintf("%s %s %v code=%q hint=%q", r.GetStatus(), r.GetRunPhase(), tools(r), r.GetErrorCode(), r.GetContextHint())
		for id, name := range map[string]string{run: "<run>", gate: "<gate>"} {
			if id != "" {
				s = strings.ReplaceAll(s, id, name)
			}
		}
		out.replies = append(out.replies, s)
	}

	during("start_run")
	started := start(t, e, "lostreply", nil)
	run = started.GetRunId()
	note(started)
	during("execute_step")
	opened := step(t, e, run, "draft", map[string]any{"note": "Pay the supplier."})
	gate = opened.GetGate().GetGateId()
	token := opened.GetGate().GetClaimToken()
	note(opened)
	during("submit_human_response")
	note(respond(t, e, run, gate, "ok", &token))
	// A run sealed by a gate's answer leaves its finalizers to a drainer.
	during("drain_run")
	drained, err := e.client.DrainRun(ctx(t), &realmv1.DrainRunRequest{RunId: run, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	note(drained.GetReply())
	during("after")

	s := state(t, e, run)
	var page *store.RunPage
	out.replies = append(out.replies, fmt.Sprintf("state %s completed=%v in_progress=%v", s.GetRunPhase(), s.GetCompletedSteps(), s.GetInProgressSteps()))
	page, err = st.ListRuns(ctx(t), store.ListFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.RunIDs) != 1 {
		t.Errorf("the workflow has %d runs %v, want 1", len(page.RunIDs), page.RunIDs)
	}
	if n := priced.Load(); n != 1 {
		t.Errorf("the price handler ran %d times, want 1", n)
	}
	if n := released.Load(); n != 1 {
		t.Errorf("the release finalizer ran %d times, want 1", n)
	}
	if s.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED || len(s.GetInProgressSteps()) != 0 {
		t.Errorf("run ended %s with steps in progress %v, want completed with none", s.GetRunPhase(), s.GetInProgressSteps())
	}
	claims, err := st.Due(ctx(t), store.IndexClaims, 1e18, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != 0 {
		t.Errorf("claims left in the index: %v", claims)
	}
	doc := loadDoc(t, e, run)
	if f := doc.FinalizerLedger["release"]; f == nil || f.Status != "completed" {
		t.Errorf("release finalizer = %+v, want completed", f)
	}
	out.settled = st.Settles()
	return out
}
