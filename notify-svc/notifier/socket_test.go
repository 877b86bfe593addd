package notifier_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/realm-go/realm/notify-svc/events"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAReplyOverSocketModeAnswersTheGate(t *testing.T) {
	e := setup(t, "miniredis")
	n := e.notifier(false)
	logs := &syncBuffer{}
	sctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		events.SocketMode(sctx, events.SocketOptions{AppToken: "xapp-test", BotToken: "xoxb-test", APIURL: e.slack.APIURL(),
			Seen: n.SeenEvent, Log: slog.New(slog.NewTextHandler(logs, nil)),
			OnMessage: func(ctx context.Context, m events.Message) {
				if err := n.Reply(ctx, m.ThreadTS, m.Text); err != nil {
					t.Errorf("reply: %v", err)
				}
			}})
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
		if t.Failed() {
			t.Logf("Socket Mode log:\n%s", logs.String())
		}
	})
	if tok := e.slack.Connected(t); tok != "xapp-test" {
		t.Errorf("apps.connections.open with %q, want the app token", tok)
	}
	waitUntil(t, "the connected line", func() bool { return strings.Contains(logs.String(), "  ℹ  Socket Mode connected.") })

	run, _ := e.open("plain")
	e.tick(n)
	ts := e.slack.Posts()[0].TS
	e.slack.SendMessage(t, "E1", ts, "UBOT", "approve", "B1") // a bot's: ignored
	e.slack.SendMessage(t, "E2", ts, "U1", "Reject ", "")
	e.slack.SendMessage(t, "E2", ts, "U1", "Reject ", "") // the same envelope again
	waitUntil(t, "every envelope acknowledged", func() bool { return len(e.slack.Acks()) == 3 })
	if acks := e.slack.Acks(); !slices.Equal(acks, []string{"E1", "E2", "E2"}) {
		t.Errorf("acks = %v", acks)
	}
	waitUntil(t, "the gate answered", func() bool {
		s, err := e.eng.GetRunState(ctx(t), &realmv1.GetRunStateRequest{RunId: run})
		return err == nil && s.GetState().GetPendingGate() == nil
	})
	e.tick(n)
	e.expectThread(ts, "✅ Gate resolved: `reject` — run continuing.")
}
