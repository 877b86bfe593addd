package command

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/handler"
	realmrunner "github.com/realm-go/realm/pkg/runner"
	"github.com/realm-go/realm/pkg/source"
	"github.com/realm-go/realm/pkg/workflow"
)

// initInto runs `realm workflow init` into a fresh folder and returns it.
func initInto(t *testing.T, realm func(map[string]string, ...string) result) (dir string, res result) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "support-bot")
	return dir, realm(nil, "workflow", "init", dir)
}

// The scaffold is a workflow the real loader accepts with no warning, and
// lists exactly the files it wrote.
func TestWorkflowInitWritesAValidWorkflow(t *testing.T) {
	t.Parallel()
	dir, res := initInto(t, runner("127.0.0.1:1")) // never dialled
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	golden(t, "workflow-init.txt", strings.ReplaceAll(res.stdout, filepath.Dir(dir), "<tmp>"))

	var written []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			written = append(written, filepath.ToSlash(rel))
		}
		return nil
	})
	for _, f := range scaffoldFiles {
		if !strings.Contains(res.stdout, "\n  "+f.path+"\n") {
			t.Errorf("output does not list %s", f.path)
		}
	}
	if len(written) != len(scaffoldFiles) {
		t.Errorf("wrote %v, want the %d listed files", written, len(scaffoldFiles))
	}

	src, err := source.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	def, rep := workflow.Load(src.GetYaml(), workflow.LoadOptions{Path: src.GetPath(), Files: src.GetFiles(), Strict: true})
	if !rep.Valid || def == nil {
		t.Fatalf("scaffold refused: %v %v", rep.Errors, rep.Diagnostics)
	}
	if def.ID != "support-bot" || len(def.Steps) != 2 || def.Steps["lookup"].Handler != "lookup_ticket" || def.Steps["draft"].InputSchema == nil {
		t.Errorf("definition = %+v", def)
	}
	if _, ok := def.WorkflowContext["schema"]; !ok {
		t.Errorf("schema.json is not the context entry 'schema': %v", def.WorkflowContext)
	}
}

// The Go runner skeleton compiles against this repository's pkg module,
// set up the way README.md tells a user with a source checkout, and passes
// go vet.
func TestWorkflowInitRunnerCompiles(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a Go program")
	}
	dir, res := initInto(t, runner("127.0.0.1:1"))
	if res.code != 0 {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	pkgDir, err := filepath.Abs("../../pkg")
	if err != nil {
		t.Fatal(err)
	}
	// What README.md tells a user with a source checkout: point the
	// requirement at it, then go mod tidy. Offline: the module cache and
	// pkg's go.sum already hold every dependency.
	sum, err := os.ReadFile(filepath.Join(pkgDir, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"mod", "edit", "-replace", "github.com/realm-go/realm/pkg=" + pkgDir},
		{"mod", "tidy"},
		{"vet", "./runner"},
		{"build", "-o", filepath.Join(dir, "runner-bin"), "./runner"},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOPROXY=off", "GOSUMDB=off", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// The scaffold's fixtures pass with its runner serving the handler.
	r := runner("127.0.0.1:1")(nil, "workflow", "test", dir, "-f", filepath.Join(dir, "fixtures"), "--runner", filepath.Join(dir, "runner-bin"))
	if r.code != 0 || !strings.HasSuffix(r.stdout, "\n2/2 passed\n") {
		t.Errorf("realm workflow test on the scaffold: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// On the real engine: `realm workflow validate` accepts the scaffold.
func TestWorkflowInitValidatesOnTheEngine(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *live) {
		dir, res := initInto(t, l.realm)
		if res.code != 0 {
			t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
		}
		got := l.realm(nil, "workflow", "validate", dir, "--strict")
		if got.code != 0 || got.stderr != "" || !strings.Contains(got.stdout, "support-bot") {
			t.Fatalf("validate: exit %d\nstdout %s\nstderr %s", got.code, got.stdout, got.stderr)
		}
		golden(t, "workflow-init-validate.txt", got.stdout)
	})
}

func TestWorkflowInitRefusals(t *testing.T) {
	t.Parallel()
	realm := runner("127.0.0.1:1")
	dir, res := initInto(t, realm)
	if res.code != 0 {
		t.Fatalf("first init: exit %d, stderr %q", res.code, res.stderr)
	}
	readme, _ := os.ReadFile(filepath.Join(dir, "README.md"))
	file := filepath.Join(t.TempDir(), "plain")
	writeFile(t, file, "x")
	for _, c := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"the folder exists", []string{dir}, "Directory already exists: " + dir + "\n"},
		{"a file is in the way", []string{file}, "Directory already exists: " + file + "\n"},
		{"no name", nil, "Error: accepts 1 arg(s), received 0\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			want(t, realm(nil, append([]string{"workflow", "init"}, c.args...)...), 1, "", c.stderr)
		})
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "README.md")); string(again) != string(readme) {
		t.Error("a refused init changed the existing folder")
	}
}

