// Command console-svc is Realm's web console: a person sees the runs and
// answers the open gates in a browser. Each page is engine-svc gRPC calls,
// as the other front doors make them (its certificate states role
// front-door).
//
//	console-svc [--addr 127.0.0.1:8070] [--engine-addr 127.0.0.1:7070]
//	            [--dev [--dev-user NAME]]
//	            [--identity-header X-Forwarded-User --trusted-proxy 10.0.0.0/8,…]
//	            [--poll 2s] [--metrics-addr ADDR] [--tls-cert … --tls-key … --tls-ca …]
//
// Sign-in: --dev serves loopback only, with no sign-in (every page says so);
// otherwise a reverse proxy that signs people in names them in
// --identity-header, believed only from --trusted-proxy networks. OIDC sign-in
// in the console itself is not built yet: the --oidc-* flags are refused.
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
	"strings"
	"syscall"
	"time"

	"github.com/realm-go/realm/console-svc/identity"
	"github.com/realm-go/realm/console-svc/web"
	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/metrics"
	"github.com/realm-go/realm/pkg/mtls"
	"github.com/realm-go/realm/pkg/tracing"
)

const logPrefix = "console-svc: "

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// config is the parsed command line.
type config struct {
	addr, engineAddr string
	metricsAddr      string
	source           identity.Source
	poll             time.Duration
	tls              mtls.Files
}

