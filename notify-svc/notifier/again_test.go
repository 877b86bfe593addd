package notifier_test

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/realm-go/realm/notify-svc/notifier"
	"github.com/realm-go/realm/notify-svc/slackgate"
	"github.com/realm-go/realm/notify-svc/slackgate/slackstub"
)

// lease is past the notifiers' default lease: a job left claimed is due
// again.
const lease = 31 * time.Second

// fateNth gives the nth chat.postMessage (0: the first) its fate: Drop
// records it and closes the connection unanswered, as if the notifier was
// killed between Slack's taking the post and the finish of its job;
// Unavailable refuses it with a 503, keeping nothing.
func fateNth(s *slackstub.Stub, nth int, f slackstub.Fate) {
	var seen atomic.Int64
	s.SetFate(func(slackstub.Post) slackstub.Fate {
		if int(seen.Add(1))-1 == nth {
			return f
		}
		return slackstub.Answer
	})
}

// reads are the stub's conversations.* calls.
func reads(s *slackstub.Stub) []string {
	var out []string
	for _, c := range s.Calls() {
		if strings.HasPrefix(c, "conversations.") {
			out = append(out, c)
		}
	}
	return out
}

// reviewFlow runs a review gate through its three reminders, the
// escalation and the answer, ticking once more a lease after every step
// (where a job left claimed runs again), and returns the gate messages
// and the thread.
func (e *env) reviewFlow(n *notifier.Notifier) (messages []slackstub.Post, thread []string) {
	run, gate := e.open("review")
	step := func(d time.Duration) {
		e.clock.Advance(d)
		e.tick(n)
		e.clock.Advance(lease)
		e.tick(n)
	}
	step(0)
	step(4 * time.Minute)
	step(4 * time.Minute)
	step(4 * time.Minute)
	step(17 * time.Minute) // past 30m open: the escalation
	e.respond(run, gate, "don't send")
	step(0)
	for _, p := range e.slack.Posts() {
		if p.ThreadTS == "" {
			messages = append(messages, p)
		}
	}
	if len(messages) > 0 {
		thread = e.thread(messages[len(messages)-1].TS)
	}
	return messages, thread
}

// A notifier that stopped after Slack took a post and before it finished
// the job leaves the job to be claimed again; that claim finds the post in
// Slack and does not make it twice: the gate message's thread is adopted,
// a reply already in the thread is not repeated (a reminder counted among
// reminders of the same words). A post Slack never took is made on the
// re-claim (never lost). A first claim reads nothing.
func TestAReclaimedJobFindsThePostSlackTookAndDoesNotRepeatIt(t *testing.T) {
	var want []string
	history, replies := []string{"conversations.history"}, []string{"conversations.replies"}
	cases := []struct {
		name  string
		nth   int // the post given fate (-1: none)
		fate  slackstub.Fate
		reads []string
	}{
		{"a first claim reads nothing back", -1, slackstub.Answer, nil},
		{"the gate message is adopted", 0, slackstub.Drop, history},
		{"the first reminder is not repeated", 1, slackstub.Drop, replies},
		{"the second reminder, in the first one's words, is not repeated", 2, slackstub.Drop, replies},
		{"the final reminder is not repeated", 3, slackstub.Drop, replies},
		{"the escalation is not repeated", 4, slackstub.Drop, replies},
		{"the resolution is not repeated", 5, slackstub.Drop, replies},
		{"a gate message Slack never took is posted", 0, slackstub.Unavailable, history},
		{"a second reminder Slack never took is posted", 2, slackstub.Unavailable, replies},
		{"an escalation Slack never took is posted", 4, slackstub.Unavailable, replies},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t, "miniredis")
			e.slack.SetClock(e.clock.Now)
			fateNth(e.slack, c.nth, c.fate)
			messages, thread := e.reviewFlow(e.notifier(false))
			if len(messages) != 1 || len(e.slack.Posts()) != 6 {
				t.Fatalf("%d gate messages, %d posts: %+v", len(messages), len(e.slack.Posts()), e.slack.Posts())
			}
			if c.nth < 0 {
				want = thread
				if len(want) != 5 || !slackgate.IsEscalation("review", want[3]) || !strings.HasPrefix(want[4], "Gate resolved") {
					t.Fatalf("the flow's thread = %q", want)
				}
			} else if strings.Join(thread, "\n|\n") != strings.Join(want, "\n|\n") {
				t.Errorf("thread = %q\nwant %q", thread, want)
			}
			if got := reads(e.slack); strings.Join(got, ",") != strings.Join(c.reads, ",") {
				t.Errorf("reads = %v, want %v", got, c.reads)
			}
		})
	}
}

