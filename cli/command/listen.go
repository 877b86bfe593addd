package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/realm-go/realm/listen-svc/dedup"
	"github.com/realm-go/realm/listen-svc/webhook"
	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/mtls"
	"github.com/realm-go/realm/pkg/ratelimit"
	"github.com/realm-go/realm/pkg/redisconn"
	"github.com/realm-go/realm/pkg/source"
	"github.com/realm-go/realm/pkg/trigger"
)

// listenGrace is how long requests in flight may finish on Ctrl-C.
const listenGrace = 10 * time.Second

// listenFlags are the original's 11 flags (listen spec §2.1), plus where
// agent-svc listens and listen-svc's default rate limit.
type listenFlags struct {
	port, host                  string
	maxBodyBytes, bodyTimeoutMs string
	maxConcurrent               string
	dedupStore, logLevel        string
	provider, model, llmTimeout string
	sweep                       string
	agentAddr                   string
	rateLimit                   string
	redis                       redisconn.Flags
	// limit is rateLimit parsed by checkListenFlags (nil: no default limit).
	limit *trigger.RateLimit
}

func (a *app) listenCommand() *cobra.Command {
	f := &listenFlags{}
	cmd := &cobra.Command{
		Use:   "listen [workflows...] --model <model>",
		Short: "Serve the webhook triggers of workflows: each accepted request starts a run that agent-svc drives",
		Long: "Serve each given workflow's trigger: block (folders holding workflow.yaml, or .yaml files; none: the\n" +
			"current folder) over plaintext HTTP. Each request is verified, filtered and deduplicated; an accepted\n" +
			"one creates a run through engine-svc and hands it to agent-svc (realm agent's driver) with --model.\n" +
			"Delivery ids and rate limits (a trigger's rate_limit, else --rate-limit) are kept in Redis when one\n" +
			"is given (--redis-url, --redis-cluster-addrs or --redis-sentinel-addrs, or their env), shared with\n" +
			"every other listener on it, else in this process's memory.\n" +
			"Expired gates are enacted by engine-svc's own sweeper; --sweep-expired-gates is accepted for parity.",
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.listen(cmd.Context(), f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.port, "port", "3000", "port to listen on")
	fl.StringVar(&f.host, "host", "127.0.0.1", "bind address (loopback by default)")
	fl.StringVar(&f.maxBodyBytes, "max-body-bytes", "1048576", "largest accepted body")
	fl.StringVar(&f.bodyTimeoutMs, "body-timeout-ms", "5000", "longest a body may take to arrive")
	fl.StringVar(&f.maxConcurrent, "max-concurrent", "20", "requests handled at once; one more gets 503")
	fl.StringVar(&f.dedupStore, "dedup-store", "file", "where seen event ids live: file (Redis when one is given) or memory")
	fl.StringVar(&f.logLevel, "log-level", "info", "least important level logged: debug, info, warn, error")
	fl.StringVar(&f.provider, "provider", "", "passed to each drive: openai or anthropic")
	fl.StringVar(&f.model, "model", "", "passed to each drive (required)")
	fl.StringVar(&f.llmTimeout, "llm-timeout", "", "passed to each drive: seconds per model request")
	fl.StringVar(&f.sweep, "sweep-expired-gates", "", "every N seconds, enact due gates (engine-svc already does)")
	fl.StringVar(&f.agentAddr, "agent-addr", "", "agent-svc address (default $"+AgentAddrEnv+" or "+DefaultAgentAddr+")")
	fl.StringVar(&f.rateLimit, "rate-limit", "off", "requests a second (per_second[:burst], e.g. 10:20) each trigger without its own rate_limit serves, shared through Redis when one is given; more get 429 with Retry-After (off: no limit)")
	// The services' own Redis flags, through a Go flag set pflag adopts.
	gfs := flag.NewFlagSet("listen", flag.ContinueOnError)
	f.redis.Register(gfs, a.env.Getenv, "Redis keeping delivery ids with --dedup-store file")
	fl.AddGoFlagSet(gfs)
	// pflag takes a Go flag's default from its value when adopted, which
	// by then holds the environment's: keep the definition's (none), so
	// help and docs/cli.md never show a machine's REDIS_* values.
	gfs.VisitAll(func(g *flag.Flag) {
		if p := fl.Lookup(g.Name); p != nil {
			p.DefValue = g.DefValue
		}
	})
	return cmd
}

// webhookRemovedCommand is the old GitHub-only command's migration message.
func (a *app) webhookRemovedCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "webhook",
		Short:              "Removed: use realm listen",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return refuse("`realm webhook` has been removed. Use `realm listen` with a `trigger:` block (auth.mode: github + a params_map for the PR fields) in your workflow instead. See `realm listen --help`.")
		},
	}
}

