package notifier_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/realm-go/realm/notify-svc/events"
	"github.com/realm-go/realm/notify-svc/notifier"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// say sends a person's message in a thread through the Events API handler,
// signed as Slack signs it.
func (e *env) say(n *notifier.Notifier, id, threadTS, text string) {
	e.t.Helper()
	h := events.Handler(events.Options{SigningSecret: "shh", Seen: n.SeenEvent,
		OnMessage: func(ctx2 context.Context, m events.Message) {
			if err := n.Reply(ctx2, m.ThreadTS, m.Text); err != nil {
				e.t.Errorf("reply %q: %v", m.Text, err)
			}
		}})
	body := `{"type":"event_callback","event_id":"` + id + `","event":{"type":"message","thread_ts":"` + threadTS + `","user":"U1","text":"` + text + `","ts":"9.9"}}`
	stamp := strconv.FormatInt(time.Now().Unix(), 10)
	r := httptest.NewRequest(http.MethodPost, "/slack/events", strings.NewReader(body))
	r.Header.Set("X-Slack-Request-Timestamp", stamp)
	r.Header.Set("X-Slack-Signature", events.Sign("shh", stamp, []byte(body)))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		e.t.Fatalf("event %s: %d %s", id, w.Code, w.Body.String())
	}
}

func TestAReplyInTheThreadAnswersTheGate(t *testing.T) {
	e := setup(t, "miniredis")
	n := e.notifier(false)
	run, _ := e.open("plain")
	e.tick(n)
	ts := e.slack.Posts()[0].TS
	nudge := "Please reply with one of: approve, reject"
	for i, text := range []string{"yes please", "ok", "maybe"} {
		e.say(n, "Ev"+strconv.Itoa(i), ts, text)
	}
	e.say(n, "Ev0", ts, "yes please") // Slack's retry of an event: dropped
	e.expectThread(ts, nudge, nudge)
	e.say(n, "Ev9", ts, "  Approve ")
	s, err := e.eng.GetRunState(ctx(t), &realmv1.GetRunStateRequest{RunId: run})
	if err != nil || s.GetState().GetPendingGate() != nil {
		t.Fatalf("the gate after a reply: %v %v", err, s.GetState())
	}
	e.tick(n)
	e.expectThread(ts, nudge, nudge, "✅ Gate resolved: `approve` — run continuing.")
}

func TestALateReplyGetsTheEnginesLateAnswerLines(t *testing.T) {
	e := setup(t, "miniredis")
	n := e.notifier(false)
	_, gate := e.open("expiring")
	e.tick(n)
	ts := e.slack.Posts()[0].TS
	e.clock.Advance(2 * time.Minute) // past its 60s: expired, settle_default 'hold'
	e.say(n, "Ev1", ts, "ship")
	got := e.thread(ts)
	want := "Gate '" + gate + "' was settled by timeout with choice 'hold' — your choice 'ship' was not recorded."
	if len(got) != 1 || got[0] != want {
		t.Fatalf("late reply: %q\nwant %q", got, want)
	}
}

func TestAReplyTheEngineRefusesIsSaidOnceAndTheGateWaitsOn(t *testing.T) {
	e := setup(t, "miniredis")
	n := e.notifier(false)
	run, gate := e.open("plain")
	e.tick(n)
	ts := e.slack.Posts()[0].TS
	e.respond(run, gate, "reject") // another door answered first; no tick since
	e.say(n, "Ev1", ts, "approve")
	want := "⚠️ Couldn't record your response (`Gate '" + gate + "' was already resolved with choice 'reject' — your choice 'approve' was not recorded.`). Try again, or use the terminal command shown above."
	e.expectThread(ts, want)
}
