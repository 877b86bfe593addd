package command

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/realm-go/realm/engine-svc/enginetest"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

const watchedWorkflow = `id: watched
name: Watched
version: 1
steps:
  review:
    description: Review the change.
    execution: agent
    agent_profile: reviewer
  ship:
    description: Ship it.
    execution: auto
    depends_on: [review]
`

// stamps masks watch's `[<ISO-8601 UTC>] ` line prefixes.
var stamps = regexp.MustCompile(`(?m)^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\] `)

func masked(s string) string { return stamps.ReplaceAllString(s, "[TS] ") }

func TestWorkflowWatchReregistersOnEditsKeepsTheLastGoodCopyAndStopsWhenTheFolderGoes(t *testing.T) {
	t.Parallel()
	addr := enginetest.Start(t, "miniredis")
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	engine := realmv1.NewEngineServiceClient(conn)

	dir := filepath.Join(t.TempDir(), "wf")
	file := filepath.Join(dir, "workflow.yaml")
	profile := filepath.Join(dir, "profiles", "reviewer.md")
	if err := os.MkdirAll(filepath.Dir(profile), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(file, watchedWorkflow)
	write(profile, "Be thorough.\n")

	var out, errb lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"workflow", "watch", dir},
			Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return map[string]string{"REALM_ENGINE_ADDR": addr}[k] }})
	}()
	waitFor := func(b *lockedBuffer, want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(masked(b.String()), want) {
			if time.Now().After(deadline) {
				t.Fatalf("never saw %q\nstdout:\n%s\nstderr:\n%s", want, out.String(), errb.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	profileText := func() string {
		t.Helper()
		resp, err := engine.GetWorkflowProtocol(context.Background(), &realmv1.GetWorkflowProtocolRequest{WorkflowId: "watched"})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetProtocol().String()
	}
	version := func() string {
		t.Helper()
		resp, err := engine.ListWorkflows(context.Background(), &realmv1.ListWorkflowsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range resp.GetWorkflows() {
			if w.GetId() == "watched" {
				return number(w.GetVersion())
			}
		}
		return "(not registered)"
	}

	watching := "[TS] Watching " + file + " — press Ctrl+C to stop\n"
	registered := "[TS] Registered: watched v1 (2 steps)\n"
	waitFor(&out, watching+registered)

	// The workflow file changes: registered again, with the file's version.
	// (The size changes too, so a coarse mtime cannot hide the edit.)
	v2 := strings.NewReplacer("version: 1", "version: 2", "name: Watched", "name: Watched twice").Replace(watchedWorkflow)
	write(file, v2)
	registered2 := "[TS] Registered: watched v2 (2 steps)\n"
	waitFor(&out, watching+registered+registered2)
	if v := version(); v != "2" {
		t.Fatalf("engine has v%s, want v2", v)
	}

	// A profile file changes: registered again, carrying the new text.
	write(profile, "Be very thorough.\n")
	waitFor(&out, watching+registered+registered2+registered2)
	if p := profileText(); !strings.Contains(p, "Be very thorough.") {
		t.Errorf("registered copy does not carry the edited profile: %s", p)
	}

	// A refused edit is logged on stderr; the copy registered before stays.
	write(file, strings.Replace(v2, "version: 2", "version: three", 1))
	waitFor(&errb, "[TS] Invalid workflow: 'version' must be a number (line 3)\n")
	if v := version(); v != "2" {
		t.Errorf("after a refused edit the engine has v%s, want v2 still", v)
	}
	if p := profileText(); !strings.Contains(p, "Be very thorough.") {
		t.Errorf("after a refused edit the registered copy changed: %s", p)
	}

	// The folder goes: the Error line, exit 1.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != ExitRefused {
			t.Errorf("exit %d after the folder went, want 1", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not stop when its folder went")
	}
	if got, want := masked(out.String()), watching+registered+registered2+registered2; got != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", got, want)
	}
	wantErr := "[TS] Invalid workflow: 'version' must be a number (line 3)\n" + "[TS] " + watchGoneLine + "\n"
	if got := masked(errb.String()); got != wantErr {
		t.Errorf("stderr:\n%s\nwant:\n%s", got, wantErr)
	}
}

func TestWorkflowWatchStopsWithExitZeroOnCancel(t *testing.T) {
	t.Parallel()
	addr := enginetest.Start(t, "miniredis")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "workflow.yaml"), []byte(strings.Replace(watchedWorkflow, "    agent_profile: reviewer\n", "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"workflow", "watch", filepath.Join(dir, "workflow.yaml")},
			Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return map[string]string{"REALM_ENGINE_ADDR": addr}[k] }})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "Registered: watched v1 (2 steps)") {
		if time.Now().After(deadline) {
			t.Fatalf("never registered\nstdout:\n%s\nstderr:\n%s", out.String(), errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Errorf("exit %d on cancel, want 0; stderr:\n%s", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not stop on cancel")
	}
	if errb.String() != "" {
		t.Errorf("stderr: %q, want nothing", errb.String())
	}
}

func TestWorkflowWatchRefusesAMissingFile(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	var out, errb lockedBuffer
	code := Run(context.Background(), []string{"workflow", "watch", missing},
		Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "127.0.0.1:1" }})
	if code != ExitRefused {
		t.Errorf("exit %d, want 1", code)
	}
	if out.String() != "" {
		t.Errorf("stdout: %q, want nothing", out.String())
	}
	want := "[TS] Invalid: Failed to read workflow file: open " + missing + ": no such file or directory\n"
	if got := masked(errb.String()); got != want {
		t.Errorf("stderr: %q, want %q", got, want)
	}
}