const (
	anthropicModels = "https://platform.claude.com/docs/en/models/overview"
	openaiModels    = "https://developers.openai.com/api/docs/models"
)

// checkListenFlags gives the original's refusals (listen spec §2.2).
func checkListenFlags(f *listenFlags) error {
	if f.llmTimeout != "" {
		if n, err := strconv.Atoi(f.llmTimeout); err != nil || n <= 0 {
			return refuse("error: option '--llm-timeout <seconds>' argument '%s' is invalid. --llm-timeout must be a positive integer number of seconds.", f.llmTimeout)
		}
	}
	if f.provider != "" && f.provider != "openai" && f.provider != "anthropic" {
		return refuse("error: option '--provider <provider>' argument '%s' is invalid. --provider must be openai or anthropic.", f.provider)
	}
	if strings.TrimSpace(f.model) == "" {
		switch f.provider {
		case "anthropic":
			return refuse("Error: --model is required: realm has no default model, and realm listen starts realm agent --provider anthropic for every run. Name an Anthropic model; Anthropic lists them at %s. Nothing was started.", anthropicModels)
		case "openai":
			return refuse("Error: --model is required: realm has no default model, and realm listen starts realm agent --provider openai for every run. Name an OpenAI model; OpenAI lists them at %s. Nothing was started.", openaiModels)
		}
		return refuse("Error: --model is required: realm has no default model, and realm listen starts realm agent for every run. Each one picks its provider from the API key it finds (OpenAI when both are set; choose one with --provider). Anthropic lists its models at %s; OpenAI at %s. Nothing was started.", anthropicModels, openaiModels)
	}
	for name, v := range map[string]string{"--port": f.port, "--max-body-bytes": f.maxBodyBytes, "--body-timeout-ms": f.bodyTimeoutMs} {
		if n, err := strconv.Atoi(v); err != nil || n < 0 {
			return refuse("error: option '%s' argument '%s' is invalid. %s must be a non-negative integer.", name, v, name)
		}
	}
	if f.sweep != "" {
		if n, err := strconv.Atoi(f.sweep); err != nil || n <= 0 {
			return refuse("error: option '--sweep-expired-gates <seconds>' argument '%s' is invalid. --sweep-expired-gates must be a positive integer number of seconds.", f.sweep)
		}
	}
	// listen-svc's parser: the flag means the same in both listeners.
	limit, err := webhook.ParseRateLimit(f.rateLimit)
	if err != nil {
		return refuse("error: option '--rate-limit <per_second[:burst]>' argument '%s' is invalid. %v.", f.rateLimit, err)
	}
	f.limit = limit
	return nil
}

// workflowFile is the file a listen argument names: a .yaml/.yml file, or
// a folder's workflow.yaml.
func workflowFile(arg string) string {
	if strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml") {
		return arg
	}
	return filepath.Join(arg, "workflow.yaml")
}

