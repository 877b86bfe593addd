package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/realm-go/realm/engine-svc/enginetest"
	"github.com/realm-go/realm/notify-svc/slackgate/slackstub"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// stack is an in-process engine on the real Redis, a Slack stub, and the
// notify-svc binary started as real processes against them.
type stack struct {
	t     *testing.T
	bin   string
	args  []string
	eng   realmv1.EngineServiceClient
	raw   *enginetest.Raw
	slack *slackstub.Stub
	mu    sync.Mutex
	procs []*exec.Cmd
	logs  []*bytes.Buffer
}

func newStack(t *testing.T) *stack {
	t.Helper()
	url := os.Getenv("REDIS_URL")
	if url == "" {
		t.Skip("REDIS_URL is not set: notify-svc processes need the Redis the engine stores runs in")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "notify-svc")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build notify-svc: %v\n%s", err, out)
	}
	addr, raw := enginetest.StartRaw(t, "redis", enginetest.Options{})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s := &stack{t: t, bin: bin, eng: realmv1.NewEngineServiceClient(conn), raw: raw, slack: slackstub.Start(t)}
	// The operator reminder 3s after the gate opens; the escalation far off.
	mf := filepath.Join(dir, "realm.yaml")
	if err := os.WriteFile(mf, []byte(`version: 1
secrets: { sources: [env] }
notifiers:
  slack_gate:
    type: slack
    config:
      bot_token: '${secret:NOTIFY_TEST_BOT_TOKEN}'
      channel_id: C0GATES
      reminder_interval_ms: 3000
      escalation_threshold_ms: 3600000
`), 0o600); err != nil {
		t.Fatal(err)
	}
	s.args = []string{"--manifest", mf, "--engine-addr", addr, "--redis-url", url, "--redis-prefix", raw.Prefix(),
		"--slack-api-url", s.slack.APIURL(), "--interval", "100ms", "--lease", "2s"}
	y, err := os.ReadFile("../../notifier/testdata/plain.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.eng.RegisterWorkflow(ctx(t), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: y, Path: "plain.yaml"}}); err != nil || !r.GetRegistered() {
		t.Fatalf("register: %v %v", err, r)
	}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, p := range s.procs {
			_ = p.Process.Kill()
			_ = p.Wait()
			if t.Failed() {
				t.Logf("notify-svc #%d log:\n%s", i, s.logs[i])
			}
		}
	})
	return s
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// start runs one notify-svc process and returns it.
func (s *stack) start() *exec.Cmd {
	s.t.Helper()
	cmd := exec.Command(s.bin, s.args...)
	cmd.Env = append(os.Environ(), "NOTIFY_TEST_BOT_TOKEN=xoxb-test")
	log := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	s.procs, s.logs = append(s.procs, cmd), append(s.logs, log)
	s.mu.Unlock()
	return cmd
}

func (s *stack) open() string {
	s.t.Helper()
	resp, err := s.eng.StartRun(ctx(s.t), &realmv1.StartRunRequest{WorkflowId: "plain"})
	if err != nil || resp.GetReply().GetGate().GetGateId() == "" {
		s.t.Fatalf("open: %v %v", err, resp.GetReply())
	}
	return resp.GetReply().GetRunId()
}

// posted is the finished record of a gate's message: notify-svc has
// posted it and kept its thread anchor.
func (s *stack) posted(run string) bool {
	recs, err := s.raw.Redis().HGetAll(ctx(s.t), s.raw.Prefix()+":{notify}:gates").Result()
	if err != nil {
		s.t.Fatal(err)
	}
	for key, raw := range recs {
		var rec struct {
			TS string `json:"ts"`
		}
		if strings.HasPrefix(key, run+"@") && json.Unmarshal([]byte(raw), &rec) == nil && rec.TS != "" {
			return true
		}
	}
	return false
}

// due reports whether a job of one of kinds is scheduled (or claimed) for
// run's gate.
func (s *stack) due(run string, kinds ...string) bool {
	jobs, err := s.raw.Redis().ZRange(ctx(s.t), s.raw.Prefix()+":{notify}:due", 0, -1).Result()
	if err != nil {
		s.t.Fatal(err)
	}
	for _, j := range jobs {
		for _, k := range kinds {
			if strings.HasPrefix(j, k+run+"@") {
				return true
			}
		}
	}
	return false
}

