package slackgate

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
)

// Poster posts to one Slack channel, and reads back its own posts there:
// a job re-claimed after its claimer died may find its post already made
// (Slack's chat.postMessage takes no idempotency key).
type Poster interface {
	// PostGate posts the gate message and returns its ts, the thread
	// anchor ("" when the transport gives none: an incoming webhook).
	PostGate(ctx context.Context, g Gate) (ts string, err error)
	// Reply posts text in the thread of ts.
	Reply(ctx context.Context, ts, text string) error
	// FindGate returns the ts of g's gate message posted by this poster
	// at or after since ("" when there is none). ErrNoHistory when the
	// channel cannot be read.
	FindGate(ctx context.Context, g Gate, since time.Time) (ts string, err error)
	// Replies returns the texts of this poster's own replies in the
	// thread of ts, oldest first. ErrNoHistory when it cannot be read.
	Replies(ctx context.Context, ts string) ([]string, error)
}

// ErrNoHistory is the channel that cannot be read back (an incoming webhook, or
// a bot token without channels:history / groups:history).
var ErrNoHistory = errors.New("the channel's history cannot be read")

// maxPages bounds one read back: a gate's thread, or a channel since a
// gate opened, fits in far fewer pages of 200.
const maxPages = 25

// Bot posts with a bot token (chat.postMessage).
type Bot struct {
	client  *slack.Client
	channel string
}

// NewBot returns a poster on channel. apiURL is the Web API's base URL
// ending in "/" ("" for https://slack.com/api/).
func NewBot(token, channel, apiURL string) *Bot {
	var opts []slack.Option
	if apiURL != "" {
		opts = append(opts, slack.OptionAPIURL(apiURL))
	}
	return &Bot{client: slack.New(token, opts...), channel: channel}
}

func block(text string) slack.MsgOption {
	return slack.MsgOptionBlocks(slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, text, false, false), nil, nil))
}

func (b *Bot) PostGate(ctx context.Context, g Gate) (string, error) {
	_, ts, err := b.client.PostMessageContext(ctx, b.channel, slack.MsgOptionText(Text, false), block(Block(g, false)))
	if err != nil {
		return "", apiErr("chat.postMessage", err)
	}
	return ts, nil
}

func (b *Bot) Reply(ctx context.Context, ts, text string) error {
	if _, _, err := b.client.PostMessageContext(ctx, b.channel, slack.MsgOptionText(text, false), slack.MsgOptionTS(ts)); err != nil {
		return apiErr("chat.postMessage", err)
	}
	return nil
}

// FindGate reads the channel's history since since, newest first, for a
// message of a bot whose block names g's run and gate (Identity).
func (b *Bot) FindGate(ctx context.Context, g Gate, since time.Time) (string, error) {
	id := Identity(g)
	p := &slack.GetConversationHistoryParameters{ChannelID: b.channel, Oldest: slackTS(since), Inclusive: true, Limit: 200}
	for range maxPages {
		resp, err := b.client.GetConversationHistoryContext(ctx, p)
		if err != nil {
			return "", readErr("conversations.history", err)
		}
		for _, m := range resp.Messages {
			if m.BotID != "" && strings.Contains(sectionText(m), id) {
				return m.Timestamp, nil
			}
		}
		if !resp.HasMore || resp.ResponseMetaData.NextCursor == "" {
			break
		}
		p.Cursor = resp.ResponseMetaData.NextCursor
	}
	return "", nil
}

// Replies reads the thread of ts (conversations.replies) for the replies
// a bot made in it.
func (b *Bot) Replies(ctx context.Context, ts string) ([]string, error) {
	var out []string
	p := &slack.GetConversationRepliesParameters{ChannelID: b.channel, Timestamp: ts, Limit: 200}
	for range maxPages {
		msgs, more, cursor, err := b.client.GetConversationRepliesContext(ctx, p)
		if err != nil {
			return nil, readErr("conversations.replies", err)
		}
		for _, m := range msgs {
			if m.Timestamp != ts && m.BotID != "" {
				out = append(out, m.Text)
			}
		}
		if !more || cursor == "" {
			break
		}
		p.Cursor = cursor
	}
	return out, nil
}

// Identity is what only g's gate message holds: its run and gate ids, as
// the respond command names them.
func Identity(g Gate) string {
	return "realm run respond " + g.RunID + " --gate " + g.GateID + " "
}

func sectionText(m slack.Message) string {
	var b strings.Builder
	for _, blk := range m.Blocks.BlockSet {
		if s, ok := blk.(*slack.SectionBlock); ok && s.Text != nil {
			b.WriteString(s.Text.Text)
		}
	}
	return b.String()
}

// slackTS is t as a Slack ts ("<seconds>.<microseconds>").
func slackTS(t time.Time) string {
	us := t.UnixMicro()
	return strconv.FormatInt(us/1e6, 10) + "." + strconv.FormatInt(1e6+us%1e6, 10)[1:]
}

// Webhook posts one way to an incoming webhook: no thread, so no
// reminders and no replies, and nothing to read back.
type Webhook struct{ URL string }

func (w Webhook) PostGate(ctx context.Context, g Gate) (string, error) {
	msg := &slack.WebhookMessage{Text: Text, Blocks: &slack.Blocks{BlockSet: []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, Block(g, true), false, false), nil, nil),
	}}}
	if err := slack.PostWebhookContext(ctx, w.URL, msg); err != nil {
		return "", apiErr("incoming webhook", err)
	}
	return "", nil
}

func (w Webhook) Reply(context.Context, string, string) error {
	return errors.New("an incoming webhook has no thread to reply in")
}

func (w Webhook) FindGate(context.Context, Gate, time.Time) (string, error) {
	return "", ErrNoHistory
}

func (w Webhook) Replies(context.Context, string) ([]string, error) { return nil, ErrNoHistory }