// listen runs the listener in the order of listen spec §3.
func (a *app) listen(ctx context.Context, f *listenFlags, args []string) error {
	if err := checkListenFlags(f); err != nil {
		return err
	}
	log := webhook.NewLogger(a.env.Stdout, a.env.Stderr, webhook.ParseLevel(f.logLevel))
	if len(args) == 0 {
		args = []string{"."}
	}
	var decls []webhook.Declared
	sources := map[string]*realmv1.WorkflowSource{}
	for _, arg := range args {
		file := workflowFile(arg)
		src, err := source.Read(file)
		if err == nil {
			var d webhook.Declared
			if d, err = webhook.Declare(src); err == nil {
				if d.Block == nil {
					log.Info("listen: workflow has no trigger block — not mounted", webhook.KV{Key: "workflow", Value: d.WorkflowID})
					continue
				}
				decls = append(decls, d)
				sources[d.WorkflowID] = src
				continue
			}
		}
		return refuse("Error: failed to load workflow '%s': %v", file, err)
	}
	table, problems := webhook.Build(decls, a.env.Getenv, webhook.IsLoopback(f.host))
	if len(problems) > 0 {
		return refuse("Error: %v", problems[0])
	}
	if len(table.Mounts()) == 0 {
		return refuse("Error: no workflows with a trigger: block to mount.")
	}
	webhook.LogMounts(log, table.Mounts())

	a.noSpinner = true
	engine, closeEngine, err := a.engine(ctx)
	if err != nil {
		return err
	}
	defer closeEngine()
	for _, m := range table.Mounts() {
		rctx, cancel := context.WithTimeout(ctx, a.timeout)
		resp, err := engine.RegisterWorkflow(rctx, &realmv1.RegisterWorkflowRequest{Source: sources[m.WorkflowID]})
		cancel()
		if err != nil {
			return a.rpcError(err)
		}
		if !resp.GetRegistered() {
			return refuse("Error: failed to load workflow '%s': Invalid workflow: %s", sources[m.WorkflowID].GetPath(), strings.Join(resp.GetReport().GetErrors(), "; "))
		}
	}

	limited := f.limit != nil
	for _, m := range table.Mounts() {
		limited = limited || (m.Trigger.RateLimit != nil && !m.Trigger.RateLimit.Off)
	}
	store, shared, closeStore, err := a.listenDedup(ctx, f, limited, log)
	if err != nil {
		return err
	}
	defer closeStore()
	if f.sweep != "" {
		log.Info("listen: expired gates are enacted by engine-svc's own sweeper (engine-svc --sweep-interval); this listener adds no second sweep")
	}
	agentAddr := a.agentAddr(&agentFlags{agentAddr: f.agentAddr})
	toAgent, err := a.transport(agentAddr, mtls.RoleFrontDoor)
	if err != nil {
		return err
	}
	agentConn, err := client.NewConn(agentAddr, toAgent)
	if err != nil {
		return &exitError{code: ExitUnreachable, msg: fmt.Sprintf("Error: cannot reach agent-svc at %s: %v", agentAddr, err)}
	}
	defer agentConn.Close()
	llm, _ := strconv.Atoi(f.llmTimeout)
	agent := webhook.NewAgent(realmv1.NewAgentServiceClient(agentConn),
		&realmv1.DriveOptions{Provider: f.provider, Model: strings.TrimSpace(f.model), LlmTimeoutSeconds: int32(llm)}, nil)
	agent.Transcript = a.env.Stdout
	defer agent.Close()

	// Lenient like the original: a --max-concurrent that is not a number
	// sets no limit.
	maxConc, err := strconv.Atoi(f.maxConcurrent)
	if err != nil {
		maxConc = 0
	}
	maxBody, _ := strconv.ParseInt(f.maxBodyBytes, 10, 64)
	bodyMs, _ := strconv.Atoi(f.bodyTimeoutMs)
	srv := webhook.New(webhook.Options{
		Catalog: webhook.Static{T: table}, Engine: engine, Dispatcher: agent, Dedup: store, Log: log,
		MaxConcurrent: maxConc, MaxBodyBytes: maxBody, BodyTimeout: time.Duration(bodyMs) * time.Millisecond,
		Caller:    &realmv1.Caller{By: "realm listen", BySource: "stated"},
		RateLimit: f.limit, SharedLimit: shared,
	})
	if !webhook.IsLoopback(f.host) {
		log.Warn(fmt.Sprintf("listen: binding to non-loopback host '%s' — this server serves plaintext HTTP. Terminate TLS at a reverse proxy before exposing it.", f.host))
	}
	addr := net.JoinHostPort(f.host, f.port)
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return refuse("Error: listen EADDRINUSE: address already in use %s", addr)
		}
		return refuse("Error: listen startup failed: %v", err)
	}
	log.Info(fmt.Sprintf("realm listen on %s — %d workflow(s) mounted", lis.Addr(), len(table.Mounts())))

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(stop)
	go func() {
		<-ctx.Done()
		select {
		case stop <- nil:
		default:
		}
	}()
	if err := webhook.Serve(lis, srv, stop, log, listenGrace); err != nil {
		return refuse("Error: %v", err)
	}
	return nil
}

// listenDedup picks the delivery-id store: Redis (when given) for --dedup-store
// file, else this process's memory, said at start. When a trigger is
// limited, the rate limits are shared through the same Redis, whatever
// --dedup-store says (nil without one: each process limits on its own).
func (a *app) listenDedup(ctx context.Context, f *listenFlags, limited bool, log *webhook.Logger) (dedup.Store, webhook.SharedLimiter, func(), error) {
	if !f.redis.Configured() || (f.dedupStore == "memory" && !limited) {
		if f.dedupStore != "memory" {
			log.Warn("listen: no Redis given (REDIS_URL, REDIS_CLUSTER_ADDRS or REDIS_SENTINEL_ADDRS): delivery ids are kept in this process's memory (a restart forgets them; the run's idempotency key still matches a repeat)")
		}
		return dedup.NewMemory(nil), nil, func() {}, nil
	}
	rc, err := f.redis.Open(ctx)
	if err != nil {
		return nil, nil, nil, refuse("Error: listen startup failed: %v", err)
	}
	var store dedup.Store = dedup.NewRedis(rc, "")
	if f.dedupStore == "memory" {
		store = dedup.NewMemory(nil)
	}
	var shared webhook.SharedLimiter
	if limited {
		shared = ratelimit.NewRedis(rc, "")
	}
	return store, shared, func() { _ = rc.Close() }, nil
}
