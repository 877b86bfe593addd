// Command mcp-svc is Realm's MCP front door: the 11 tools over streamable
// HTTP (stateless, so any replica answers any request), each call one
// engine-svc gRPC call.
//
//	mcp-svc [--addr 127.0.0.1:8080] [--engine-addr 127.0.0.1:7070] [--dev]
//
// MCP is served at /mcp; /healthz answers 200 without a token (probes).
// Authentication as `realm serve`: Authorization: Bearer $REALM_SERVE_TOKEN,
// required unless --dev or REALM_DEV=1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/realm-go/realm/mcp-svc/mcpserver"
	"github.com/realm-go/realm/pkg/client"
	"github.com/realm-go/realm/pkg/gcpolicy"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/metrics"
	"github.com/realm-go/realm/pkg/mtls"
	"github.com/realm-go/realm/pkg/tracing"
	"github.com/realm-go/realm/pkg/version"
)

const logPrefix = "mcp-svc: "

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run is the program: args without the program name; getenv is the
// environment (REALM_SERVE_TOKEN, REALM_DEV, REALM_OPERATOR, …).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	envOr := func(key, def string) string {
		if v := strings.TrimSpace(getenv(key)); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("mcp-svc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", envOr("REALM_MCP_LISTEN", "127.0.0.1:8080"), "HTTP listen address (env REALM_MCP_LISTEN)")
	engineAddr := fs.String("engine-addr", envOr(client.EngineAddrEnv, client.DefaultEngineAddr), "engine-svc gRPC address (host:port, or a comma-separated list of replicas) (env "+client.EngineAddrEnv+")")
	devFlag := fs.Bool("dev", false, "disable the token check (local development only) (env "+mcpserver.DevEnv+"=1)")
	metricsAddr := fs.String("metrics-addr", getenv("REALM_METRICS_LISTEN"), "serve Prometheus /metrics on this address, apart from /mcp (empty: off) (env REALM_METRICS_LISTEN)")
	origins := fs.String("allowed-origins", getenv("REALM_MCP_ALLOWED_ORIGINS"), "comma-separated browser origins accepted besides loopback ones (env REALM_MCP_ALLOWED_ORIGINS)")
	gcPercent := fs.Int("gc-percent", gcpolicy.DefaultPercent, "the garbage collector's target, as GOGC sets it (GOGC in the environment wins); a soft memory limit of 90% of the container's memory limit is set too, unless GOMEMLIMIT is")
	var tlsFiles mtls.Files
	tlsFiles.RegisterFlags(fs, false, getenv)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // -help: the usage is printed, and that is all
		}
		return err
	}
	// go-sdk allocates a 32 KB buffer for each JSON document it decodes,
	// several per call, over a live heap of a few MB: at Go's default
	// target the collector runs every few dozen calls. At 400 the door
	// spends about a third less CPU per call (docs/benchmarks.md).
	gc, err := gcpolicy.Apply(*gcPercent, getenv, "/sys/fs/cgroup")
	if err != nil {
		return fmt.Errorf("%s--gc-percent: %w", logPrefix, err)
	}
	fmt.Fprintf(stderr, "%sgarbage collector: target %d (from %s), soft memory limit %s (from %s)\n", logPrefix, gc.Percent, gc.PercentFrom, gcLimit(gc.Limit), gc.LimitFrom)
	// Its certificate (role front-door) for engine-svc, whose own must
	// state role engine.
	transport, err := client.Transport(tlsFiles, mtls.RoleEngine)
	if err != nil {
		return fmt.Errorf("%s%w", logPrefix, err)
	}

	dev := mcpserver.DevMode(*devFlag, getenv)
	token, err := mcpserver.Token(dev, getenv)
	if err != nil {
		return err
	}
	caller, err := mcpserver.AmbientCaller(getenv, realmv1.Channel_CHANNEL_MCP_HTTP)
	if err != nil {
		return fmt.Errorf("%s%w", logPrefix, err)
	}
	shutdownTracing, err := tracing.Setup(ctx, "mcp-svc")
	if err != nil {
		return fmt.Errorf("%s%w", logPrefix, err)
	}
	defer tracing.Stop(shutdownTracing, func(err error) { fmt.Fprintf(stderr, "%stracing shutdown: %v\n", logPrefix, err) })
	// Lazy dial: mcp-svc starts while engine-svc is down, and a call then
	// says it cannot reach it. "host:port,host:port" spreads calls over
	// engine replicas (round-robin).
	reg := metrics.NewRegistry()
	conn, err := engineConn(*engineAddr, reg, transport)
	if err != nil {
		return fmt.Errorf("Error: cannot reach engine-svc at %s: %w", *engineAddr, err)
	}
	defer conn.Close()

	srv := mcpserver.New(mcpserver.Options{
		Engine:     realmv1.NewEngineServiceClient(conn),
		EngineAddr: *engineAddr,
		Caller:     caller,
		Version:    version.Version,
		ErrorLog:   stderr,
		LogPrefix:  logPrefix,
		Metrics:    reg,
	})
	var allowed []string
	for _, o := range strings.Split(*origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			allowed = append(allowed, o)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", doorHandler(srv, reg, mcpserver.HTTPOptions{Token: token, AllowedOrigins: allowed}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})

	listenAddr := *addr
	var narrowed string
	if dev {
		// No token: only this machine may call. A non-loopback host is
		// replaced by 127.0.0.1, and the start says so.
		listenAddr, narrowed = loopbackOnly(listenAddr)
	}
	lis, err := mcpserver.Listen(listenAddr)
	if err != nil {
		return fmt.Errorf("Error: %w", err)
	}
	if dev {
		fmt.Fprintln(stdout, mcpserver.DevWarning)
		if narrowed != "" {
			fmt.Fprintf(stdout, "Dev mode serves loopback only: listening on %s instead of %s (set REALM_SERVE_TOKEN to serve other hosts).\n", lis.Addr(), narrowed)
		}
	}
	// /metrics has its own listener, never the public /mcp port: what the
	// counters tell (tools called, refusals) is not for every caller.
	msrv, err := metrics.Serve(ctx, slog.New(slog.NewTextHandler(stderr, nil)), *metricsAddr, reg)
	if err != nil {
		lis.Close()
		return fmt.Errorf("Error: %w", err)
	}
	if msrv != nil {
		defer func() { _ = msrv.Wait() }()
		fmt.Fprintf(stdout, "Prometheus metrics on http://%s/metrics\n", msrv.Addr())
	}
	fmt.Fprintf(stdout, "Realm MCP server listening on http://%s/mcp\n", lis.Addr())
	if !dev {
		fmt.Fprintln(stdout, mcpserver.AuthLine)
	}
	return mcpserver.Serve(ctx, lis, mux, 10*time.Second)
}

// engineConn is the door's connection to engine-svc: gRPC client metrics
// into reg and a span per call (the caller's trace context travels even
// when tracing is off). The benchmark dials through it too, so it measures
// the door as deployed.
func engineConn(addr string, reg prometheus.Registerer, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	return client.NewConn(addr, append(client.Instrumented(reg), opts...)...)
}

// doorHandler is what serves /mcp: the door's handler with request metrics
// into reg and a server span per request.
func doorHandler(srv *mcpserver.Server, reg prometheus.Registerer, o mcpserver.HTTPOptions) http.Handler {
	return metrics.HTTP(reg, "mcp", tracing.Handler("mcp", srv.HTTPHandler(o)))
}

// gcLimit is a soft memory limit as the start-up line shows it.
func gcLimit(limit int64) string {
	if limit == math.MaxInt64 {
		return "none"
	}
	return fmt.Sprintf("%d bytes", limit)
}

// loopbackOnly returns addr with a non-loopback host replaced by 127.0.0.1,
// and the original addr when it was replaced ("" otherwise).
func loopbackOnly(addr string) (string, string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, ""
	}
	if host == "localhost" {
		return addr, ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return addr, ""
	}
	return net.JoinHostPort("127.0.0.1", port), addr
}
