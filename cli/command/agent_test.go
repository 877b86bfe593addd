package command

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// fakeAgent is an agent-svc that records the request and streams events.
type fakeAgent struct {
	realmv1.UnimplementedAgentServiceServer
	mu     sync.Mutex
	got    *realmv1.DriveRunRequest
	events []*realmv1.DriveEvent
}

func (f *fakeAgent) DriveRun(req *realmv1.DriveRunRequest, stream realmv1.AgentService_DriveRunServer) error {
	f.mu.Lock()
	f.got = req
	f.mu.Unlock()
	for _, ev := range f.events {
		if err := stream.Send(&realmv1.DriveRunResponse{Event: ev}); err != nil {
			return err
		}
	}
	return nil
}

func serveAgent(t *testing.T, f *fakeAgent) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	realmv1.RegisterAgentServiceServer(gs, f)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

func out(text string) *realmv1.DriveLine {
	return &realmv1.DriveLine{Text: text, Stream: realmv1.DriveStream_DRIVE_STREAM_STDOUT}
}

func errLine(text string) *realmv1.DriveLine {
	return &realmv1.DriveLine{Text: text, Stream: realmv1.DriveStream_DRIVE_STREAM_STDERR}
}

func runAgent(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	env := Env{Stdout: &o, Stderr: &e, Getenv: func(k string) string {
		if k == "REALM_OPERATOR" {
			return "tester"
		}
		return ""
	}}
	code = Run(context.Background(), append([]string{"agent"}, args...), env)
	return code, o.String(), e.String()
}

func TestAgentPrintsTheDriveAndExitsByItsEnding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		events   []*realmv1.DriveEvent
		code     int
		out, err string
	}{
		{"completed", []*realmv1.DriveEvent{
			{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_STARTED, Lines: []*realmv1.DriveLine{out(""), out("Realm Agent — Ticket triage v1"), out("Run ID: r1"), out("")}},
			{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_STEP_STARTED, Lines: []*realmv1.DriveLine{out("→ [agent] classify"), out("  ✓ → completed")}},
			{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_FINISHED, Outcome: realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED, Lines: []*realmv1.DriveLine{out(""), out("Run complete: r1")}},
		}, 0, "\nRealm Agent — Ticket triage v1\nRun ID: r1\n\n→ [agent] classify\n  ✓ → completed\n\nRun complete: r1\n", ""},
		{"stopped", []*realmv1.DriveEvent{
			{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_BLOCKED, Lines: []*realmv1.DriveLine{errLine("✗ Step 'classify' LLM call failed: Connection error."), errLine("Re-attach to continue: realm agent --run-id r1 --provider openai --model m")}},
			{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_FINISHED, Outcome: realmv1.DriveOutcome_DRIVE_OUTCOME_STOPPED, ExitCode: 1, Lines: []*realmv1.DriveLine{errLine(""), errLine("Run ended in phase: running")}},
		}, 1, "", "✗ Step 'classify' LLM call failed: Connection error.\nRe-attach to continue: realm agent --run-id r1 --provider openai --model m\n\nRun ended in phase: running\n"},
		{"stream ends without a finish", nil, 1, "", "Error: agent-svc ended the drive without saying how it ended.\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr := serveAgent(t, &fakeAgent{events: tt.events})
			code, stdout, stderr := runAgent(t, "--agent-addr", addr, "--run-id", "r1", "--provider", "openai", "--model", "m")
			if code != tt.code || stdout != tt.out || stderr != tt.err {
				t.Errorf("code %d stdout %q stderr %q; want %d %q %q", code, stdout, stderr, tt.code, tt.out, tt.err)
			}
		})
	}
}