func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// count tallies gate messages by run and thread replies by anchor.
func (s *stack) count() (messages map[string]int, replies map[string]int, anchors map[string]string) {
	messages, replies, anchors = map[string]int{}, map[string]int{}, map[string]string{}
	for _, p := range s.slack.Posts() {
		if p.ThreadTS != "" {
			replies[p.ThreadTS]++
			continue
		}
		run := strings.Fields(p.Block[strings.Index(p.Block, "realm run respond "):])[3]
		messages[run]++
		anchors[run] = p.TS
	}
	return messages, replies, anchors
}

func TestAKilledNotifierNeitherLosesNorRepeatsAPost(t *testing.T) {
	s := newStack(t)
	first := s.start()
	run := s.open()
	waitFor(t, "the gate message was not posted", 10*time.Second, func() bool { return s.posted(run) })
	_, replies, _ := s.count()
	if len(replies) != 0 {
		t.Fatalf("a reminder before the kill: the test gave no window (%v)", s.slack.Posts())
	}
	if err := first.Process.Kill(); err != nil { // SIGKILL: no cleanup of any kind
		t.Fatal(err)
	}
	_ = first.Wait()
	s.start()
	waitFor(t, "no reminder after the restart", 15*time.Second, func() bool {
		_, replies, _ := s.count()
		return len(replies) > 0
	})
	time.Sleep(1500 * time.Millisecond) // more ticks: nothing may follow
	messages, replies, anchors := s.count()
	if messages[run] != 1 || replies[anchors[run]] != 1 || len(s.slack.Posts()) != 2 {
		t.Fatalf("posts after a kill between the message and its reminder = %+v", s.slack.Posts())
	}
	if want := "⏰ Reminder: gate `approve` is still waiting for a response."; s.slack.Posts()[1].Text != want {
		t.Errorf("reminder = %q", s.slack.Posts()[1].Text)
	}
}

func TestTwoNotifierProcessesPostEachGateOnce(t *testing.T) {
	s := newStack(t)
	s.start()
	s.start()
	var runs []string
	for range 4 {
		runs = append(runs, s.open())
	}
	waitFor(t, "not every gate's reminder was posted", 20*time.Second, func() bool {
		_, replies, _ := s.count()
		return len(replies) == len(runs)
	})
	time.Sleep(1500 * time.Millisecond)
	messages, replies, anchors := s.count()
	for _, run := range runs {
		if messages[run] != 1 || replies[anchors[run]] != 1 {
			t.Errorf("run %s: %d messages, %d reminders", run, messages[run], replies[anchors[run]])
		}
	}
	if len(s.slack.Posts()) != 2*len(runs) {
		t.Errorf("%d posts for %d gates: %v", len(s.slack.Posts()), len(runs), fmt.Sprint(s.slack.Posts()))
	}
}

// A notifier SIGKILLed after Slack took a post and before it finished the
// job (its answer held, so the kill lands in exactly that window): the
// next one finds the post in Slack, does not make it again, and goes on
// in its thread.
func TestANotifierKilledAfterSlackTookAPostDoesNotRepeatIt(t *testing.T) {
	cases := []struct {
		name string
		hold func(slackstub.Post) bool
	}{
		{"the gate message", func(p slackstub.Post) bool { return p.ThreadTS == "" }},
		{"the reminder", func(p slackstub.Post) bool { return p.ThreadTS != "" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStack(t)
			var held atomic.Bool
			s.slack.SetFate(func(p slackstub.Post) slackstub.Fate {
				if c.hold(p) && held.CompareAndSwap(false, true) {
					return slackstub.Hold
				}
				return slackstub.Answer
			})
			first := s.start()
			run := s.open()
			select {
			case <-s.slack.Held():
			case <-time.After(15 * time.Second):
				t.Fatalf("no post was held: %+v", s.slack.Posts())
			}
			if err := first.Process.Kill(); err != nil { // SIGKILL, its post taken and unanswered
				t.Fatal(err)
			}
			_ = first.Wait()
			s.start()
			waitFor(t, "the gate message and its reminder were not finished after the restart", 15*time.Second, func() bool {
				_, replies, anchors := s.count()
				return s.posted(run) && replies[anchors[run]] > 0 && !s.due(run, "open|", "remind|")
			})
			time.Sleep(1500 * time.Millisecond) // more ticks: nothing may follow
			messages, replies, anchors := s.count()
			if messages[run] != 1 || replies[anchors[run]] != 1 || len(s.slack.Posts()) != 2 {
				t.Fatalf("posts after a kill with %s taken and unanswered = %+v", c.name, s.slack.Posts())
			}
		})
	}
}
