package command

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/realm-go/realm/pkg/handler"
	realmrunner "github.com/realm-go/realm/pkg/runner"
)

// runnerModeEnv turns the test binary into a handler runner serving
// `double`: what `realm workflow test --runner` starts in these tests.
const runnerModeEnv = "REALM_CLI_TEST_AS_RUNNER"

func TestMain(m *testing.M) {
	if os.Getenv(runnerModeEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := realmrunner.Serve(ctx, realmrunner.Options{Name: "cli-test-runner"}, realmrunner.Registration{
			Name: "double",
			Handler: handler.Func(func(_ context.Context, in handler.Inputs, _ handler.StepContext) (handler.Result, error) {
				n, _ := in.Params["n"].(float64)
				return handler.Data(map[string]any{"result": 2 * n}), nil
			}),
		})
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if realmBinary.dir != "" {
		_ = os.RemoveAll(realmBinary.dir) // the realm binary the pty tests built
	}
	os.Exit(code)
}

// copyFixtures copies the *.yaml files of the given folders into one.
func copyFixtures(t *testing.T, dirs ...string) string {
	t.Helper()
	out := t.TempDir()
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(out, filepath.Base(f)), string(b))
		}
	}
	return out
}

// `realm workflow test` on the examples' fixtures: every example fixture
// passes, and the one that must fail does, with exit 1.
func TestWorkflowTest(t *testing.T) {
	t.Parallel()
	realm := runner("127.0.0.1:1") // no engine service is needed
	examples := filepath.Join("..", "..", "examples")

	t.Run("every fixture passes", func(t *testing.T) {
		t.Parallel()
		r := realm(nil, "workflow", "test", filepath.Join(examples, "refund.yaml"), "-f", filepath.Join(examples, "fixtures", "refund"))
		if r.code != ExitOK || r.stderr != "" {
			t.Fatalf("exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
		}
		golden(t, "workflow-test-pass.txt", maskIDs(r.stdout, nil))
	})
	// The examples calling catalog adapters (their services mocked by the
	// fixtures, as no runner serves them here).
	for _, ex := range []string{"github-pr-review", "slack-deploy-notice"} {
		t.Run(ex, func(t *testing.T) {
			t.Parallel()
			r := realm(nil, "workflow", "test", filepath.Join(examples, ex+".yaml"), "-f", filepath.Join(examples, "fixtures", ex))
			if r.code != ExitOK || r.stderr != "" || strings.Contains(r.stdout, "FAIL") {
				t.Fatalf("exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
			}
		})
	}
	t.Run("one fixture fails", func(t *testing.T) {
		t.Parallel()
		dir := copyFixtures(t, filepath.Join(examples, "fixtures", "support-reply"), filepath.Join("testdata", "wftest", "must-fail"))
		r := realm(nil, "workflow", "test", "../../examples/support-reply.yaml", "--fixtures", dir)
		if r.code != ExitRefused || r.stderr != "" {
			t.Fatalf("exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
		}
		golden(t, "workflow-test-fail.txt", maskIDs(r.stdout, nil))
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		r := realm(nil, "workflow", "test", filepath.Join(examples, "triage.yaml"), "-f", filepath.Join(examples, "fixtures", "triage"), "--json")
		if r.code != ExitOK {
			t.Fatalf("exit %d: %s %s", r.code, r.stderr, r.stdout)
		}
		m := decodeJSON(t, r.stdout)
		if m["passed"] != 2.0 || m["total"] != 2.0 || len(m["results"].([]any)) != 2 {
			t.Errorf("json: %v", m)
		}
	})
}

// Handlers run for real on a runner that --runner starts against the
// in-process engine; without it, the fixtures that reach the handler fail
// with the engine's capability message.
func TestWorkflowTestRunsHandlersOnTheRunnersItStarts(t *testing.T) {
	t.Parallel()
	realm := runner("127.0.0.1:1")
	wf := filepath.Join("testdata", "wftest", "doubled.yaml")
	fixtures := filepath.Join("testdata", "wftest", "doubled-fixtures")
	self := fmt.Sprintf("%s=1 exec '%s'", runnerModeEnv, os.Args[0])

	r := realm(nil, "workflow", "test", wf, "-f", fixtures, "--runner", self)
	if r.code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	golden(t, "workflow-test-runner.txt", maskIDs(r.stdout, nil))
	if !strings.HasPrefix(r.stderr, "Waiting up to 30s for the runners to register double …\nRunners ready in ") {
		t.Errorf("progress on stderr: %q", r.stderr)
	}

	r = realm(nil, "workflow", "test", wf, "-f", fixtures)
	if r.code != ExitRefused {
		t.Fatalf("without the runner: exit %d\n%s", r.code, r.stdout)
	}
	golden(t, "workflow-test-no-runner.txt", maskIDs(r.stdout, nil))
}

func TestWorkflowTestRefusals(t *testing.T) {
	t.Parallel()
	realm := runner("127.0.0.1:1")
	examples := filepath.Join("..", "..", "examples")
	bad := t.TempDir()
	writeFile(t, filepath.Join(bad, "x.yaml"), "params: {}\nexpected: {final_state: completed}\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no fixtures flag", []string{"workflow", "test", "x.yaml"}, "error: required option '-f, --fixtures <dir>' not specified"},
		{"no fixtures folder", []string{"workflow", "test", filepath.Join(examples, "refund.yaml"), "-f", "nope"}, "Error: fixtures directory does not exist: nope"},
		{"no workflow file", []string{"workflow", "test", "missing.yaml", "-f", filepath.Join(examples, "fixtures", "refund")}, "Error: Failed to read workflow file: open missing.yaml: no such file or directory"},
		{"fixture without a name", []string{"workflow", "test", filepath.Join(examples, "refund.yaml"), "-f", bad}, "Error: " + filepath.Join(bad, "x.yaml") + `: Fixture must have a non-empty string "name" field`},
		{"the original's extensions flag", []string{"workflow", "test", filepath.Join(examples, "refund.yaml"), "-f", filepath.Join(examples, "fixtures", "refund"), "--extensions-module", "./ext.js"},
			"Error: --extensions-module loads project code into the command in the original; here handlers run in handler runners. Start yours for the fixtures with --runner '<command>' (it gets REALM_ENGINE_ADDR), or test from Go with the realmtest package."},
		{"runner that does not start", []string{"workflow", "test", filepath.Join("testdata", "wftest", "doubled.yaml"), "-f", filepath.Join("testdata", "wftest", "doubled-fixtures"), "--runner", "exit 3", "--registration-timeout", "200ms"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := realm(nil, tc.args...)
			if r.code != ExitRefused {
				t.Fatalf("exit %d, want 1\n%s\n%s", r.code, r.stdout, r.stderr)
			}
			if tc.want != "" {
				assertOneLine(t, r.stderr, tc.want)
			}
		})
	}
}
