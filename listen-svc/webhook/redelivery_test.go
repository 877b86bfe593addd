package webhook_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/realm-go/realm/listen-svc/dedup"
	"github.com/realm-go/realm/listen-svc/webhook"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// dedupStores are the two dedup backends, each fresh for the test: this
// process's memory, and Redis ($REDIS_URL, else miniredis) under a prefix
// of the test's own.
func dedupStores(t *testing.T) map[string]func() dedup.Store {
	t.Helper()
	return map[string]func() dedup.Store{
		"memory": func() dedup.Store { return dedup.NewMemory(nil) },
		"redis": func() dedup.Store {
			var rc *redis.Client
			if u := strings.TrimSpace(os.Getenv("REDIS_URL")); u != "" {
				opt, err := redis.ParseURL(u)
				if err != nil {
					t.Fatal(err)
				}
				rc = redis.NewClient(opt)
			} else {
				rc = redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
			}
			t.Cleanup(func() { rc.Close() })
			return dedup.NewRedis(rc, fmt.Sprintf("test:listen:%s:%d", t.Name(), time.Now().UnixNano()))
		},
	}
}

var runIDOf = regexp.MustCompile(`"run_id":"([^"]+)"`)

// failFirstHandover sends d while every handover fails: the reply is a
// 500 naming the run, which stays open for a re-delivery.
func failFirstHandover(t *testing.T, h *harness, d delivery, workflowID string) string {
	t.Helper()
	h.disp.set(errors.New("agent-svc: connection refused"), nil)
	status, body := h.post(d.path, d.body, d.headers)
	runs := h.runs(workflowID)
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
	runID := runs[0].GetRunId()
	if want := fmt.Sprintf(`{"error":"spawn_failed","run_id":"%s","status":"failed"}`, runID); status != http.StatusInternalServerError || body != want {
		t.Fatalf("failed handover: %d %s, want 500 %s", status, body, want)
	}
	st, err := h.eng.GetRunState(ctx(t), &realmv1.GetRunStateRequest{RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	if ph := st.GetState().GetRunPhase(); ph != realmv1.RunPhase_RUN_PHASE_RUNNING {
		t.Fatalf("after a failed handover of a delivery with an id: phase %v, want running (left for the re-delivery)", ph)
	}
	if !strings.Contains(h.logs.String(), `webhook: run left open for a re-delivery {"path":"`+d.path+`","run_id":"`+runID+`"}`) {
		t.Errorf("no left-open log line:\n%s", h.logs)
	}
	return runID
}

// TestARedeliveryAfterAFailedHandoverHandsTheSameRunOffAgain: a hand-off
// that failed is not a duplicate; the re-delivery hands the same run off
// (202 handed_off_again), and only then is a further copy deduplicated,
// with no second hand-off. On both dedup backends.
func TestARedeliveryAfterAFailedHandoverHandsTheSameRunOffAgain(t *testing.T) {
	t.Parallel()
	for name, store := range dedupStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(o *webhook.Options) { o.Dedup = store() })
			d := signed("github", "guid-redeliver", time.Now())
			runID := failFirstHandover(t, h, d, "gh")
			if got := h.disp.handed(); len(got) != 0 {
				t.Fatalf("handed %v after a failed handover", got)
			}

			h.disp.set(nil, nil) // agent-svc is back
			status, body := h.post(d.path, d.body, d.headers)
			if want := fmt.Sprintf(`{"run_id":"%s","status":"handed_off_again"}`, runID); status != http.StatusAccepted || body != want {
				t.Fatalf("re-delivery: %d %s, want 202 %s\nlogs:\n%s", status, body, want, h.logs)
			}
			if got := h.disp.handed(); len(got) != 1 || got[0] != runID {
				t.Fatalf("handed %v, want the same run %s once", got, runID)
			}
			if !strings.Contains(h.logs.String(), `webhook: dispatched again {"path":"/gh","run_id":"`+runID+`","pid":null}`) {
				t.Errorf("no dispatched-again log line:\n%s", h.logs)
			}

			// Now the run was handed off: a further copy of the same signed
			// request is a replay; one signed anew (another delivery of the
			// same event) is a duplicate.
			status, body = h.post(d.path, d.body, d.headers)
			if status != http.StatusForbidden || body != `{"error":"forbidden"}` {
				t.Fatalf("verbatim copy after the hand-off: %d %s, want 403 forbidden (a replay)", status, body)
			}
			again := signed("github", "guid-redeliver", time.Now())
			again.body = strings.Replace(again.body, "}", `,"n":2}`, 1)
			again.headers["X-Hub-Signature-256"] = "sha256=" + hexMAC(secrets["LISTEN_TEST_GH"], again.body)
			status, body = h.post(again.path, again.body, again.headers)
			if status != http.StatusOK || body != `{"status":"deduplicated"}` {
				t.Fatalf("copy after the hand-off: %d %s, want 200 deduplicated", status, body)
			}
			if got := h.disp.handed(); len(got) != 1 {
				t.Fatalf("handed %v, want one hand-off", got)
			}
			if n := len(h.runs("gh")); n != 1 {
				t.Fatalf("%d runs, want 1", n)
			}
		})
	}
}

