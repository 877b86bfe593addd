// Command notify-svc tells people in Slack about every gate the engine
// opens (agent-driver §14.3): the gate message, reminders, one escalation
// and how the gate ended. It reads the gate outbox engine-svc keeps in its
// Redis, asks engine-svc over gRPC what each gate is, and keeps its own
// timers in the same Redis, so replicas share the work and a restart
// loses and repeats nothing.
//
//	notify-svc --manifest realm.yaml [--engine-addr 127.0.0.1:7070]
//	           [--redis-url redis://… | --redis-cluster-addrs a,b,c | --redis-sentinel-addrs …]
//	           [--redis-prefix realm] [--slack-api-url URL] [--interval 1s] [--lease 30s]
//
// The Slack settings are the manifest's notifiers.slack_gate (secrets
// resolved from its secrets sources); SLACK_* variables have no effect.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/realm-go/realm/notify-svc/events"
	"github.com/realm-go/realm/notify-svc/notifier"
	"github.com/realm-go/realm/notify-svc/slackgate"
	"github.com/realm-go/realm/pkg/client"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/manifest"
	"github.com/realm-go/realm/pkg/metrics"
	"github.com/realm-go/realm/pkg/mtls"
	"github.com/realm-go/realm/pkg/redisconn"
)

type flags struct {
	manifest, engineAddr, prefix, apiURL string
	eventsHost, metricsAddr              string
	interval, lease                      time.Duration
	redis                                redisconn.Flags
	tls                                  mtls.Files
}

func main() {
	f, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		os.Exit(2)
	}
	if err := run(f); err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
		os.Exit(1)
	}
}

func parseFlags(args []string, out io.Writer) (flags, error) {
	v := flags{engineAddr: client.EngineAddr(), prefix: "realm", interval: time.Second, lease: 30 * time.Second}
	fs := flag.NewFlagSet("notify-svc", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&v.manifest, "manifest", os.Getenv("REALM_MANIFEST"), "the deployment manifest (realm.yaml) whose notifiers.slack_gate configures Slack (env REALM_MANIFEST)")
	fs.StringVar(&v.engineAddr, "engine-addr", v.engineAddr, "engine-svc's gRPC address (env "+client.EngineAddrEnv+")")
	fs.StringVar(&v.prefix, "redis-prefix", v.prefix, "engine-svc's --redis-prefix: where its gate outbox is read and this service's keys are kept")
	fs.StringVar(&v.apiURL, "slack-api-url", "", "base `url` of the Slack Web API, ending in / (default https://slack.com/api/)")
	fs.StringVar(&v.eventsHost, "events-host", "0.0.0.0", "host the Events API listener binds (its port is the manifest's events_port)")
	fs.StringVar(&v.metricsAddr, "metrics-addr", os.Getenv("REALM_METRICS_LISTEN"), "serve Prometheus /metrics, /healthz and /readyz (Redis answers) on this address (empty: off) (env REALM_METRICS_LISTEN)")
	fs.DurationVar(&v.interval, "interval", v.interval, "how often the gate outbox is read and due posts are made")
	fs.DurationVar(&v.lease, "lease", v.lease, "how long a claimed post is this replica's; a killed replica's post is made by another after it")
	v.redis.Register(fs, os.Getenv, "the Redis engine-svc stores runs in")
	v.tls.RegisterFlags(fs, false, nil)
	if err := fs.Parse(args); err != nil {
		return v, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected argument '%s'", fs.Arg(0))
		fmt.Fprintln(out, err)
		return v, err
	}
	return v, nil
}

// poster builds the Slack transport the config names.
func poster(g *manifest.SlackGate, apiURL string) (slackgate.Poster, bool, error) {
	switch {
	case g.AppToken != "" && g.ChannelID == "":
		return nil, false, errors.New("notifiers.slack_gate: 'app_token' (Socket Mode) needs 'channel_id' — replies are read in the threads of the bot's gate messages.")
	case g.SigningSecret != "" && (g.BotToken == "" || g.ChannelID == ""):
		return nil, false, errors.New("notifiers.slack_gate: 'signing_secret' (Events API) needs 'bot_token' and 'channel_id' — replies are read in the threads of the bot's gate messages.")
	case g.BotToken != "" && g.ChannelID != "":
		return slackgate.NewBot(g.BotToken, g.ChannelID, apiURL), false, nil
	case g.WebhookURL != "":
		return slackgate.Webhook{URL: g.WebhookURL}, true, nil
	case g.BotToken != "":
		return nil, false, errors.New("notifiers.slack_gate: 'bot_token' without 'channel_id' — notify-svc has no channel to post gates in. Add channel_id.")
	}
	return nil, false, errors.New("notifiers.slack_gate: nothing to post with — set bot_token and channel_id, or webhook_url.")
}