// parse reads the flags and refuses every combination the console would
// not act on, with the sentence that says why.
func parse(args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
	envOr := func(key, def string) string {
		if v := strings.TrimSpace(getenv(key)); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("console-svc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &config{}
	fs.StringVar(&c.addr, "addr", envOr("REALM_CONSOLE_LISTEN", "127.0.0.1:8070"), "HTTP listen address (env REALM_CONSOLE_LISTEN)")
	fs.StringVar(&c.engineAddr, "engine-addr", envOr(client.EngineAddrEnv, client.DefaultEngineAddr), "engine-svc gRPC address (host:port, or a comma-separated list of replicas) (env "+client.EngineAddrEnv+")")
	fs.StringVar(&c.metricsAddr, "metrics-addr", getenv("REALM_METRICS_LISTEN"), "serve Prometheus /metrics on this address, apart from the pages (empty: off) (env REALM_METRICS_LISTEN)")
	dev := fs.Bool("dev", false, "no sign-in, loopback only (local development) (env REALM_DEV=1)")
	devUser := fs.String("dev-user", envOr("USER", "developer"), "in dev mode, the name answers are recorded under (env USER)")
	header := fs.String("identity-header", getenv("REALM_CONSOLE_IDENTITY_HEADER"), "the header in which a trusted reverse proxy names the signed-in person, e.g. X-Forwarded-User (env REALM_CONSOLE_IDENTITY_HEADER)")
	proxies := fs.String("trusted-proxy", getenv("REALM_CONSOLE_TRUSTED_PROXY"), "comma-separated networks (CIDR) the reverse proxy calls from; the identity header is believed only from them (env REALM_CONSOLE_TRUSTED_PROXY)")
	fs.DurationVar(&c.poll, "poll", 2*time.Second, "how often an open page asks engine-svc whether what it shows has changed")
	var oidc [4]string
	for i, name := range []string{"oidc-issuer", "oidc-client-id", "oidc-client-secret", "oidc-redirect-url"} {
		fs.StringVar(&oidc[i], name, "", "not built yet: refused (use --identity-header behind a signing-in proxy)")
	}
	c.tls.RegisterFlags(fs, false, getenv)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("console-svc takes no arguments (got %q)", fs.Args())
	}
	for _, v := range oidc {
		if v != "" {
			return nil, errors.New("the --oidc-* flags are refused: console-svc does not sign people in with OIDC itself yet; put it behind a reverse proxy that does (oauth2-proxy, an ingress's auth) and name its header with --identity-header and its address with --trusted-proxy")
		}
	}
	if c.poll < 200*time.Millisecond {
		return nil, fmt.Errorf("--poll %s is too short: each open page asks engine-svc once per interval; give 200ms or more", c.poll)
	}
	isDev := *dev || getenv("REALM_DEV") == "1"
	switch {
	case isDev && *header != "":
		return nil, errors.New("--dev and --identity-header contradict each other: dev mode has no sign-in; give one")
	case isDev:
		if *proxies != "" {
			return nil, errors.New("--trusted-proxy means nothing in dev mode (no sign-in, loopback only); leave it out")
		}
		if strings.TrimSpace(*devUser) == "" {
			return nil, errors.New("--dev-user is empty: answers need a name to be recorded under")
		}
		c.source = identity.Dev{Name: strings.TrimSpace(*devUser)}
	case *header != "":
		nets, err := identity.ParseCIDRs(*proxies)
		if err != nil {
			return nil, err
		}
		if len(nets) == 0 {
			return nil, errors.New("--identity-header needs --trusted-proxy: without it anyone could write the header and answer as anyone")
		}
		c.source = identity.Proxy{Header: http.CanonicalHeaderKey(*header), Trusted: nets}
	default:
		return nil, errors.New("say how people sign in: --dev (loopback only, no sign-in) or --identity-header with --trusted-proxy (a reverse proxy that signs them in)")
	}
	if _, ok := c.source.(identity.Dev); ok {
		host, _, err := net.SplitHostPort(c.addr)
		if err != nil {
			return nil, fmt.Errorf("--addr %q: %w", c.addr, err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, fmt.Errorf("--addr %s is not a loopback address, and dev mode has no sign-in: serve 127.0.0.1, or sign people in with --identity-header", c.addr)
		}
	}
	return c, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, err := parse(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s%w", logPrefix, err)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	shutdownTracing, err := tracing.Setup(ctx, "console-svc")
	if err != nil {
		return fmt.Errorf("%s%w", logPrefix, err)
	}
	defer tracing.Stop(shutdownTracing, func(err error) { log.Warn("console: tracing shutdown", "error", err) })
	// Its certificate (role front-door) for engine-svc, whose own must
	// state role engine.
	transport, err := client.Transport(c.tls, mtls.RoleEngine)
	if err != nil {
		return fmt.Errorf("%s%w", logPrefix, err)
	}
	reg := metrics.NewRegistry()
	conn, err := client.NewConn(c.engineAddr, append(metrics.GRPCClient(reg), tracing.ClientHandler(), transport)...)
	if err != nil {
		return fmt.Errorf("%sengine-svc address %s: %w", logPrefix, c.engineAddr, err)
	}
	defer conn.Close()
	srv, err := web.New(web.Options{Engine: realmv1.NewEngineServiceClient(conn), Identity: c.source, Poll: c.poll, Log: log})
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("%s%w", logPrefix, err)
	}
	hs := &http.Server{Handler: metrics.HTTP(reg, "console", tracing.Handler("console", srv.Handler())), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		// Requests' contexts end with ctx, so a stop ends the event
		// streams rather than waiting them out.
		BaseContext: func(net.Listener) context.Context { return ctx }}
	// /metrics has its own listener, never the pages' port: what the
	// counters tell is not for every person.
	msrv, err := metrics.Serve(ctx, log, c.metricsAddr, reg)
	if err != nil {
		lis.Close()
		return fmt.Errorf("%s%w", logPrefix, err)
	}
	if msrv != nil {
		defer func() { _ = msrv.Wait() }()
		fmt.Fprintf(stdout, "%sPrometheus metrics on http://%s/metrics\n", logPrefix, msrv.Addr())
	}
	fmt.Fprintf(stdout, "%sserving http://%s — %s\n", logPrefix, lis.Addr(), c.source.Mode())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// The pages in flight finish (at most 10s); the event streams have
	// already ended with ctx.
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	<-errc
	return nil
}
