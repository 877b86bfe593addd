// Command console-svc is Realm's web console: a person sees the runs and
// answers the open gates in a browser. Each page is engine-svc gRPC calls,
// as the other front doors make them (its certificate states role
// front-door).
//
//	console-svc [--addr 127.0.0.1:8070] [--engine-addr 127.0.0.1:7070]
//	            [--dev [--dev-user NAME]]
//	            [--identity-header X-Forwarded-User --trusted-proxy 10.0.0.0/8,…]
//	            [--oidc-issuer URL --oidc-client-id ID --oidc-redirect-url URL/auth/callback [--oidc-claim email]]
//	            [--poll 2s] [--metrics-addr ADDR] [--tls-cert … --tls-key … --tls-ca …]
//
// Sign-in: --dev serves loopback only, with no sign-in (every page says so);
// otherwise OpenID Connect (--oidc-*: the console signs people in with the
// provider and keeps who they are in a cookie signed with
// REALM_CONSOLE_SESSION_KEY), or a reverse proxy that signs people in and
// names them in --identity-header, believed only from --trusted-proxy
// networks.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
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

	"github.com/prometheus/client_golang/prometheus"

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
	// oidc, when set, is the source to build at start (it reads the
	// provider's discovery document).
	oidc *identity.OIDCConfig
	poll time.Duration
	tls  mtls.Files
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
	var oc identity.OIDCConfig
	fs.StringVar(&oc.Issuer, "oidc-issuer", getenv("REALM_CONSOLE_OIDC_ISSUER"), "sign people in with this OpenID Connect issuer (env REALM_CONSOLE_OIDC_ISSUER)")
	fs.StringVar(&oc.ClientID, "oidc-client-id", getenv("REALM_CONSOLE_OIDC_CLIENT_ID"), "the console's client id at the issuer (env REALM_CONSOLE_OIDC_CLIENT_ID)")
	fs.StringVar(&oc.ClientSecret, "oidc-client-secret", getenv("REALM_CONSOLE_OIDC_CLIENT_SECRET"), "its client secret; prefer the env REALM_CONSOLE_OIDC_CLIENT_SECRET")
	fs.StringVar(&oc.RedirectURL, "oidc-redirect-url", getenv("REALM_CONSOLE_OIDC_REDIRECT_URL"), "this console's https://…/auth/callback as registered at the issuer (env REALM_CONSOLE_OIDC_REDIRECT_URL)")
	fs.StringVar(&oc.Claim, "oidc-claim", envOr("REALM_CONSOLE_OIDC_CLAIM", "email"), "the ID token claim that names the person (env REALM_CONSOLE_OIDC_CLAIM)")
	c.tls.RegisterFlags(fs, false, getenv)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("console-svc takes no arguments (got %q)", fs.Args())
	}
	if c.poll < 200*time.Millisecond {
		return nil, fmt.Errorf("--poll %s is too short: each open page asks engine-svc once per interval; give 200ms or more", c.poll)
	}
	isDev := *dev || getenv("REALM_DEV") == "1"
	oidcSet := oc.Issuer != "" || oc.ClientID != "" || oc.RedirectURL != "" || oc.ClientSecret != ""
	switch {
	case oidcSet && (isDev || *header != ""):
		return nil, errors.New("--oidc-* and --dev or --identity-header contradict each other: give one way to sign people in")
	case oidcSet:
		if oc.Issuer == "" || oc.ClientID == "" || oc.RedirectURL == "" {
			return nil, errors.New("OIDC sign-in needs --oidc-issuer, --oidc-client-id and --oidc-redirect-url")
		}
		if *proxies != "" {
			return nil, errors.New("--trusted-proxy means nothing with OIDC sign-in (the console signs people in itself); leave it out")
		}
		key, err := sessionKey(getenv("REALM_CONSOLE_SESSION_KEY"))
		if err != nil {
			return nil, err
		}
		oc.SessionKey = key
		c.oidc = &oc
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
		return nil, errors.New("say how people sign in: --dev (loopback only, no sign-in), --oidc-issuer with its client (OpenID Connect), or --identity-header with --trusted-proxy (a reverse proxy that signs them in)")
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
	if c.oidc != nil {
		dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		src, err := identity.NewOIDC(dctx, *c.oidc)
		cancel()
		if err != nil {
			return fmt.Errorf("%s%w", logPrefix, err)
		}
		c.source = src
	}
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
	conn, err := client.NewConn(c.engineAddr, append(client.Instrumented(reg), transport)...)
	if err != nil {
		return fmt.Errorf("%sengine-svc address %s: %w", logPrefix, c.engineAddr, err)
	}
	defer conn.Close()
	// With its own certificate the engine can tell the console from the
	// other doors, so it vouches for the people it signs in.
	srv, err := web.New(web.Options{Engine: realmv1.NewEngineServiceClient(conn), Identity: c.source, Poll: c.poll, Log: log, Vouch: c.tls.Configured()})
	if err != nil {
		return err
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "realm_console_event_streams", Help: "Event streams open now; each asks engine-svc once per --poll.",
	}, func() float64 { return float64(srv.Streams()) }))
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

// sessionKey is REALM_CONSOLE_SESSION_KEY (base64, at least 32 bytes):
// replicas that share it share sign-ins. Without it the key is this
// process's own, made at start, and the log says what that costs.
func sessionKey(v string) ([]byte, error) {
	if v == "" {
		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		fmt.Fprintln(os.Stderr, logPrefix+"no REALM_CONSOLE_SESSION_KEY: sign-ins are signed with a key of this process's own, so they end when it stops and other replicas do not accept them")
		return k, nil
	}
	k, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(k) < 32 {
		return nil, errors.New("REALM_CONSOLE_SESSION_KEY must be at least 32 random bytes, base64 (openssl rand -base64 32)")
	}
	return k, nil
}
