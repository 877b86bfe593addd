package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/realm-go/realm/engine-svc/realmtest"
	"github.com/realm-go/realm/pkg/client"
	"github.com/realm-go/realm/pkg/source"
)

// runnerStopGrace is how long a --runner program has to stop after SIGTERM.
const runnerStopGrace = 5 * time.Second

type workflowTestFlags struct {
	fixtures   string
	extensions string // the original's flag, refused with the way here
	runners    []string
	wait       time.Duration
	asJSON     bool
}

func (a *app) workflowTestCommand() *cobra.Command {
	var f workflowTestFlags
	cmd := &cobra.Command{
		Use:   "test <path> -f <fixtures-dir>",
		Short: "Run a workflow's fixtures on an engine inside this process",
		Long: "Run every fixture (*.yaml, *.yml) in the fixtures folder against the workflow at <path>\n" +
			"(the file, or a folder holding workflow.yaml). Each fixture is one run on an engine\n" +
			"inside this command, over an in-memory store that is thrown away at the end: no\n" +
			"engine service, nothing saved, no network beyond loopback.\n\n" +
			"A fixture gives the run's params, the answers of mocked services (mocks), the agent\n" +
			"steps' answers (agent_responses) and injected failures (agent_errors), the gates'\n" +
			"choices (gate_responses, default approve), and what the run must end as (expected:\n" +
			"final_state, skipped_steps, evidence). The workflow's own rules run exactly as in\n" +
			"production. An unmocked service fails the fixture; handlers run for real: start\n" +
			"the runner that serves them with --runner (it gets REALM_ENGINE_ADDR pointing at\n" +
			"this engine), or test from Go with the realmtest package.\n\n" +
			"Prints one line per fixture and a summary. Exit 0 when every fixture passes, 1 otherwise.",
		Example: "  realm workflow test examples/refund.yaml -f examples/fixtures/refund\n" +
			"  realm workflow test ./orders -f ./orders/fixtures --runner 'go run ./runner'",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.fixtures == "" {
				return refuse("error: required option '-f, --fixtures <dir>' not specified")
			}
			if f.extensions != "" {
				return refuse("Error: --extensions-module loads project code into the command in the original; here handlers run in handler runners. Start yours for the fixtures with --runner '<command>' (it gets REALM_ENGINE_ADDR), or test from Go with the realmtest package.")
			}
			return a.workflowTest(cmd.Context(), args[0], f)
		},
	}
	cmd.Flags().StringVarP(&f.fixtures, "fixtures", "f", "", "the folder of fixture files (required)")
	cmd.Flags().StringArrayVar(&f.runners, "runner", nil, "a command that starts a handler runner for the fixtures (repeatable; run with sh -c)")
	cmd.Flags().DurationVar(&f.wait, "registration-timeout", 30*time.Second, "how long to wait for the runners to register the workflow's handlers")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print one JSON object with every fixture's result")
	cmd.Flags().StringVar(&f.extensions, "extensions-module", "", "not used here (handlers run in runners): see --runner")
	return cmd
}

func (a *app) workflowTest(ctx context.Context, path string, f workflowTestFlags) error {
	fixtures, err := realmtest.LoadFixturesFromDir(f.fixtures)
	var missing *realmtest.MissingDirError
	if errors.As(err, &missing) {
		return refuse("Error: fixtures directory does not exist: %s", f.fixtures)
	}
	if err != nil {
		return refuse("Error: %s", err.Error())
	}
	suite, err := realmtest.Open(ctx, path, realmtest.Options{RegistrationTimeout: f.wait})
	if err != nil {
		var re *source.ReadError
		if errors.As(err, &re) {
			return refuse("Error: %s", re.Error())
		}
		fmt.Fprintln(a.env.Stderr, "Error: "+err.Error())
		return &exitError{code: ExitRefused}
	}
	defer suite.Close()

	stop, err := a.startRunners(ctx, suite, f)
	if err != nil {
		return err
	}
	defer stop()

	out := a.env.Stdout
	p := newPaint(out, a.env.Getenv)
	if !f.asJSON {
		fmt.Fprintln(out, p.bold("Realm Test — "+path))
	}
	results := make([]realmtest.Result, 0, len(fixtures))
	passed := 0
	for _, fx := range fixtures {
		res := suite.Run(ctx, fx)
		results = append(results, res)
		if res.Passed {
			passed++
		}
		if !f.asJSON {
			printResult(out, p, res)
		}
	}
	if f.asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"workflow": path, "passed": passed, "total": len(results), "results": results})
	} else {
		fmt.Fprintf(out, "\n%d/%d passed\n", passed, len(results))
	}
	if passed != len(results) {
		return &exitError{code: ExitRefused}
	}
	return nil
}

