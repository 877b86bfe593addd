package notifier

import (
	"context"
	"errors"
	"time"

	"github.com/realm-go/realm/notify-svc/slackgate"
	"github.com/realm-go/realm/pkg/errcode"
)

// findMargin is how far before a gate's opened_at its message is looked
// for: Slack's clock and the engine's may differ a little.
const findMargin = 5 * time.Minute

// reply posts text in the gate's thread. A re-claimed job (again) first
// reads the thread and, when sent finds its post there, does not post.
// A post Slack may have taken without saying so (no answer, a 5xx) is an
// error: the job is retried after its lease, and that claim looks first.
func (n *Notifier) reply(ctx context.Context, rec *record, text string, again bool, sent func([]string) bool, what string) error {
	if again {
		texts, err := n.o.Poster.Replies(ctx, rec.TS)
		switch {
		case n.unread(err):
		case err != nil:
			return err
		case sent(texts):
			n.o.Log.Info("notify: "+what+" was posted before its notifier stopped; not posted again", "run_id", rec.Run, "gate_id", rec.GateID)
			return nil
		}
	}
	err := n.o.Poster.Reply(ctx, rec.TS, text)
	if err != nil && !slackgate.Refused(err) {
		return err
	}
	if err != nil {
		n.warnPost(what, rec.Run, rec.GateID, err)
	}
	return nil
}

// unread reports whether err says the channel cannot be read back; said
// once, and the post is then made (at least once) rather than lost.
func (n *Notifier) unread(err error) bool {
	if !errors.Is(err, slackgate.ErrNoHistory) {
		return false
	}
	n.noHistory.Do(func() {
		n.o.Log.Warn("notify: the channel cannot be read back (add channels:history, and groups:history for a private channel, to the bot token's scopes); a post whose notifier stopped after Slack took it may be repeated",
			"code", CodeOf(err), "err", err)
	})
	return true
}

// warnPost is the original's rule: a post Slack refused is a warning,
// never the run's.
func (n *Notifier) warnPost(what, run, gate string, err error) {
	n.o.Log.Warn("notify: "+what+" could not be posted", "run_id", run, "gate_id", gate, "code", CodeOf(err), "err", err)
}

// CodeOf is err's catalogue code for a log line: its own, or the one
// engine-svc sent, else ENGINE_INTERNAL.
func CodeOf(err error) errcode.Code {
	if c := errcode.CodeOf(err); c != "" {
		return c
	}
	if e, ok := errcode.FromStatus(err); ok {
		return e.Code
	}
	return errcode.EngineInternal
}
