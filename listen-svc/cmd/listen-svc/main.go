// Command listen-svc is the webhook front door: it serves the `trigger:`
// blocks of every workflow registered with engine-svc (re-reading the list,
// so a workflow registered later is served without a restart), creates each
// accepted delivery's run through engine-svc and hands it to agent-svc over
// gRPC.
//
//	listen-svc [--addr 127.0.0.1:8090] [--engine-addr 127.0.0.1:7070]
//	           [--agent-addr 127.0.0.1:7071] [--redis-url redis://…]
//	           [--model M] [--provider anthropic|openai] [--llm-timeout N]
//	           [--max-concurrent 20] [--max-body-bytes 1048576]
//	           [--body-timeout-ms 5000] [--log-level info] [--refresh 2s]
//
// Each trigger's secret_from is read from this process's environment. With
// --redis-url (or REDIS_URL) delivery ids are kept in Redis, so every
// replica agrees; without it they are this process's own, and it says so.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/listen-svc/dedup"
	"github.com/realm-go/realm/listen-svc/webhook"
	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/metrics"
	"github.com/realm-go/realm/pkg/tracing"
)

func envOr(key, def string) string {
	if v := strings.TrimSpace(os.Getenv(key)); v != "" {
		return v
	}
	return def
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "Error: "+err.Error())
		os.Exit(1)
	}
}

func run() error {
	fs := flagSet()
	if err := fs.parse(os.Args[1:]); err != nil {
		return err
	}
	f := fs.v
	log := webhook.NewLogger(os.Stdout, os.Stderr, webhook.ParseLevel(f.logLevel))
	shutdownTracing, err := tracing.Setup(context.Background(), "listen-svc")
	if err != nil {
		return err
	}
	defer tracing.Stop(shutdownTracing, func(err error) { log.Warn("listen: tracing shutdown: " + err.Error()) })

	reg := metrics.NewRegistry()
	dial := append(metrics.GRPCClient(reg), tracing.ClientHandler())
	engConn, err := client.NewConn(f.engineAddr, dial...)
	if err != nil {
		return fmt.Errorf("engine-svc address %s: %w", f.engineAddr, err)
	}
	defer engConn.Close()
	agentConn, err := client.NewConn(f.agentAddr, dial...)
	if err != nil {
		return fmt.Errorf("agent-svc address %s: %w", f.agentAddr, err)
	}
	defer agentConn.Close()
	eng := realmv1.NewEngineServiceClient(engConn)

	var store dedup.Store
	if f.redisURL != "" {
		opt, err := redis.ParseURL(f.redisURL)
		if err != nil {
			return fmt.Errorf("redis url: %w", err)
		}
		rc := redis.NewClient(opt)
		rc.AddHook(metrics.RedisHook(reg))
		defer rc.Close()
		pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = rc.Ping(pctx).Err()
		cancel()
		if err != nil {
			return fmt.Errorf("redis unreachable: %w", err)
		}
		store = dedup.NewRedis(rc, "")
		log.Info("listen: delivery ids are kept in Redis (shared by every replica)")
	} else {
		store = dedup.NewMemory(nil)
		log.Warn("listen: delivery ids are kept in this process's memory: no --redis-url, so replicas do not share them and a restart forgets them (the run's idempotency key still matches a repeat)")
	}
	if strings.TrimSpace(f.model) == "" {
		log.Warn("listen: no --model: agent-svc refuses every drive, so each accepted delivery's run ends failed (spawn_failed)")
	}
	if f.sweep > 0 {
		log.Info("listen: --sweep-expired-gates is not needed here: engine-svc enacts expired gates itself (engine-svc --sweep-interval)")
	}

	cat := webhook.NewEngineCatalog(eng, os.Getenv, log)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := cat.Refresh(ctx); err != nil {
		// engine-svc may come up after us: the catalog retries on its own.
		log.Warn("listen: could not read the registered workflows yet", webhook.KV{Key: "error", Value: client.Cause(err)})
	}
	go cat.Run(ctx, f.refresh)

	opts := &realmv1.DriveOptions{Provider: f.provider, Model: strings.TrimSpace(f.model), LlmTimeoutSeconds: int32(f.llmTimeout)}
	agent := webhook.NewAgent(realmv1.NewAgentServiceClient(agentConn), opts, nil)
	agent.Transcript = os.Stdout
	srv := webhook.New(webhook.Options{
		Catalog: cat, Engine: eng, Dispatcher: agent, Dedup: store, Log: log,
		MaxConcurrent: f.maxConcurrent, MaxBodyBytes: f.maxBodyBytes, BodyTimeout: time.Duration(f.bodyTimeoutMs) * time.Millisecond,
		Caller: &realmv1.Caller{By: "listen-svc", BySource: "stated"},
	})
	lis, err := net.Listen("tcp", f.addr)
	if err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(f.addr)
	if !webhook.IsLoopback(host) {
		log.Warn(fmt.Sprintf("listen: binding to non-loopback host '%s' — this server serves plaintext HTTP. Terminate TLS at a reverse proxy before exposing it.", host))
	}
	log.Info(fmt.Sprintf("realm listen on %s — %d workflow(s) mounted", lis.Addr(), len(cat.Table().Mounts())))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	err = webhook.Serve(lis, webhook.Routes(tracing.Handler("webhook", srv), reg), stop, log, 10*time.Second)
	cancel()
	if live := agent.Live(); len(live) > 0 {
		log.Info("listen: drives still going were stopped; continue each with realm agent --run-id", webhook.KV{Key: "run_ids", Value: live})
	}
	agent.Close()
	return err
}