// A relative name is created under the working folder and named as given;
// Next points at it with ./ (cli.md §2.1).
func TestWorkflowInitRelativeName(t *testing.T) {
	t.Chdir(t.TempDir())
	res := runner("127.0.0.1:1")(nil, "workflow", "init", "my-flow")
	if res.code != 0 {
		t.Fatalf("exit %d, stderr %q", res.code, res.stderr)
	}
	if !strings.HasPrefix(res.stdout, "Created: my-flow/\n") || !strings.HasSuffix(res.stdout, "\nNext: realm workflow validate ./my-flow/\n") {
		t.Errorf("stdout =\n%s", res.stdout)
	}
	if _, err := os.Stat(filepath.Join("my-flow", "workflow.yaml")); err != nil {
		t.Error(err)
	}
}

// The starter works end to end: registered by the CLI (which sends its
// schema.json with it), its lookup handler served by a runner, the draft
// step's first prompt shows the ticket and the schema as
// {{ workflow.context.schema }} renders it, the gate shows that prompt,
// and a confirmed draft completes the run.
func TestWorkflowInitStarterRunsEndToEnd(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *live) {
		dir, res := initInto(t, l.realm)
		if res.code != 0 {
			t.Fatalf("init: exit %d, stderr %q", res.code, res.stderr)
		}
		if r := l.realm(nil, "workflow", "register", dir); r.code != 0 {
			t.Fatalf("register: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() {
			served <- realmrunner.Serve(ctx, realmrunner.Options{Name: "init-test-runner", EngineAddr: l.addr, Logger: slog.New(slog.DiscardHandler)},
				realmrunner.Registration{Name: "lookup_ticket", Handler: handler.Func(func(_ context.Context, _ handler.Inputs, sc handler.StepContext) (handler.Result, error) {
					ticket, _ := sc.RunParams["ticket"].(string)
					return handler.Data(map[string]any{"ticket": ticket, "subject": "Subject of " + ticket}), nil
				})})
		}()
		t.Cleanup(func() { cancel(); <-served })

		schema, err := os.ReadFile(filepath.Join(dir, "schema.json"))
		if err != nil {
			t.Fatal(err)
		}
		want := "Draft a short, polite reply to ticket T-1 (\"Subject of T-1\").\nAnswer with an object that fits this schema:\n<schema>\n" + string(schema) + "\n</schema>\n"
		var started *realmv1.Reply
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			p, _ := structpb.NewStruct(map[string]any{"ticket": "T-1"})
			resp, err := l.engine.StartRun(context.Background(), &realmv1.StartRunRequest{WorkflowId: "support-bot", Params: p})
			if err != nil {
				t.Fatal(err)
			}
			started = resp.GetReply()
			if len(started.GetNextActions()) > 0 && started.GetNextActions()[0].GetPrompt() != "" {
				break // the runner has registered: lookup ran
			}
			if time.Now().After(deadline) {
				t.Fatalf("lookup never ran: %v", started)
			}
		}
		run := started.GetRunId()
		if got := started.GetNextActions()[0].GetPrompt(); got != want {
			t.Fatalf("draft prompt =\n%s\nwant\n%s", got, want)
		}
		answer, _ := structpb.NewStruct(map[string]any{"reply": "Thanks for writing; we are on it."})
		resp, err := l.engine.ExecuteStep(context.Background(), &realmv1.ExecuteStepRequest{RunId: run, Command: "draft", Params: answer})
		if err != nil {
			t.Fatal(err)
		}
		g := resp.GetReply().GetGate()
		if g.GetDisplay() != want {
			t.Fatalf("gate display = %q (reply %v)", g.GetDisplay(), resp.GetReply())
		}
		r := l.realm(nil, "run", "respond", run, "--gate", g.GetGateId(), "--choice", "send")
		if r.code != 0 {
			t.Fatalf("respond: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		st, err := l.engine.GetRunState(context.Background(), &realmv1.GetRunStateRequest{RunId: run})
		if err != nil || st.GetState().GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
			t.Fatalf("after send: %v %v", err, st)
		}
	})
}