// TestTwoConcurrentRedeliveriesHandTheRunOffOnce: after a failed hand-off,
// two copies arrive at once at two listeners sharing the dedup store; one
// hands the run off again while the other waits on its claim, then is
// answered deduplicated. On both dedup backends.
func TestTwoConcurrentRedeliveriesHandTheRunOffOnce(t *testing.T) {
	t.Parallel()
	for name, store := range dedupStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			shared := store()
			h := newHarness(t, func(o *webhook.Options) { o.Dedup = shared; o.ClaimPoll = 5 * time.Millisecond })
			// shared_secret: copies of one signed request would be refused
			// as replays before they reach the dedup record.
			d := signed("shared_secret", "4242", time.Now())
			runID := failFirstHandover(t, h, d, "tickets")

			second := webhook.New(webhook.Options{Catalog: staticOf(t, h), Engine: h.eng, Dispatcher: h.disp,
				Dedup: shared, ClaimPoll: 5 * time.Millisecond})
			urls := []string{h.url, httptestServer(t, second)}
			hold := make(chan struct{})
			h.disp.set(nil, hold) // agent-svc is back, and slow to take the run
			var wg sync.WaitGroup
			var mu sync.Mutex
			replies := map[string]int{}
			for _, u := range urls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					status, body := postTo(t, u+d.path, d.body, d.headers)
					mu.Lock()
					defer mu.Unlock()
					replies[fmt.Sprintf("%d %s", status, body)]++
				}()
			}
			deadline := time.Now().Add(10 * time.Second)
			for h.srv.InFlight()+second.InFlight() != 2 {
				if time.Now().After(deadline) {
					t.Fatal("the two copies never arrived together")
				}
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond) // both reach the record
			close(hold)
			wg.Wait()
			want := map[string]int{
				fmt.Sprintf(`202 {"run_id":"%s","status":"handed_off_again"}`, runID): 1,
				`200 {"status":"deduplicated"}`:                                       1,
			}
			if fmt.Sprint(replies) != fmt.Sprint(want) {
				t.Fatalf("replies %v, want %v\nlogs:\n%s", replies, want, h.logs)
			}
			if got := h.disp.handed(); len(got) != 1 || got[0] != runID {
				t.Fatalf("handed %v, want the run %s once", got, runID)
			}
		})
	}
}

// TestARedeliveryAfterAgentSvcWasDownIsDrivenOnce is the whole path with
// the real agent-svc: while it is down the delivery is answered 500 (the
// sender re-delivers); once it is up the re-delivery hands the same run
// off, agent-svc drives it to its end exactly once, and a further copy is
// deduplicated.
func TestARedeliveryAfterAgentSvcWasDownIsDrivenOnce(t *testing.T) {
	t.Parallel()
	engineAddr, eng := startEngineAddr(t)
	table, problems := webhook.Build([]webhook.Declared{register(t, eng, "tickets")}, getenv, true)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	addr := freeAddr(t) // agent-svc's, nobody listens yet
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1, MaxDelay: 50 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	agent := webhook.NewAgent(realmv1.NewAgentServiceClient(conn),
		&realmv1.DriveOptions{Provider: "anthropic", Model: "claude-test"}, nil)
	transcript := &syncWriter{b: &bytes.Buffer{}}
	agent.Transcript = transcript
	t.Cleanup(agent.Close)
	var logs bytes.Buffer
	srv := webhook.New(webhook.Options{Catalog: webhook.Static{T: table}, Engine: eng, Dispatcher: agent,
		Dedup: dedupStores(t)["redis"](), Log: webhook.NewLogger(&syncWriter{b: &logs}, &syncWriter{b: &logs}, webhook.LevelInfo)})
	url := httptestServer(t, srv)
	del := signed("shared_secret", "5150", time.Now())

	status, body := postTo(t, url+del.path, del.body, del.headers)
	m := runIDOf.FindStringSubmatch(body)
	if status != http.StatusInternalServerError || m == nil || body != `{"error":"spawn_failed","run_id":"`+m[1]+`","status":"failed"}` {
		t.Fatalf("agent-svc down: %d %s, want 500 spawn_failed naming the run", status, body)
	}
	runID := m[1]

	startAgentSvcAt(t, engineAddr, addr)
	conn.Connect()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if !conn.WaitForStateChange(ctx(t), s) {
			t.Fatal("the listener never reached agent-svc")
		}
	}
	status, body = postTo(t, url+del.path, del.body, del.headers)
	if want := `{"run_id":"` + runID + `","status":"handed_off_again"}`; status != http.StatusAccepted || body != want {
		t.Fatalf("re-delivery: %d %s, want 202 %s\nlogs:\n%s", status, body, want, logs.String())
	}
	agent.Wait() // the drive's stream ends with the run
	st, err := eng.GetRunState(ctx(t), &realmv1.GetRunStateRequest{RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	if ph := st.GetState().GetRunPhase(); ph != realmv1.RunPhase_RUN_PHASE_COMPLETED {
		t.Fatalf("run phase %v, want completed\ntranscript:\n%s", ph, transcript.b)
	}
	if n := strings.Count(transcript.b.String(), "Run ID: "+runID+"\n"); n != 1 {
		t.Fatalf("agent-svc drove the run %d times, want once\ntranscript:\n%s", n, transcript.b)
	}
	status, body = postTo(t, url+del.path, del.body, del.headers)
	if status != http.StatusOK || body != `{"status":"deduplicated"}` {
		t.Fatalf("copy after the drive: %d %s, want 200 deduplicated", status, body)
	}
	resp, err := eng.ListRuns(ctx(t), &realmv1.ListRunsRequest{WorkflowId: "tickets"})
	if err != nil || len(resp.GetRuns()) != 1 {
		t.Fatalf("runs: %v %v", resp.GetRuns(), err)
	}
	if n := strings.Count(transcript.b.String(), "Run ID: "); n != 1 {
		t.Fatalf("%d drives in all, want 1\ntranscript:\n%s", n, transcript.b)
	}
}
