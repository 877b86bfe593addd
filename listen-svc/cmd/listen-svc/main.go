// Command listen-svc is the webhook front door: it serves the `trigger:`
// blocks of every workflow registered with engine-svc (re-reading the list,
// so a workflow registered later is served without a restart), creates each
// accepted delivery's run through engine-svc and hands it to agent-svc over
// gRPC.
//
//	listen-svc [--addr 127.0.0.1:8090] [--engine-addr 127.0.0.1:7070]
//	           [--agent-addr 127.0.0.1:7071] [--redis-url redis://… | --redis-cluster-addrs a,b,c
//	           | --redis-sentinel-addrs a,b --redis-sentinel-master m]
//	           [--model M] [--provider anthropic|openai] [--llm-timeout N]
//	           [--max-concurrent 20] [--max-body-bytes 1048576]
//	           [--body-timeout-ms 5000] [--log-level info] [--refresh 2s]
//	           [--rate-limit per_second[:burst] | off]
//
// Each trigger's secret_from is read from this process's environment. With
// a Redis (--redis-url, --redis-cluster-addrs or --redis-sentinel-addrs, or
// their env) delivery ids and rate limits are kept in Redis, so every
// replica agrees; without it they are this process's own, and it says so.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/realm-go/realm/listen-svc/dedup"
	"github.com/realm-go/realm/listen-svc/webhook"
	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/metrics"
	"github.com/realm-go/realm/pkg/mtls"
	"github.com/realm-go/realm/pkg/ratelimit"
	"github.com/realm-go/realm/pkg/redisconn"
	"github.com/realm-go/realm/pkg/tracing"
	"github.com/realm-go/realm/pkg/trigger"
)

func envOr(key, def string) string {
	if v := strings.TrimSpace(os.Getenv(key)); v != "" {
		return v
	}
	return def
}

func main() {
	f, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		os.Exit(2) // the flag package has said why, with the usage
	}
	if err := run(f); err != nil {
		fmt.Fprintln(os.Stderr, "Error: "+err.Error())
		os.Exit(1)
	}
}

func run(f flags) error {
	log := webhook.NewLogger(os.Stdout, os.Stderr, webhook.ParseLevel(f.logLevel))
	shutdownTracing, err := tracing.Setup(context.Background(), "listen-svc")
	if err != nil {
		return err
	}
	defer tracing.Stop(shutdownTracing, func(err error) { log.Warn("listen: tracing shutdown: " + err.Error()) })

	reg := metrics.NewRegistry()
	dial := client.Instrumented(reg)
	// Its certificate (role front-door) for both: engine-svc's must state
	// role engine, agent-svc's role front-door.
	toEngine, err := client.Transport(f.tls, mtls.RoleEngine)
	if err != nil {
		return err
	}
	toAgent, err := client.Transport(f.tls, mtls.RoleFrontDoor)
	if err != nil {
		return err
	}
	engConn, err := client.NewConn(f.engineAddr, append(dial, toEngine)...)
	if err != nil {
		return fmt.Errorf("engine-svc address %s: %w", f.engineAddr, err)
	}
	defer engConn.Close()
	agentConn, err := client.NewConn(f.agentAddr, append(dial, toAgent)...)
	if err != nil {
		return fmt.Errorf("agent-svc address %s: %w", f.agentAddr, err)
	}
	defer agentConn.Close()
	eng := realmv1.NewEngineServiceClient(engConn)

	var (
		store  dedup.Store
		shared webhook.SharedLimiter
	)
	if f.redis.Configured() {
		rc, err := f.redis.Open(context.Background())
		if err != nil {
			return err
		}
		rc.AddHook(metrics.RedisHook(reg))
		defer rc.Close()
		store = dedup.NewRedis(rc, "")
		shared = ratelimit.NewRedis(rc, "")
		log.Info("listen: delivery ids and rate limits are kept in Redis (shared by every replica)")
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

	host, _, _ := net.SplitHostPort(f.addr)
	cat := webhook.NewEngineCatalog(eng, os.Getenv, log)
	cat.Loopback = webhook.IsLoopback(host)
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
		Caller:    &realmv1.Caller{By: "listen-svc", BySource: "stated"},
		RateLimit: f.rateLimit, SharedLimit: shared,
	})
	lis, err := net.Listen("tcp", f.addr)
	if err != nil {
		return err
	}
	if !cat.Loopback {
		log.Warn(fmt.Sprintf("listen: binding to non-loopback host '%s' — this server serves plaintext HTTP. Terminate TLS at a reverse proxy before exposing it.", host))
	}
	log.Info(fmt.Sprintf("realm listen on %s — %d workflow(s) mounted", lis.Addr(), len(cat.Table().Mounts())))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	err = webhook.Serve(lis, webhook.Routes(tracing.Handler("webhook", srv), reg), stop, log, 10*time.Second)
	cancel()
	if live := agent.Live(); len(live) > 0 {
		log.Info("listen: stopped following drives still going; agent-svc goes on with them", webhook.KV{Key: "run_ids", Value: live})
	}
	agent.Close()
	return err
}

