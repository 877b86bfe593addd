package runner

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/logging"
	"github.com/realm-go/realm/pkg/mtls"
	"github.com/realm-go/realm/pkg/tracing"
)

// The environment variables a runner flag falls back to when it is not
// given (EngineAddrEnv is the engine's address).
const (
	NameEnv            = "REALM_RUNNER_NAME"
	ListenEnv          = "REALM_RUNNER_LISTEN"
	AdvertiseEnv       = "REALM_RUNNER_ADVERTISE"
	ShutdownTimeoutEnv = "REALM_SHUTDOWN_TIMEOUT"
	MetricsAddrEnv     = "REALM_METRICS_LISTEN"
	ManifestEnv        = "REALM_MANIFEST"
)

// Flags are what a runner's command line sets: Serve's Options, and the
// deployment manifest (realm.yaml) to serve from.
type Flags struct {
	Options
	Manifest string
	// Capabilities prints the capabilities served, as the URI SANs a
	// runner certificate must grant (realm:handler:<name>), and exits.
	Capabilities bool
}

// RegisterFlags defines the runner flags on fs (-name, -engine-addr,
// -listen, -advertise, -lease, -shutdown-timeout, -metrics-addr,
// -manifest), each writing into f. A field already set in f is its flag's
// default (else the package default). A flag not given on the command line
// takes its environment variable when that is set; the help text names
// the variable. The error is an environment variable its flag refuses (a
// REALM_SHUTDOWN_TIMEOUT that is not a duration).
func RegisterFlags(fs *flag.FlagSet, f *Flags) error {
	return registerFlags(fs, f, os.Getenv)
}

func registerFlags(fs *flag.FlagSet, f *Flags, getenv func(string) string) error {
	withEnv := func(usage, env string) string { return usage + " (env " + env + ")" }
	fs.StringVar(&f.Name, "name", cmp.Or(f.Name, filepath.Base(os.Args[0])), withEnv("the runner's name in the engine's records", NameEnv))
	fs.StringVar(&f.EngineAddr, "engine-addr", cmp.Or(f.EngineAddr, DefaultEngineAddr), withEnv("engine-svc's gRPC address", EngineAddrEnv))
	fs.StringVar(&f.Listen, "listen", cmp.Or(f.Listen, DefaultListen), withEnv("the address this runner listens on", ListenEnv))
	fs.StringVar(&f.Advertise, "advertise", f.Advertise, withEnv("the endpoint sent to the engine (default: the listener's address)", AdvertiseEnv))
	fs.DurationVar(&f.Lease, "lease", cmp.Or(f.Lease, DefaultLease), "the registration lease; renewed at a third of it")
	fs.DurationVar(&f.ShutdownTimeout, "shutdown-timeout", cmp.Or(f.ShutdownTimeout, DefaultShutdownTimeout),
		withEnv("how long running steps may finish after a stop signal", ShutdownTimeoutEnv))
	fs.StringVar(&f.MetricsAddr, "metrics-addr", f.MetricsAddr, withEnv("serve Prometheus /metrics on this address (empty: off)", MetricsAddrEnv))
	fs.StringVar(&f.Manifest, "manifest", f.Manifest, withEnv("a deployment manifest (realm.yaml) whose handlers or adapters to serve too", ManifestEnv))
	fs.BoolVar(&f.Capabilities, "capabilities", false, "print the handlers and adapters served, as the URI SANs its certificate must grant (realm:handler:<name>), and exit")
	f.TLS.RegisterFlags(fs, true, getenv)

	// Set now, so the help shows the built-in default and a flag given on
	// the command line still wins when fs is parsed.
	var errs []error
	for _, fe := range [][2]string{
		{"name", NameEnv}, {"engine-addr", EngineAddrEnv}, {"listen", ListenEnv}, {"advertise", AdvertiseEnv},
		{"shutdown-timeout", ShutdownTimeoutEnv}, {"metrics-addr", MetricsAddrEnv}, {"manifest", ManifestEnv},
	} {
		if v := getenv(fe[1]); v != "" {
			if err := fs.Set(fe[0], v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q is no value for -%s: %w", fe[1], v, fe[0], err))
			}
		}
	}
	return errors.Join(errs...)
}