// refused is a start refused for want of configuration.
func refused(err error) error {
	if errcode.CodeOf(err) != "" {
		return err
	}
	return errcode.Wrap(errcode.EngineConfigInvalid, err, err.Error())
}

// errorLine is how a refusal to start is printed: the message, then its
// catalogue code.
func errorLine(err error) string {
	line := "Error: " + err.Error()
	if c := errcode.CodeOf(err); c != "" {
		line += " [" + string(c) + "]"
	}
	return line
}

// run serves until a signal; what stops it from starting is returned
// with a catalogue code.
func run(f flags) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if f.manifest == "" {
		return refused(errors.New("--manifest is required: notify-svc reads notifiers.slack_gate from the deployment manifest (realm.yaml)"))
	}
	m, err := manifest.Load(f.manifest)
	if err != nil {
		return refused(err)
	}
	secrets, err := m.Secrets(os.LookupEnv)
	if err != nil {
		return refused(err)
	}
	g, err := m.SlackGate(secrets)
	if err != nil {
		return refused(err)
	}
	if g == nil {
		return refused(m.Errorf("has no notifiers.slack_gate: there is nothing for notify-svc to do"))
	}
	p, webhook, err := poster(g, f.apiURL)
	if err != nil {
		return refused(m.Errorf("%s", err.Error()))
	}
	if !f.redis.Configured() {
		return refused(errors.New("notify-svc needs the Redis engine-svc stores runs in (--redis-url, --redis-cluster-addrs or --redis-sentinel-addrs)"))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rc, err := f.redis.Open(ctx)
	if err != nil {
		return errcode.Wrap(errcode.EngineStoreFailed, err, err.Error())
	}
	defer rc.Close()
	reg := metrics.NewRegistry()
	rc.AddHook(metrics.RedisHook(reg))
	mctx, mcancel := context.WithCancel(ctx)
	ms, err := metrics.Serve(mctx, log, f.metricsAddr, reg, func(ctx context.Context) error { return rc.Ping(ctx).Err() })
	if err != nil {
		mcancel()
		return refused(fmt.Errorf("--metrics-addr: %w", err))
	}
	defer func() {
		mcancel()
		if ms != nil {
			_ = ms.Wait()
		}
	}()
	toEngine, err := client.Transport(f.tls, mtls.RoleEngine)
	if err != nil {
		return refused(err)
	}
	conn, err := client.NewConn(f.engineAddr, append(metrics.GRPCClient(reg), toEngine)...)
	if err != nil {
		return refused(fmt.Errorf("engine-svc address %s: %w", f.engineAddr, err))
	}
	defer conn.Close()
	if webhook {
		log.Info("notify: posting gates to an incoming webhook: one-way, so no reminders and no escalation; answers go through realm run respond")
	}
	n := notifier.New(notifier.Options{
		Redis: rc, EnginePrefix: f.prefix, Engine: realmv1.NewEngineServiceClient(conn), Poster: p, Webhook: webhook, Replies: g.AppToken != "" || g.SigningSecret != "",
		ReminderInterval: g.ReminderInterval, EscalationThreshold: g.EscalationThreshold, Lease: f.lease, Log: log,
	})
	onMessage := func(ctx context.Context, m events.Message) {
		if err := n.Reply(ctx, m.ThreadTS, m.Text); err != nil {
			log.Warn("notify: a reply in Slack could not be handled", "thread_ts", m.ThreadTS, "code", notifier.CodeOf(err), "err", err)
		}
	}
	if g.AppToken != "" {
		sctx, cancel := context.WithCancel(ctx)
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			events.SocketMode(sctx, events.SocketOptions{AppToken: g.AppToken, BotToken: g.BotToken, APIURL: f.apiURL,
				Seen: n.SeenEvent, OnMessage: onMessage, Log: log})
		}()
		// Stopped when run returns, after the notifier's loop.
		defer func() { cancel(); <-stopped }()
	}
	if g.SigningSecret != "" {
		srv := &http.Server{
			Addr:              net.JoinHostPort(f.eventsHost, strconv.Itoa(g.EventsPort)),
			Handler:           events.Handler(events.Options{SigningSecret: g.SigningSecret, Seen: n.SeenEvent, OnMessage: onMessage}),
			ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		}
		lis, err := net.Listen("tcp", srv.Addr)
		if err != nil {
			return refused(fmt.Errorf("events_port: %w", err))
		}
		go func() { _ = srv.Serve(lis) }()
		// Stopped when run returns, after the notifier's loop.
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		log.Info("notify: reading replies in gate threads from the Slack Events API", "addr", lis.Addr().String(), "path", "/slack/events")
	}
	log.Info("notify: following gates", "engine", f.engineAddr, "redis", f.redis.String(), "prefix", f.prefix)
	n.Run(ctx, f.interval)
	return nil
}