type flags struct {
	addr, engineAddr, agentAddr, redisURL string
	provider, model, logLevel             string
	llmTimeout, maxConcurrent             int
	maxBodyBytes                          int64
	bodyTimeoutMs                         int
	sweep                                 int
	refresh                               time.Duration
}

type flagParser struct{ v flags }

func flagSet() *flagParser {
	return &flagParser{v: flags{
		addr: envOr("REALM_LISTEN_ADDR", "127.0.0.1:8090"), engineAddr: client.EngineAddr(),
		agentAddr: envOr("REALM_AGENT_ADDR", "127.0.0.1:7071"), redisURL: os.Getenv("REDIS_URL"),
		model: os.Getenv("REALM_LISTEN_MODEL"), logLevel: "info", maxConcurrent: webhook.DefaultMaxConcurrent,
		maxBodyBytes: webhook.DefaultMaxBodyBytes, bodyTimeoutMs: int(webhook.DefaultBodyTimeout / time.Millisecond),
		refresh: 2 * time.Second,
	}}
}

// parse reads --name value and --name=value pairs.
func (p *flagParser) parse(args []string) error {
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "--") {
			return fmt.Errorf("unexpected argument '%s'", args[i])
		}
		if !hasVal {
			if i+1 >= len(args) {
				return fmt.Errorf("option '--%s' needs a value", name)
			}
			i++
			val = args[i]
		}
		if err := p.set(name, val); err != nil {
			return err
		}
	}
	return nil
}

func (p *flagParser) set(name, val string) error {
	v := &p.v
	num := func() (int, error) {
		n, err := strconv.Atoi(val)
		if err != nil {
			return 0, fmt.Errorf("option '--%s' argument '%s' is invalid", name, val)
		}
		return n, nil
	}
	var err error
	switch name {
	case "addr":
		v.addr = val
	case "engine-addr":
		v.engineAddr = val
	case "agent-addr":
		v.agentAddr = val
	case "redis-url":
		v.redisURL = val
	case "provider":
		if val != "openai" && val != "anthropic" {
			return fmt.Errorf("option '--provider <provider>' argument '%s' is invalid. --provider must be openai or anthropic.", val)
		}
		v.provider = val
	case "model":
		v.model = val
	case "log-level":
		v.logLevel = val
	case "llm-timeout":
		if v.llmTimeout, err = num(); err != nil || v.llmTimeout <= 0 {
			return fmt.Errorf("option '--llm-timeout <seconds>' argument '%s' is invalid. --llm-timeout must be a positive integer number of seconds.", val)
		}
	case "max-concurrent":
		// Not a number: no limit, as in the original.
		v.maxConcurrent, _ = strconv.Atoi(val)
	case "max-body-bytes":
		n, err := num()
		if err != nil || n < 1 {
			return fmt.Errorf("option '--max-body-bytes' argument '%s' is invalid", val)
		}
		v.maxBodyBytes = int64(n)
	case "body-timeout-ms":
		if v.bodyTimeoutMs, err = num(); err != nil || v.bodyTimeoutMs < 1 {
			return fmt.Errorf("option '--body-timeout-ms' argument '%s' is invalid", val)
		}
	case "sweep-expired-gates":
		if v.sweep, err = num(); err != nil {
			return err
		}
	case "refresh":
		d, err := time.ParseDuration(val)
		if err != nil || d <= 0 {
			return fmt.Errorf("option '--refresh' argument '%s' is invalid", val)
		}
		v.refresh = d
	default:
		return fmt.Errorf("unknown option '--%s'", name)
	}
	return nil
}