// Program is a runner's main: what it serves, and the hooks for what is
// particular to it. Main runs it.
type Program struct {
	// Name is the runner's default name (-name).
	Name string
	// Handlers are the handlers served.
	Handlers []Registration
	// Registry is what a manifest's handlers entry may `use`: with it,
	// the handlers section of -manifest is served too (LoadManifest).
	// Without it the handlers section is not read (a runner serving
	// adapters reads the manifest in Setup).
	Registry map[string]handler.Handler
	// Flags, when set, defines the program's own flags next to the
	// runner's.
	Flags func(fs *flag.FlagSet)
	// Setup, when set, runs after the flags are parsed and before the
	// runner starts; it may change f (add Adapters, say). Its error stops
	// the program.
	Setup func(ctx context.Context, f *Flags) error
}

// Main is a runner's whole main function:
//
//	func main() {
//		runner.Main(runner.Program{Name: "shop", Handlers: regs})
//	}
//
// It parses the command line (RegisterFlags and Program.Flags; --help
// lists them and exits 0), logs as text on stderr at $REALM_LOG_LEVEL,
// sets up tracing (tracing.Setup, off unless OTEL_* configures it),
// serves until SIGINT or SIGTERM (Serve: metrics with -metrics-addr), and
// exits 1 with the error on stderr when the runner cannot run, 2 on a bad
// command line.
func Main(p Program) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Run(ctx, os.Args[1:], p)
	stop()
	var usage usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.As(err, &usage):
		os.Exit(2) // the flag package has printed the error and the usage
	default:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// printCapabilities writes one grant URI per line: handlers, then
// adapters, each sorted.
func printCapabilities(w io.Writer, o Options, regs []Registration) error {
	var hs []string
	for _, r := range regs {
		hs = append(hs, mtls.GrantURI(mtls.KindHandler, r.Name))
	}
	slices.Sort(hs)
	as := make([]string, 0, len(o.Adapters))
	for name := range o.Adapters {
		as = append(as, mtls.GrantURI(mtls.KindAdapter, name))
	}
	slices.Sort(as)
	for _, g := range append(hs, as...) {
		if _, err := fmt.Fprintln(w, g); err != nil {
			return err
		}
	}
	return flag.ErrHelp
}

// usageError is a command line the flags refused.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// Run is Main's body without the exits: it runs p with args (the command
// line without the program name) until ctx ends. It returns flag.ErrHelp
// for --help, and the manifest's and duplicate names' errors prefixed
// "Error loading extensions: ".
func Run(ctx context.Context, args []string, p Program) error {
	return run(ctx, args, p, os.Getenv)
}

func run(ctx context.Context, args []string, p Program, getenv func(string) string) error {
	fs := flag.NewFlagSet(cmp.Or(p.Name, filepath.Base(os.Args[0])), flag.ContinueOnError)
	f := &Flags{Options: Options{Name: p.Name}}
	if err := registerFlags(fs, f, getenv); err != nil {
		return err
	}
	if p.Flags != nil {
		p.Flags(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %q\n", fs.Args())
		fs.Usage()
		return usageError{fmt.Errorf("unexpected arguments: %q", fs.Args())}
	}
	if f.Logger == nil {
		level, err := logging.ParseLevel(getenv(logging.LevelEnv))
		f.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
		if err != nil {
			f.Logger.Warn("unknown log level; logging at info", "err", err)
		}
	}

	regs := p.Handlers
	if f.Manifest != "" && p.Registry != nil {
		more, err := LoadManifest(f.Manifest, p.Registry)
		if err != nil {
			return fmt.Errorf("Error loading extensions: %w", err)
		}
		regs = append(append([]Registration(nil), regs...), more...)
	}
	if p.Setup != nil {
		if err := p.Setup(ctx, f); err != nil {
			return err
		}
	}

	if f.Capabilities {
		return printCapabilities(os.Stdout, f.Options, regs)
	}

	shutdownTracing, err := tracing.Setup(ctx, f.Name)
	if err != nil {
		return err
	}
	defer tracing.Stop(shutdownTracing, func(err error) { f.Logger.Warn("tracing shutdown", "err", err) })
	err = Serve(ctx, f.Options, regs...)
	if errors.Is(err, ErrDuplicateHandler) {
		return fmt.Errorf("Error loading extensions: %w", err)
	}
	return err
}