type flags struct {
	addr, engineAddr, agentAddr string
	redis                       redisconn.Flags
	provider, model, logLevel   string
	llmTimeout, maxConcurrent   int
	maxBodyBytes                int64
	bodyTimeoutMs               int
	sweep                       int
	refresh                     time.Duration
	rateLimit                   *trigger.RateLimit
	tls                         mtls.Files
}

// parseFlags reads the command line (-name value, -name=value, and the same
// with two dashes) over defaults from the environment. On a bad flag or
// -help it has printed the error and the usage to out.
func parseFlags(args []string, out io.Writer) (flags, error) {
	v := flags{
		addr: envOr("REALM_LISTEN_ADDR", "127.0.0.1:8090"), engineAddr: client.EngineAddr(),
		agentAddr: envOr("REALM_AGENT_ADDR", "127.0.0.1:7071"),
		model:     os.Getenv("REALM_LISTEN_MODEL"), logLevel: "info", maxConcurrent: webhook.DefaultMaxConcurrent,
		maxBodyBytes: webhook.DefaultMaxBodyBytes, bodyTimeoutMs: int(webhook.DefaultBodyTimeout / time.Millisecond),
		refresh: 2 * time.Second,
	}
	fs := flag.NewFlagSet("listen-svc", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: listen-svc [flags]\n\nServes the trigger: blocks of every workflow registered with engine-svc.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&v.addr, "addr", v.addr, "HTTP listen address (env REALM_LISTEN_ADDR)")
	fs.StringVar(&v.engineAddr, "engine-addr", v.engineAddr, "engine-svc's gRPC address (host:port, or a comma-separated list of replicas) (env "+client.EngineAddrEnv+")")
	fs.StringVar(&v.agentAddr, "agent-addr", v.agentAddr, "agent-svc's gRPC address (env REALM_AGENT_ADDR)")
	v.redis.Register(fs, os.Getenv, "Redis keeping delivery ids, shared by every replica; no Redis given keeps them in this process")
	fs.Var(checked(&v.provider, func(s string) (string, error) {
		if s != "openai" && s != "anthropic" {
			return "", errors.New("--provider must be openai or anthropic")
		}
		return s, nil
	}), "provider", "the model's `provider`: openai or anthropic (empty: agent-svc's choice)")
	fs.StringVar(&v.model, "model", v.model, "the model agent-svc drives each accepted delivery's run with; without one every drive is refused (env REALM_LISTEN_MODEL)")
	fs.StringVar(&v.logLevel, "log-level", v.logLevel, "debug, info, warn or error")
	fs.Var(checked(&v.llmTimeout, positive[int]("--llm-timeout must be a positive integer number of seconds")),
		"llm-timeout", "`seconds` each model call may take (0: agent-svc's default)")
	fs.Var(checked(&v.maxConcurrent, func(s string) (int, error) {
		n, _ := strconv.Atoi(s) // not a number: no limit, as in the original
		return n, nil
	}), "max-concurrent", "`n` deliveries handled at once; more are answered busy (0 or not a number: no limit)")
	fs.Var(checked(&v.maxBodyBytes, positive[int64]("--max-body-bytes must be a positive integer")),
		"max-body-bytes", "largest request body accepted, in `bytes`")
	fs.Var(checked(&v.bodyTimeoutMs, positive[int]("--body-timeout-ms must be a positive integer")),
		"body-timeout-ms", "`milliseconds` a request body may take to arrive")
	fs.Var(checked(&v.rateLimit, webhook.ParseRateLimit), "rate-limit",
		"requests a second (`per_second[:burst]`, e.g. 10:20) each trigger without its own rate_limit serves, all replicas together when they share a Redis (else each); more are answered 429 with Retry-After (off: no limit)")
	fs.Var(checked(&v.sweep, func(s string) (int, error) { return strconv.Atoi(s) }),
		"sweep-expired-gates", "ignored (`seconds`): engine-svc carries out expired gates itself (engine-svc -sweep-interval)")
	fs.Var(checked(&v.refresh, func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return 0, errors.New("--refresh must be a positive duration such as 2s")
		}
		return d, nil
	}), "refresh", "how often (a `duration`) the registered workflows are re-read")
	v.tls.RegisterFlags(fs, false, nil)
	if err := fs.Parse(args); err != nil {
		return v, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected argument '%s'", fs.Arg(0))
		fmt.Fprintln(out, err)
		fs.Usage()
		return v, err
	}
	return v, nil
}

// value is a flag.Value that parses with parse and keeps the result in *p.
type value[T any] struct {
	p     *T
	parse func(string) (T, error)
}

func checked[T any](p *T, parse func(string) (T, error)) *value[T] {
	return &value[T]{p: p, parse: parse}
}

func (v *value[T]) String() string {
	var x T // the zero value, for a flag.Value that the flag package made
	if v != nil && v.p != nil {
		x = *v.p
	}
	if s, ok := any(x).(string); ok {
		return s
	}
	return fmt.Sprint(x)
}

func (v *value[T]) Set(s string) error {
	x, err := v.parse(s)
	if err != nil {
		return err
	}
	*v.p = x
	return nil
}

// positive parses a whole number of at least 1.
func positive[T int | int64](msg string) func(string) (T, error) {
	return func(s string) (T, error) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 || int64(T(n)) != n {
			return 0, errors.New(msg)
		}
		return T(n), nil
	}
}
