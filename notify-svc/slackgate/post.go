package slackgate

import (
	"context"
	"fmt"

	"github.com/slack-go/slack"
)

// Poster posts to one Slack channel.
type Poster interface {
	// PostGate posts the gate message and returns its ts, the thread
	// anchor ("" when the transport gives none: an incoming webhook).
	PostGate(ctx context.Context, g Gate) (ts string, err error)
	// Reply posts text in the thread of ts.
	Reply(ctx context.Context, ts, text string) error
}

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
		return "", fmt.Errorf("chat.postMessage: %w", err)
	}
	return ts, nil
}

func (b *Bot) Reply(ctx context.Context, ts, text string) error {
	if _, _, err := b.client.PostMessageContext(ctx, b.channel, slack.MsgOptionText(text, false), slack.MsgOptionTS(ts)); err != nil {
		return fmt.Errorf("chat.postMessage: %w", err)
	}
	return nil
}

// Webhook posts one way to an incoming webhook: no thread, so no
// reminders and no replies.
type Webhook struct{ URL string }

func (w Webhook) PostGate(ctx context.Context, g Gate) (string, error) {
	msg := &slack.WebhookMessage{Text: Text, Blocks: &slack.Blocks{BlockSet: []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, Block(g, true), false, false), nil, nil),
	}}}
	if err := slack.PostWebhookContext(ctx, w.URL, msg); err != nil {
		return "", fmt.Errorf("incoming webhook: %w", err)
	}
	return "", nil
}

func (w Webhook) Reply(context.Context, string, string) error {
	return fmt.Errorf("an incoming webhook has no thread to reply in")
}
