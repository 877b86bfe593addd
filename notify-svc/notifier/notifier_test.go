package notifier_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/realm-go/realm/engine-svc/enginetest"
	"github.com/realm-go/realm/notify-svc/notifier"
	"github.com/realm-go/realm/notify-svc/slackgate"
	"github.com/realm-go/realm/notify-svc/slackgate/slackstub"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// clock is the engine's and the notifiers' time: tests move it, never wait.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

type env struct {
	t     *testing.T
	clock *clock
	eng   realmv1.EngineServiceClient
	raw   *enginetest.Raw
	slack *slackstub.Stub
}

func setup(t *testing.T, backend string) *env {
	t.Helper()
	c := &clock{}
	addr, raw := enginetest.StartRaw(t, backend, enginetest.Options{Clock: c.Now})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	e := &env{t: t, clock: c, eng: realmv1.NewEngineServiceClient(conn), raw: raw, slack: slackstub.Start(t)}
	for _, wf := range []string{"review", "plain", "expiring"} {
		y, err := os.ReadFile("testdata/" + wf + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := e.eng.RegisterWorkflow(ctx(t), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: y, Path: wf + ".yaml"}})
		if err != nil || !resp.GetRegistered() {
			t.Fatalf("register %s: %v %s", wf, err, resp.GetReport().GetText())
		}
	}
	return e
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// notifier is one notify-svc replica posting with a bot token.
func (e *env) notifier(webhook bool) *notifier.Notifier {
	var p slackgate.Poster = slackgate.NewBot("xoxb-test", "C0GATES", e.slack.APIURL())
	if webhook {
		p = slackgate.Webhook{URL: e.slack.WebhookURL()}
	}
	return notifier.New(notifier.Options{
		Redis: e.raw.Redis(), EnginePrefix: e.raw.Prefix(), Engine: e.eng, Poster: p, Webhook: webhook,
		ReminderInterval: 10 * time.Minute, EscalationThreshold: 30 * time.Minute,
		Log: slog.New(slog.DiscardHandler), Now: e.clock.Now,
	})
}

func (e *env) tick(ns ...*notifier.Notifier) {
	e.t.Helper()
	for _, n := range ns {
		if err := n.Tick(ctx(e.t)); err != nil {
			e.t.Fatal(err)
		}
	}
}

// open starts a run of wf, which opens its gate at once.
func (e *env) open(wf string) (run, gate string) {
	e.t.Helper()
	resp, err := e.eng.StartRun(ctx(e.t), &realmv1.StartRunRequest{WorkflowId: wf})
	if err != nil {
		e.t.Fatal(err)
	}
	g := resp.GetReply().GetGate()
	if g.GetGateId() == "" {
		e.t.Fatalf("%s opened no gate: %v", wf, resp.GetReply())
	}
	return resp.GetReply().GetRunId(), g.GetGateId()
}

func (e *env) respond(run, gate, choice string) {
	e.t.Helper()
	resp, err := e.eng.SubmitHumanResponse(ctx(e.t), &realmv1.SubmitHumanResponseRequest{RunId: run, GateId: gate, Choice: choice})
	if err != nil || resp.GetReply().GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK {
		e.t.Fatalf("respond %s: %v %v", choice, err, resp.GetReply())
	}
}

// thread is the text of every post in the thread of ts.
func (e *env) thread(ts string) []string {
	var out []string
	for _, p := range e.slack.Posts() {
		if p.ThreadTS == ts {
			out = append(out, p.Text)
		}
	}
	return out
}

func (e *env) expectThread(ts string, want ...string) {
	e.t.Helper()
	if got := e.thread(ts); strings.Join(got, "\n|\n") != strings.Join(want, "\n|\n") {
		e.t.Fatalf("thread %s:\n%q\nwant\n%q", ts, got, want)
	}
}

func TestTheGateMessageIsLaidOutAsTheOriginalPostsIt(t *testing.T) {
	e := setup(t, "miniredis")
	n := e.notifier(false)
	run, gate := e.open("review")
	e.tick(n)
	e.tick(n) // a second look posts nothing more
	posts := e.slack.Posts()
	if len(posts) != 1 {
		t.Fatalf("posts = %v", posts)
	}
	want := fmt.Sprintf("*Gate:* `review`\n*Owner:* @oncall\n\nSend the refund reply to order 42?\n\n---\n"+
		"*Reply in this thread with `send` or `don't send` to resolve, or run:*\n"+
		"```realm run respond %[1]s --gate %[2]s --choice send\nrealm run respond %[1]s --gate %[2]s --choice 'don'\\''t send'```", run, gate)
	p := posts[0]
	if p.Block != want || p.Text != "⏸ Workflow gate waiting for approval" || p.Channel != "C0GATES" || p.ThreadTS != "" || p.Auth != "Bearer xoxb-test" {
		t.Errorf("gate message = %+v\nblock want:\n%s", p, want)
	}
}

func TestAuthoredRemindersEndInTheFinalWordingAndOneEscalationFollows(t *testing.T) {
	e := setup(t, "miniredis")
	n := e.notifier(false)
	run, gate := e.open("review")
	e.tick(n)
	ts := e.slack.Posts()[0].TS
	e.clock.Advance(4 * time.Minute)
	e.tick(n)
	e.expectThread(ts, "⏰ Reminder: gate `review` is still waiting for a response.")
	e.clock.Advance(4 * time.Minute)
	e.tick(n)
	// The third lands at 12m, after the 10m expiry: the final wording,
	// finding-only (the gate declares no on_expiry), and the last.
	e.clock.Advance(4 * time.Minute)
	e.tick(n)
	e.clock.Advance(4 * time.Minute)
	e.tick(n)
	reminder := "⏰ Reminder: gate `review` is still waiting for a response."
	final := "⏰ gate `review` expired 2m ago — finding-only (no on_expiry declared, nothing will be enacted); still waiting for a response."
	e.expectThread(ts, reminder, reminder, final)
	e.clock.Advance(14 * time.Minute) // 30m open
	e.tick(n)
	e.tick(n)
	escalation := "@oncall — gate `review` has been open for 30 minutes. Please respond."
	e.expectThread(ts, reminder, reminder, final, escalation)

	// The answer made the guard end the run: the choice, then the ending.
	e.respond(run, gate, "don't send")
	e.tick(n)
	e.tick(n)
	e.expectThread(ts, reminder, reminder, final, escalation,
		"Gate resolved: `don't send`.\nGuard step 'after' aborted the run.\nReason: The reply was not sent.")
}

