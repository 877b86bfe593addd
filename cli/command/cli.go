// Package command is the `realm` command-line tool: a thin client of engine-svc.
// Every command maps to one gRPC call (two for paging) and prints what the
// engine composed; the only sentences written here are the CLI's own
// (flag errors, the unreachable-engine line, table summaries), worded as
// shared/spec/cli.md gives them.
package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/realm-go/realm/pkg/client"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/mtls"
	"github.com/realm-go/realm/pkg/version"
)

// Exit codes. cli.md §1.4 gives 0 and 1; 2 is ours for "the engine could
// not be reached or did not answer", which the original (no server) lacks.
const (
	ExitOK          = 0
	ExitRefused     = 1
	ExitUnreachable = 2
)

// DefaultTimeout bounds each call to the engine unless --timeout says otherwise.
const DefaultTimeout = 60 * time.Second

// dialTimeout bounds the wait for a connection; a refused one fails at once.
const dialTimeout = 10 * time.Second

// Env is what a command sees of the world. Zero fields fall back to the
// process's own (os.Stdin, os.Stdout, os.Getenv, time.Local, time.Now).
type Env struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	Location       *time.Location
	Now            func() time.Time
	// Stdin is what prompts read (`realm workflow run`).
	Stdin io.Reader
	// IsTerminal says whether Stdin is a terminal; nil asks the OS. A test
	// sets it to drive the interactive commands' check.
	IsTerminal func() bool
}

func (e Env) withDefaults() Env {
	if e.Stdin == nil {
		e.Stdin = os.Stdin
	}
	if e.IsTerminal == nil {
		in := e.Stdin
		e.IsTerminal = func() bool { return isTerminal(in) }
	}
	if e.Stdout == nil {
		e.Stdout = os.Stdout
	}
	if e.Stderr == nil {
		e.Stderr = os.Stderr
	}
	if e.Getenv == nil {
		e.Getenv = os.Getenv
	}
	if e.Location == nil {
		e.Location = time.Local
	}
	if e.Now == nil {
		e.Now = time.Now
	}
	return e
}

// exitError ends a command with code, printing msg (one line) on stderr.
// An empty msg prints nothing: the command already said what happened.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func refuse(format string, args ...any) error {
	return &exitError{code: ExitRefused, msg: oneLine(fmt.Sprintf(format, args...))}
}

// oneLine folds a message onto a single line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// app carries the environment and the global flags to every command.
type app struct {
	env      Env
	addr     string
	timeout  time.Duration
	tlsFlags tlsFlags
	// noSpinner is set by commands with output of their own while calls
	// run: a prompt (workflow run) or a server's log (listen).
	noSpinner bool
}

// Run executes the realm command line args (without the program name) and
// returns the process exit code.
func Run(ctx context.Context, args []string, env Env) int {
	a := &app{env: env.withDefaults()}
	root := a.root()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(a.env.Stderr, ee.msg)
		}
		return ee.code
	}
	// Cobra's own refusals: unknown command or flag, wrong argument count.
	fmt.Fprintln(a.env.Stderr, "Error: "+oneLine(err.Error()))
	return ExitRefused
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "realm",
		Short:         "Realm: workflows for AI agents (client of engine-svc)",
		Version:       version.Version,
		SilenceErrors: true,
		SilenceUsage:  true,
		// No Run: `realm` alone prints help.
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().StringVar(&a.addr, "addr", "", "engine-svc address (default $"+client.EngineAddrEnv+" or "+client.DefaultEngineAddr+")")
	root.PersistentFlags().DurationVar(&a.timeout, "timeout", DefaultTimeout, "how long to wait for engine-svc to answer")
	a.addTLSFlags(root)
	run := a.runCommand()
	run.AddCommand(a.runRespondCommand(), a.runAdvanceCommand(), a.runAbandonCommand(), a.runInspectCommand(),
		a.runReclaimCommand(), a.runDrainCommand(), a.runResumeCommand(), a.runPurgeCommand(), a.runExportCommand(), a.runAttemptsCommand(), a.runDiffCommand(), a.runReplayCommand(), a.runCleanupCommand(),
		a.runGcCommand(), a.runReconcileCommand(), a.runMigrateCommand())
	root.AddCommand(a.workflowCommand(), run, a.serveCommand(), a.mcpCommand())
	root.AddCommand(a.agentCommand(), a.tlsCommand())
	root.AddCommand(a.listenCommand(), a.webhookRemovedCommand())
	return root
}

// engineAddr is --addr, else $REALM_ENGINE_ADDR, else the default.
func (a *app) engineAddr() string {
	if a.addr != "" {
		return a.addr
	}
	if v := strings.TrimSpace(a.env.Getenv(client.EngineAddrEnv)); v != "" {
		return v
	}
	return client.DefaultEngineAddr
}

// engine dials engine-svc. The returned close func is never nil.
func (a *app) engine(ctx context.Context) (realmv1.EngineServiceClient, func(), error) {
	dctx, cancel := context.WithTimeout(ctx, min(dialTimeout, a.timeout))
	defer cancel()
	addr := a.engineAddr()
	transport, err := a.transport(addr, mtls.RoleEngine)
	if err != nil {
		return nil, func() {}, err
	}
	opts := []grpc.DialOption{transport}
	if sp := newSpinner(a.env.Stderr, a.env.Getenv); sp != nil && !a.noSpinner {
		opts = append(opts, grpc.WithChainUnaryInterceptor(sp.interceptor()))
	}
	engine, conn, err := client.DialEngine(dctx, addr, opts...)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, func() {}, &exitError{code: ExitUnreachable, msg: fmt.Sprintf("Error: cannot reach engine-svc at %s: no answer within %s", addr, min(dialTimeout, a.timeout))}
		}
		return nil, func() {}, &exitError{code: ExitUnreachable, msg: "Error: " + oneLine(err.Error())}
	}
	return engine, func() { _ = conn.Close() }, nil
}

// call runs one RPC against the engine with the command's deadline.
func call[Resp any](a *app, ctx context.Context, do func(context.Context, realmv1.EngineServiceClient) (Resp, error)) (Resp, error) {
	var zero Resp
	engine, closeConn, err := a.engine(ctx)
	if err != nil {
		return zero, err
	}
	defer closeConn()
	cctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	resp, err := do(cctx, engine)
	if err != nil {
		return zero, a.rpcError(err)
	}
	return resp, nil
}

// rpcError turns a failed call into its one-line error and exit code.
func (a *app) rpcError(err error) error {
	addr := a.engineAddr()
	switch status.Code(err) {
	case codes.Unavailable:
		return &exitError{code: ExitUnreachable, msg: fmt.Sprintf("Error: cannot reach engine-svc at %s: %s", addr, client.Cause(err))}
	case codes.DeadlineExceeded:
		return &exitError{code: ExitUnreachable, msg: fmt.Sprintf("Error: engine-svc at %s did not answer within %s", addr, a.timeout)}
	}
	msg := client.Cause(err)
	if s, ok := status.FromError(err); ok {
		for _, d := range s.Details() {
			if ed, ok := d.(*realmv1.ErrorDetail); ok && ed.GetCode() != "" {
				// cli.md §1.3: a missing run is the one bare line
				// `Run not found: <id>`, from every run command.
				if errcode.Code(ed.GetCode()) == errcode.StateRunNotFound {
					return refuse("%s", msg)
				}
				msg += " (" + ed.GetCode() + ")"
				break
			}
		}
	}
	return refuse("Error: %s", msg)
}