// A bot token without channels:history cannot look: the re-claimed post
// is made again (at least once, never lost), and that is said once.
func TestWithoutTheHistoryScopeAReclaimedPostIsMadeAgainAndSaidOnce(t *testing.T) {
	e := setup(t, "miniredis")
	e.slack.SetClock(e.clock.Now)
	e.slack.DenyReads("missing_scope")
	fateNth(e.slack, 0, slackstub.Drop)
	var logs syncBuffer
	n := notifier.New(notifier.Options{
		Redis: e.raw.Redis(), EnginePrefix: e.raw.Prefix(), Engine: e.eng, Poster: slackgate.NewBot("xoxb-test", "C0GATES", e.slack.APIURL()),
		ReminderInterval: 10 * time.Minute, EscalationThreshold: 30 * time.Minute,
		Log: slog.New(slog.NewTextHandler(&logs, nil)), Now: e.clock.Now,
	})
	e.open("plain")
	e.tick(n)
	e.clock.Advance(lease)
	e.tick(n)
	posts := e.slack.Posts()
	if len(posts) != 2 || posts[1].ThreadTS != "" {
		t.Fatalf("posts = %+v", posts)
	}
	fateNth(e.slack, 0, slackstub.Drop) // the reminder
	e.clock.Advance(10 * time.Minute)
	e.tick(n)
	e.clock.Advance(lease)
	e.tick(n)
	e.expectThread(posts[1].TS, "⏰ Reminder: gate `approve` is still waiting for a response.", "⏰ Reminder: gate `approve` is still waiting for a response.")
	if got := strings.Count(logs.String(), "the channel cannot be read back"); got != 1 || !strings.Contains(logs.String(), "code=SERVICE_AUTH_FAILED") {
		t.Errorf("warnings = %d, want 1:\n%s", got, logs.String())
	}
}

// A post Slack refuses outright is the original's warning, now with its
// code, and is not tried again (a retry would change nothing).
func TestAPostSlackRefusesIsAWarningWithItsCodeAndNotRetried(t *testing.T) {
	e := setup(t, "miniredis")
	fateNth(e.slack, 0, slackstub.Refuse)
	var logs syncBuffer
	n := notifier.New(notifier.Options{
		Redis: e.raw.Redis(), EnginePrefix: e.raw.Prefix(), Engine: e.eng, Poster: slackgate.NewBot("xoxb-test", "C0GATES", e.slack.APIURL()),
		ReminderInterval: 10 * time.Minute, EscalationThreshold: 30 * time.Minute,
		Log: slog.New(slog.NewTextHandler(&logs, nil)), Now: e.clock.Now,
	})
	e.open("plain")
	e.tick(n)
	e.clock.Advance(lease)
	e.tick(n)
	if calls := e.slack.Calls(); len(calls) != 1 || len(e.slack.Posts()) != 0 {
		t.Errorf("calls %v, posts %v: want the one refused post", calls, e.slack.Posts())
	}
	line := `msg="notify: the gate message could not be posted"`
	if !strings.Contains(logs.String(), line) || !strings.Contains(logs.String(), "code=SERVICE_HTTP_4XX") {
		t.Errorf("log lacks %s with code=SERVICE_HTTP_4XX:\n%s", line, logs.String())
	}
}