func TestTheOperatorReminderTheResolutionMessageAndTheDefault(t *testing.T) {
	e := setup(t, "miniredis")
	n := e.notifier(false)
	review, reviewGate := e.open("review")
	plain, plainGate := e.open("plain")
	e.tick(n)
	anchor := map[string]string{}
	for _, p := range e.slack.Posts() {
		if strings.Contains(p.Block, review) {
			anchor[review] = p.TS
		} else if strings.Contains(p.Block, plain) {
			anchor[plain] = p.TS
		}
	}
	e.respond(review, reviewGate, "send")
	e.clock.Advance(10 * time.Minute)
	e.tick(n)
	// The answer's resolution_messages entry, and nothing after it.
	e.expectThread(anchor[review], "📨 Sending the reply.")
	// No reminder_seconds: the operator's one reminder at reminder_interval_ms.
	reminder := "⏰ Reminder: gate `approve` is still waiting for a response."
	e.expectThread(anchor[plain], reminder)
	e.clock.Advance(20 * time.Minute)
	e.tick(n)
	e.expectThread(anchor[plain], reminder, "gate `approve` has been open for 30 minutes. Please respond.")
	e.respond(plain, plainGate, "approve")
	e.tick(n)
	e.expectThread(anchor[plain], reminder, "gate `approve` has been open for 30 minutes. Please respond.", "✅ Gate resolved: `approve` — run continuing.")
	e.expectThread(anchor[review], "📨 Sending the reply.")
}

func TestAnIncomingWebhookGetsTheTerminalHeadingAndNoTimers(t *testing.T) {
	e := setup(t, "miniredis")
	n := e.notifier(true)
	run, gate := e.open("plain")
	e.tick(n)
	e.clock.Advance(time.Hour)
	e.tick(n)
	e.respond(run, gate, "reject")
	e.tick(n)
	posts := e.slack.Posts()
	want := fmt.Sprintf("*Gate:* `approve`\n\n_(no preview)_\n\n---\n*Gate requires a terminal response — open a terminal and run:*\n"+
		"```realm run respond %[1]s --gate %[2]s --choice approve\nrealm run respond %[1]s --gate %[2]s --choice reject```", run, gate)
	if len(posts) != 1 || posts[0].Block != want || posts[0].Text != "⏸ Workflow gate waiting for approval" {
		t.Fatalf("webhook posts = %+v\nwant block:\n%s", posts, want)
	}
}

func TestTwoReplicasPostEachGateAndEachReminderOnce(t *testing.T) {
	// On the Cluster the outbox spans every slot and the notifier's own
	// keys share one.
	for _, backend := range append(enginetest.Backends, "cluster") {
		t.Run(backend, func(t *testing.T) {
			if backend == "redis" && os.Getenv("REDIS_URL") == "" {
				t.Skip("REDIS_URL is not set")
			}
			if backend == "cluster" && os.Getenv("REDIS_CLUSTER_ADDRS") == "" {
				t.Skip("REDIS_CLUSTER_ADDRS is not set")
			}
			e := setup(t, backend)
			a, b := e.notifier(false), e.notifier(false)
			for range 5 {
				e.open("plain")
			}
			e.tick(a, b, a, b)
			if got := len(e.slack.Posts()); got != 5 {
				t.Fatalf("%d gate messages for 5 gates", got)
			}
			e.clock.Advance(10 * time.Minute)
			e.tick(b, a, b, a)
			if got := len(e.slack.Posts()); got != 10 {
				t.Fatalf("%d posts for 5 gate messages and 5 reminders", got)
			}
		})
	}
}

// A gate whose authored timeout comes before the operator's reminder and
// escalation gets the dead-notification advisory once (agent-driver
// §14.3); one whose timeout leaves room for both gets none.
func TestADeadNotificationIsSaidOnceWhenTheTimeoutComesFirst(t *testing.T) {
	e := setup(t, "miniredis")
	var logs syncBuffer
	n := notifier.New(notifier.Options{
		Redis: e.raw.Redis(), EnginePrefix: e.raw.Prefix(), Engine: e.eng, Poster: slackgate.NewBot("xoxb-test", "C0GATES", e.slack.APIURL()),
		ReminderInterval: 10 * time.Minute, EscalationThreshold: 30 * time.Minute,
		Log: slog.New(slog.NewTextHandler(&logs, nil)), Now: e.clock.Now,
	})
	e.open("expiring")
	e.open("plain")
	e.tick(n)
	e.tick(n)
	want := "⚠ dead notification: gate `approve` times out 1m0s after it opened, before the reminder (after 10m0s) and the escalation (after 30m0s) can be posted; declare reminder_seconds below its timeout_seconds to remind in Slack."
	if got := strings.Count(logs.String(), "dead notification"); got != 1 || !strings.Contains(logs.String(), strconv.Quote(want)) {
		t.Fatalf("advisories = %d, want 1:\n%s", got, logs.String())
	}
}