func TestAgentSendsTheFlagsAndTheWorkflowFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "wf.yaml")
	if err := os.WriteFile(file, []byte("id: wf\nsteps: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &fakeAgent{events: []*realmv1.DriveEvent{{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_FINISHED, Outcome: realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED}}}
	addr := serveAgent(t, f)
	code, _, stderr := runAgent(t, "--agent-addr", addr, "--workflow", file, "--params", `{"ticket": 7}`, "--provider", "anthropic",
		"--model", "claude-x", "--schema-retries", "1", "--llm-timeout", "30", "--prompt-cache")
	if code != 0 {
		t.Fatalf("code %d: %s", code, stderr)
	}
	got := f.got
	o := got.GetOptions()
	if got.GetWorkflowSource() == nil || !strings.Contains(string(got.GetWorkflowSource().GetYaml()), "id: wf") || got.GetWorkflowId() != "" ||
		got.GetParams().AsMap()["ticket"] != 7.0 || o.GetProvider() != "anthropic" || o.GetModel() != "claude-x" ||
		o.GetSchemaRetries() != 1 || o.GetLlmTimeoutSeconds() != 30 || !o.GetPromptCache() || got.GetCaller().GetBy() != "tester" || got.GetRegister() {
		t.Errorf("request = %v", got)
	}

	code, _, _ = runAgent(t, "--agent-addr", addr, "--workflow", file, "--model", "m", "--register")
	if code != 0 || f.got.GetWorkflowSource() == nil || !f.got.GetRegister() {
		t.Errorf("--register: code %d request %v", code, f.got)
	}

	code, _, _ = runAgent(t, "--agent-addr", addr, "--workflow", "triage", "--model", "m")
	if code != 0 || f.got.GetWorkflowId() != "triage" || f.got.GetWorkflowSource() != nil || f.got.GetParams() != nil {
		t.Errorf("by id: code %d request %v", code, f.got)
	}
}

func TestAgentRefusesBadFlagsBeforeCallingAgentSvc(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no run", nil, "Error: one of --workflow or --run-id is required"},
		{"both", []string{"--workflow", "w", "--run-id", "r"}, "Error: --workflow and --run-id are mutually exclusive"},
		{"params with run", []string{"--run-id", "r", "--params", "{}"}, "Error: --params cannot be used with --run-id; the run already has params from creation time"},
		{"retries", []string{"--run-id", "r", "--schema-retries", "-1"}, "error: option '--schema-retries <n>' argument '-1' is invalid. --schema-retries must be a non-negative integer."},
		{"timeout", []string{"--run-id", "r", "--llm-timeout", "0"}, "error: option '--llm-timeout <seconds>' argument '0' is invalid. --llm-timeout must be a positive integer number of seconds."},
		{"register with run", []string{"--run-id", "r", "--register"}, "Error: --register cannot be used with --run-id; a run's definition is chosen when it is created"},
		{"register a workflow id", []string{"--workflow", "triage", "--register"}, "Error: --register registers a workflow file, and 'triage' names no file: a workflow id is registered already (realm workflow register <path> registers a file)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Nothing listens on port 1: a refusal must come first.
			code, _, stderr := runAgent(t, append([]string{"--agent-addr", "127.0.0.1:1"}, tt.args...)...)
			if code != ExitRefused || stderr != tt.want+"\n" {
				t.Errorf("code %d stderr %q, want 1 %q", code, stderr, tt.want)
			}
		})
	}
}

func TestAgentSaysWhenAgentSvcCannotBeReached(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	code, _, stderr := runAgent(t, "--agent-addr", addr, "--run-id", "r", "--model", "m")
	if code != ExitUnreachable || !strings.HasPrefix(stderr, "Error: cannot reach agent-svc at "+addr+": ") {
		t.Errorf("code %d stderr %q", code, stderr)
	}
}

// --detach hands the drive to agent-svc and returns once its run is known:
// the request says detach, the lines up to the run's start are printed,
// and nothing after (agent-svc goes on with the drive).
func TestAgentDetachReturnsOnceTheRunIsKnown(t *testing.T) {
	t.Parallel()
	f := &fakeAgent{events: []*realmv1.DriveEvent{
		{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_QUEUED, QueuePosition: 1, Lines: []*realmv1.DriveLine{errLine("… waiting for a drive slot (the drive limit is reached)")}},
		{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_STARTED, RunId: "r9", Lines: []*realmv1.DriveLine{out("Realm Agent — Ticket triage v1"), out("Run ID: r9")}},
		{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_STEP_STARTED, Lines: []*realmv1.DriveLine{out("→ [agent] classify")}},
		{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_FINISHED, Outcome: realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED, Lines: []*realmv1.DriveLine{out("Run complete: r9")}},
	}}
	addr := serveAgent(t, f)
	code, stdout, stderr := runAgent(t, "--agent-addr", addr, "--workflow", "triage", "--model", "m", "--detach")
	want := "Realm Agent — Ticket triage v1\nRun ID: r9\nDetached: agent-svc drives run r9 to its end. Follow it: realm run state r9\n"
	if code != 0 || stdout != want || stderr != "… waiting for a drive slot (the drive limit is reached)\n" {
		t.Errorf("code %d stdout %q stderr %q; want 0 %q", code, stdout, stderr, want)
	}
	got := func() *realmv1.DriveRunRequest { f.mu.Lock(); defer f.mu.Unlock(); return f.got }
	if !got().GetDetach() {
		t.Errorf("request = %v, want detach", got())
	}
	code, _, _ = runAgent(t, "--agent-addr", addr, "--workflow", "triage", "--model", "m")
	if got().GetDetach() || code != 0 {
		t.Errorf("without --detach: code %d, request %v", code, got())
	}
}