// printResult prints a fixture's line as it finishes, so a long suite
// shows its progress.
func printResult(w io.Writer, p paint, res realmtest.Result) {
	if res.Passed {
		fmt.Fprintf(w, "  %s %s\n", p.green("PASS"), res.Name)
		return
	}
	head, rest, _ := strings.Cut(res.Error, "\n")
	fmt.Fprintf(w, "  %s %s: %s\n", p.red("FAIL"), res.Name, head)
	for _, line := range strings.Split(rest, "\n") {
		if line != "" {
			fmt.Fprintf(w, "    %s\n", line)
		}
	}
}

// startRunners starts each --runner command against the suite's engine and
// waits until the workflow's handlers are registered. The returned stop
// ends them (SIGTERM to each process group, then a kill).
func (a *app) startRunners(ctx context.Context, suite *realmtest.Suite, f workflowTestFlags) (func(), error) {
	var cmds []*exec.Cmd
	var logs []*syncBuffer
	stop := func() {
		for _, c := range cmds {
			if c.Process != nil {
				_ = c.Cancel()
			}
		}
		for _, c := range cmds {
			_ = c.Wait()
		}
	}
	rctx := context.WithoutCancel(ctx)
	for _, line := range f.runners {
		c := exec.CommandContext(rctx, shell(), shellFlag(), line)
		c.Env = append(os.Environ(), client.EngineAddrEnv+"="+suite.Addr())
		buf := &syncBuffer{}
		c.Stdout, c.Stderr = buf, buf
		ownGroup(c)
		c.WaitDelay = runnerStopGrace
		if err := c.Start(); err != nil {
			stop()
			return nil, refuse("Error: --runner %q did not start: %v", line, err)
		}
		cmds, logs = append(cmds, c), append(logs, buf)
	}
	needed := suite.NeededHandlers()
	if len(f.runners) == 0 || len(needed) == 0 {
		return stop, nil
	}
	fmt.Fprintf(a.env.Stderr, "Waiting up to %s for the runners to register %s …\n", f.wait, strings.Join(needed, ", "))
	began := time.Now()
	missing, err := suite.WaitForHandlers(ctx, f.wait)
	if err != nil {
		stop()
		return nil, refuse("Error: %v", err)
	}
	if len(missing) > 0 {
		// Not fatal: the fixtures that reach a missing handler fail with
		// the engine's own message, and the rest still say something.
		fmt.Fprintf(a.env.Stderr, "Warning: no runner registered %s within %s; fixtures that reach it fail.\n", strings.Join(missing, ", "), f.wait)
		for i, l := range logs {
			if tail := l.tail(5); tail != "" {
				fmt.Fprintf(a.env.Stderr, "  %s said:\n%s\n", f.runners[i], indent(tail, "    "))
			}
		}
		return stop, nil
	}
	fmt.Fprintf(a.env.Stderr, "Runners ready in %s.\n", time.Since(began).Round(10*time.Millisecond))
	return stop, nil
}

func shell() string {
	if runtime.GOOS == "windows" {
		return "cmd"
	}
	return "sh"
}

func shellFlag() string {
	if runtime.GOOS == "windows" {
		return "/C"
	}
	return "-c"
}

func indent(s, by string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = by + lines[i]
	}
	return strings.Join(lines, "\n")
}

// syncBuffer keeps a runner's output for the message when it fails to
// register.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 64<<10 {
		s.b.Reset() // keep the newest output only
	}
	return s.b.Write(p)
}

// tail is the last n lines written.
func (s *syncBuffer) tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines := strings.Split(strings.TrimRight(s.b.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
