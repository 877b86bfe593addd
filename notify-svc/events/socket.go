package events

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

// SocketOptions configure SocketMode.
type SocketOptions struct {
	AppToken, BotToken string
	// APIURL is the Web API's base URL ending in "/" ("" for Slack's).
	APIURL string
	// Seen and OnMessage are as in Options; Seen gets the envelope id.
	Seen      func(ctx context.Context, id string) (bool, error)
	OnMessage func(ctx context.Context, m Message)
	Log       *slog.Logger
}

// SocketMode reads replies over Slack's Socket Mode until ctx ends:
// apps.connections.open with the app token, then the WebSocket; every
// events_api envelope is acknowledged at once, deduplicated by its
// envelope id, and its thread messages handed on. A failed open or an
// unexpected close reconnects after 1 s, doubling to 30 s (a `disconnect`
// from Slack reconnects at once, inside the client).
func SocketMode(ctx context.Context, o SocketOptions) {
	opts := []slack.Option{slack.OptionAppLevelToken(o.AppToken)}
	if o.APIURL != "" {
		opts = append(opts, slack.OptionAPIURL(o.APIURL))
	}
	api := slack.New(o.BotToken, opts...)
	backoff := time.Second
	for ctx.Err() == nil {
		client := socketmode.New(api)
		runCtx, cancel := context.WithCancel(ctx)
		var connected atomic.Bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			o.consume(runCtx, client, &connected)
		}()
		err := client.RunContext(runCtx)
		cancel()
		<-done
		if ctx.Err() != nil {
			return
		}
		if connected.Load() {
			backoff = time.Second
		}
		o.Log.Warn("notify: Socket Mode connection lost; reconnecting", "after", backoff, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func (o SocketOptions) consume(ctx context.Context, client *socketmode.Client, connected *atomic.Bool) {
	for {
		var evt socketmode.Event
		select {
		case <-ctx.Done():
			return
		case evt = <-client.Events:
		}
		switch evt.Type {
		case socketmode.EventTypeHello:
			connected.Store(true)
			o.Log.Info("  ℹ  Socket Mode connected.")
		case socketmode.EventTypeConnectionError, socketmode.EventTypeInvalidAuth:
			o.Log.Warn("notify: Socket Mode could not connect; the client retries", "event", evt.Type, "detail", evt.Data)
		case socketmode.EventTypeEventsAPI:
			if evt.Request == nil {
				continue
			}
			if err := client.Ack(*evt.Request); err != nil {
				o.Log.Warn("notify: a Socket Mode envelope could not be acknowledged", "err", err)
			}
			if seen, err := o.Seen(ctx, "envelope:"+evt.Request.EnvelopeID); err != nil || seen {
				continue
			}
			api, ok := evt.Data.(slackevents.EventsAPIEvent)
			if !ok {
				continue
			}
			e, ok := api.InnerEvent.Data.(*slackevents.MessageEvent)
			if !ok || e.BotID != "" || e.SubType == "bot_message" || e.ThreadTimeStamp == "" || e.User == "" || e.TimeStamp == "" {
				continue
			}
			o.OnMessage(ctx, Message{ThreadTS: e.ThreadTimeStamp, User: e.User, Text: e.Text, TS: e.TimeStamp})
		}
	}
}
