package command

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/version"
)

// fakeEngine is a real gRPC EngineService answering canned replies and
// keeping the requests it got: the CLI's formatting and exit codes are
// what these tests check, not the engine.
type fakeEngine struct {
	realmv1.UnimplementedEngineServiceServer

	mu    sync.Mutex
	calls []proto.Message

	validate *realmv1.ValidateWorkflowResponse
	register *realmv1.RegisterWorkflowResponse
	list     *realmv1.ListWorkflowsResponse
	start    *realmv1.StartRunResponse
	step     *realmv1.ExecuteStepResponse
	state    *realmv1.GetRunStateResponse
	runs     []*realmv1.ListRunsResponse // pages, in order
	err      error                       // when set, every call fails with it
}

func (f *fakeEngine) record(m proto.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, m)
	return f.err
}

func (f *fakeEngine) requests() []proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]proto.Message(nil), f.calls...)
}

func (f *fakeEngine) ValidateWorkflow(_ context.Context, r *realmv1.ValidateWorkflowRequest) (*realmv1.ValidateWorkflowResponse, error) {
	return f.validate, f.record(r)
}

func (f *fakeEngine) RegisterWorkflow(_ context.Context, r *realmv1.RegisterWorkflowRequest) (*realmv1.RegisterWorkflowResponse, error) {
	return f.register, f.record(r)
}

func (f *fakeEngine) ListWorkflows(_ context.Context, r *realmv1.ListWorkflowsRequest) (*realmv1.ListWorkflowsResponse, error) {
	return f.list, f.record(r)
}

func (f *fakeEngine) StartRun(_ context.Context, r *realmv1.StartRunRequest) (*realmv1.StartRunResponse, error) {
	return f.start, f.record(r)
}

func (f *fakeEngine) ExecuteStep(_ context.Context, r *realmv1.ExecuteStepRequest) (*realmv1.ExecuteStepResponse, error) {
	return f.step, f.record(r)
}

func (f *fakeEngine) GetRunState(_ context.Context, r *realmv1.GetRunStateRequest) (*realmv1.GetRunStateResponse, error) {
	return f.state, f.record(r)
}

func (f *fakeEngine) ListRuns(_ context.Context, r *realmv1.ListRunsRequest) (*realmv1.ListRunsResponse, error) {
	err := f.record(proto.Clone(r))
	f.mu.Lock()
	defer f.mu.Unlock()
	page := 0
	for i := range f.runs {
		if r.GetPageToken() == "" || f.runs[i].GetNextPageToken() == r.GetPageToken() {
			page = i
			if r.GetPageToken() != "" {
				page = i + 1
			}
			break
		}
	}
	if page >= len(f.runs) {
		return &realmv1.ListRunsResponse{}, err
	}
	return f.runs[page], err
}

// result is what one realm invocation did.
type result struct {
	code           int
	stdout, stderr string
}

// setup starts the fake engine and returns a runner for realm command
// lines against it.
func setup(t *testing.T, f *fakeEngine) func(env map[string]string, args ...string) result {
	t.Helper()
	return runner(startFake(t, f))
}

// startFake serves f on 127.0.0.1:0 until the test ends; it returns the address.
func startFake(t *testing.T, f *fakeEngine) string {
	t.Helper()
	return serveEngine(t, f)
}

// serveEngine serves any EngineService on 127.0.0.1:0 until the test ends;
// it returns the address.
func serveEngine(t *testing.T, f realmv1.EngineServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	realmv1.RegisterEngineServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// runner runs realm command lines against addr (via REALM_ENGINE_ADDR),
// with env added, a fixed clock and UTC as the local zone.
func runner(addr string) func(env map[string]string, args ...string) result {
	return func(env map[string]string, args ...string) result {
		var out, errb bytes.Buffer
		vars := map[string]string{"REALM_ENGINE_ADDR": addr}
		for k, v := range env {
			vars[k] = v
		}
		code := Run(context.Background(), args, Env{
			Stdout:   &out,
			Stderr:   &errb,
			Getenv:   func(k string) string { return vars[k] },
			Location: time.UTC,
			Now:      func() time.Time { return time.Date(2026, 10, 2, 2, 0, 0, 0, time.UTC) },
		})
		return result{code: code, stdout: out.String(), stderr: errb.String()}
	}
}

func assertOneLine(t *testing.T, got, want string) {
	t.Helper()
	if got != want+"\n" {
		t.Errorf("stderr = %q, want the one line %q", got, want)
	}
}

func decodeJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, s)
	}
	return m
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// workflowDir writes a workflow folder with a profile, a non-profile file
// and a workflow_context file, and returns the folder.
func workflowDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "workflow.yaml"), "id: triage\nname: Triage\nversion: 1\nworkflow_context:\n  policy:\n    source:\n      path: docs/policy.txt\nsteps:\n  classify:\n    description: c\n    execution: agent\n    agent_profile: triager\n")
	writeFile(t, filepath.Join(dir, "profiles", "triager.md"), "You triage tickets.")
	writeFile(t, filepath.Join(dir, "profiles", "notes.txt"), "not a profile")
	writeFile(t, filepath.Join(dir, "docs", "policy.txt"), "Refund within 30 days.")
	return dir
}

func TestWorkflowValidate(t *testing.T) {
	t.Parallel()
	valid := &realmv1.ValidateWorkflowResponse{Report: &realmv1.WorkflowReport{
		Valid: true, WorkflowId: "triage", Version: 1, StepCount: 1,
		Diagnostics: []*realmv1.Diagnostic{{Code: "RETRY_NO_TIMEOUT", Severity: "warning", Message: "m", Scope: "step", Step: "classify", Line: 9, Column: 5}},
		Text:        "⚠ step 'classify': retry without timeout\nValid: triage v1 (1 step)\n",
	}}
	invalid := &realmv1.ValidateWorkflowResponse{Report: &realmv1.WorkflowReport{
		Valid: false, WorkflowId: "triage", Errors: []string{"'version' must be a number"},
		Text: "Invalid workflow: 'version' must be a number",
	}}
	tests := []struct {
		name       string
		resp       *realmv1.ValidateWorkflowResponse
		args       func(dir string) []string
		wantCode   int
		wantStdout string
		wantStderr string
		wantCalls  int
	}{
		{
			name:       "accepted workflow prints the engine's report and exits 0",
			resp:       valid,
			args:       func(dir string) []string { return []string{"workflow", "validate", dir} },
			wantStdout: "⚠ step 'classify': retry without timeout\nValid: triage v1 (1 step)\n",
			wantCalls:  1,
		},
		{
			name: "refused workflow prints the report and exits 1",
			resp: invalid,
			args: func(dir string) []string {
				return []string{"workflow", "validate", filepath.Join(dir, "workflow.yaml")}
			},
			wantCode:   1,
			wantStdout: "Invalid workflow: 'version' must be a number\n",
			wantCalls:  1,
		},
		{
			name:       "no path is refused before calling the engine",
			args:       func(string) []string { return []string{"workflow", "validate"} },
			wantCode:   1,
			wantStderr: "Error: provide a workflow path, or --registered <id> to audit a stored definition.\n",
		},
		{
			name:     "unreadable file is reported by the CLI and the engine is not called",
			args:     func(dir string) []string { return []string{"workflow", "validate", filepath.Join(dir, "nope.yaml")} },
			wantCode: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeEngine{validate: tt.resp}
			run := setup(t, f)
			dir := workflowDir(t)
			res := run(nil, tt.args(dir)...)
			if res.code != tt.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", res.code, tt.wantCode, res.stderr)
			}
			if tt.wantStdout != "" && res.stdout != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", res.stdout, tt.wantStdout)
			}
			if res.stderr != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", res.stderr, tt.wantStderr)
			}
			if got := len(f.requests()); got != tt.wantCalls {
				t.Errorf("engine calls = %d, want %d", got, tt.wantCalls)
			}
		})
	}
}

func TestWorkflowValidateUnreadableFileLine(t *testing.T) {
	t.Parallel()
	run := setup(t, &fakeEngine{})
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	res := run(nil, "workflow", "validate", missing)
	want := "Invalid: Failed to read workflow file: open " + missing + ": no such file or directory\n"
	if res.code != 1 || res.stdout != want {
		t.Errorf("got code %d stdout %q, want 1 and %q", res.code, res.stdout, want)
	}
}

func TestWorkflowValidateSendsTheFilesTheWorkflowNames(t *testing.T) {
	t.Parallel()
	f := &fakeEngine{validate: &realmv1.ValidateWorkflowResponse{Report: &realmv1.WorkflowReport{Valid: true, Text: "Valid: triage v1 (1 step)"}}}
	run := setup(t, f)
	dir := workflowDir(t)
	if res := run(nil, "workflow", "validate", "--strict", dir); res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	req := f.requests()[0].(*realmv1.ValidateWorkflowRequest)
	if !req.GetStrict() {
		t.Error("--strict was not sent")
	}
	src := req.GetSource()
	if src.GetPath() != filepath.Join(dir, "workflow.yaml") {
		t.Errorf("path = %q, want the workflow.yaml inside the folder", src.GetPath())
	}
	if !strings.HasPrefix(string(src.GetYaml()), "id: triage") {
		t.Errorf("yaml = %q", src.GetYaml())
	}
	want := map[string]string{
		"profiles/triager.md": "You triage tickets.",
		"docs/policy.txt":     "Refund within 30 days.",
	}
	if len(src.GetFiles()) != len(want) {
		t.Errorf("files = %v, want exactly %v", keys(src.GetFiles()), keys(want))
	}
	for k, v := range want {
		if string(src.GetFiles()[k]) != v {
			t.Errorf("files[%q] = %q, want %q", k, src.GetFiles()[k], v)
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestWorkflowValidateJSON(t *testing.T) {
	t.Parallel()
	f := &fakeEngine{validate: &realmv1.ValidateWorkflowResponse{Report: &realmv1.WorkflowReport{
		Valid: false, WorkflowId: "triage",
		Errors: []string{"Step 'x': unknown key 'dependson'"},
		Diagnostics: []*realmv1.Diagnostic{
			{Code: "UNKNOWN_STEP_KEY", Severity: "error", Message: "unknown key", Scope: "step", Step: "x", Key: "dependson", DidYouMean: "depends_on", Line: 7, Column: 5},
			{Code: "RETRY_NO_TIMEOUT", Severity: "warning", Message: "w", Scope: "step"},
		},
		ExtensionKeys: []string{"x-owner"},
		Text:          "must not be printed with --json",
	}}}
	run := setup(t, f)
	res := run(nil, "workflow", "validate", "--json", "--strict", workflowDir(t))
	if res.code != 1 {
		t.Errorf("exit code = %d, want 1 for a refused workflow", res.code)
	}
	got := decodeJSON(t, res.stdout)
	checks := map[string]any{
		"valid": false, "mode": "file", "workflow_id": "triage", "schema_version": nil,
		"error_count": 1.0, "warning_count": 1.0,
	}
	for k, v := range checks {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	strict := got["strict"].(map[string]any)
	if strict["requested"] != true || strict["failed"] != true {
		t.Errorf("strict = %v, want requested and failed", strict)
	}
	d0 := got["diagnostics"].([]any)[0].(map[string]any)
	if d0["did_you_mean"] != "depends_on" || d0["line"] != 7.0 || d0["key"] != "dependson" {
		t.Errorf("diagnostics[0] = %v", d0)
	}
	d1 := got["diagnostics"].([]any)[1].(map[string]any)
	if _, ok := d1["line"]; ok {
		t.Errorf("diagnostic without a line has one: %v", d1)
	}
	if x := got["extension_keys"].([]any); len(x) != 1 || x[0] != "x-owner" {
		t.Errorf("extension_keys = %v", x)
	}
}

func TestWorkflowRegister(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		resp       *realmv1.RegisterWorkflowResponse
		strict     bool
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{
			name: "stored workflow prints its warnings then the Registered line",
			resp: &realmv1.RegisterWorkflowResponse{Registered: true, StoredVersion: 3, Report: &realmv1.WorkflowReport{
				Valid: true, WorkflowId: "triage", Version: 2, StepCount: 2,
				Text: "⚠ step 'a': something\nValid: triage v2 (2 steps)\n",
			}},
			wantStdout: "⚠ step 'a': something\nRegistered: triage v2 (2 steps)\n",
		},
		{
			name: "the workflow's description stays under the Registered line",
			resp: &realmv1.RegisterWorkflowResponse{Registered: true, Report: &realmv1.WorkflowReport{
				Valid: true, WorkflowId: "triage", Version: 1, StepCount: 4,
				Text: "Valid: triage v1 (4 steps)\n  Classifies an incoming ticket.\n",
			}},
			wantStdout: "Registered: triage v1 (4 steps)\n  Classifies an incoming ticket.\n",
		},
		{
			name: "one step is singular",
			resp: &realmv1.RegisterWorkflowResponse{Registered: true, Report: &realmv1.WorkflowReport{
				Valid: true, WorkflowId: "solo", Version: 1.5, StepCount: 1, Text: "Valid: solo v1.5 (1 step)",
			}},
			wantStdout: "Registered: solo v1.5 (1 step)\n",
		},
		{
			name:   "strict refusal names the warning count",
			strict: true,
			resp: &realmv1.RegisterWorkflowResponse{Registered: false, Report: &realmv1.WorkflowReport{
				Valid: false, WorkflowId: "triage", Version: 1,
				Diagnostics: []*realmv1.Diagnostic{{Code: "RETRY_NO_TIMEOUT", Severity: "warning"}},
				Text:        "⚠ step 'a': retry without timeout\nValid: triage v1 (1 step) — 1 warning; failing due to --strict\n  A description.",
			}},
			wantCode:   1,
			wantStdout: "⚠ step 'a': retry without timeout\n",
			wantStderr: "Error: 'triage' v1 has 1 warning; refusing to register due to --strict\n",
		},
		{
			name: "refused workflow prints the report and exits 1",
			resp: &realmv1.RegisterWorkflowResponse{Report: &realmv1.WorkflowReport{
				Errors: []string{"'version' must be a number"}, Text: "Invalid workflow: 'version' must be a number",
			}},
			wantCode:   1,
			wantStdout: "Invalid workflow: 'version' must be a number\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeEngine{register: tt.resp}
			run := setup(t, f)
			args := []string{"workflow", "register", workflowDir(t)}
			if tt.strict {
				args = append(args, "--strict")
			}
			res := run(nil, args...)
			if res.code != tt.wantCode || res.stdout != tt.wantStdout || res.stderr != tt.wantStderr {
				t.Errorf("got (%d, %q, %q), want (%d, %q, %q)", res.code, res.stdout, res.stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
			if req := f.requests()[0].(*realmv1.RegisterWorkflowRequest); req.GetStrict() != tt.strict {
				t.Errorf("strict sent = %v, want %v", req.GetStrict(), tt.strict)
			}
		})
	}
}

func TestWorkflowList(t *testing.T) {
	t.Parallel()
	two := &realmv1.ListWorkflowsResponse{Status: "ok", Workflows: []*realmv1.WorkflowSummary{
		{Id: "triage", Name: "Ticket triage", Version: 1},
		{Id: "invoice-check", Name: "invoice-check", Version: 2},
	}}
	tests := []struct {
		name       string
		resp       *realmv1.ListWorkflowsResponse
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{
			name: "table sorted by id with a summary line",
			resp: two,
			args: []string{"workflow", "list"},
			wantStdout: "ID             NAME           VERSION\n" +
				"invoice-check  invoice-check  2\n" +
				"triage         Ticket triage  1\n" +
				"\n2 workflows registered.\n",
		},
		{
			name:       "nothing registered",
			resp:       &realmv1.ListWorkflowsResponse{Status: "ok"},
			args:       []string{"workflow", "list"},
			wantStdout: "0 workflows registered.\n",
		},
		{
			name: "one workflow is singular and unreadable copies are warned about",
			resp: &realmv1.ListWorkflowsResponse{Status: "ok",
				Workflows:  []*realmv1.WorkflowSummary{{Id: "a", Name: "A", Version: 1}},
				Unreadable: []*realmv1.UnreadableWorkflow{{Id: "b", Reason: "not JSON"}},
			},
			args:       []string{"workflow", "list"},
			wantStdout: "ID  NAME  VERSION\na   A     1\n\n1 workflow registered.\n",
			wantStderr: "⚠ unreadable: b — not JSON\n",
		},
		{
			name:       "a store error is a refusal",
			resp:       &realmv1.ListWorkflowsResponse{Status: "error", Hint: "Failed to read the workflow store."},
			args:       []string{"workflow", "list"},
			wantCode:   1,
			wantStderr: "Error: Failed to read the workflow store.\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			run := setup(t, &fakeEngine{list: tt.resp})
			res := run(nil, tt.args...)
			if res.code != tt.wantCode || res.stdout != tt.wantStdout || res.stderr != tt.wantStderr {
				t.Errorf("got (%d, %q, %q)\nwant (%d, %q, %q)", res.code, res.stdout, res.stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
}

func TestWorkflowListJSON(t *testing.T) {
	t.Parallel()
	run := setup(t, &fakeEngine{list: &realmv1.ListWorkflowsResponse{Status: "ok",
		Workflows:  []*realmv1.WorkflowSummary{{Id: "z", Name: "Z", Version: 3}, {Id: "a", Name: "A", Version: 1}},
		Unreadable: []*realmv1.UnreadableWorkflow{{Id: "b", Reason: "not JSON"}},
	}})
	res := run(nil, "workflow", "list", "--json")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	got := decodeJSON(t, res.stdout)
	wfs := got["workflows"].([]any)
	if len(wfs) != 2 || wfs[0].(map[string]any)["id"] != "a" || wfs[1].(map[string]any)["version"] != 3.0 {
		t.Errorf("workflows = %v, want a then z", wfs)
	}
	if u := got["unreadable"].([]any); len(u) != 1 || u[0].(map[string]any)["reason"] != "not JSON" {
		t.Errorf("unreadable = %v", u)
	}
	if m, ok := got["mismatched"].([]any); !ok || len(m) != 0 {
		t.Errorf("mismatched = %v, want []", got["mismatched"])
	}
}

func okStart() *realmv1.StartRunResponse {
	return &realmv1.StartRunResponse{Reply: &realmv1.Reply{
		Command: "start_run", RunId: "r1", RunVersion: proto.Int64(0),
		Status:      realmv1.ReplyStatus_REPLY_STATUS_OK,
		ContextHint: "Run 'r1' created for workflow 'triage'. Ready for the agent: 'classify'.",
		RunPhase:    realmv1.RunPhase_RUN_PHASE_RUNNING, Deduped: proto.Bool(false),
	}}
}

func TestRunStart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		resp       *realmv1.StartRunResponse
		env        map[string]string
		args       []string
		wantCode   int
		wantStderr string
		wantCall   bool
		wantJSON   bool
	}{
		{
			name:     "ok reply prints the JSON and exits 0",
			resp:     okStart(),
			args:     []string{"run", "start", "triage", "--params", `{"ticket": 101}`},
			wantCall: true, wantJSON: true,
		},
		{
			name: "error reply prints the JSON and its first error on stderr",
			resp: &realmv1.StartRunResponse{Reply: &realmv1.Reply{
				Command: "start_run", Status: realmv1.ReplyStatus_REPLY_STATUS_ERROR, RunVersion: proto.Int64(0),
				Errors: []string{"Workflow not found: nope"}, ErrorCode: "STATE_WORKFLOW_NOT_FOUND",
				AgentAction: realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER, ContextHint: "Error during start_run.",
			}},
			args:       []string{"run", "start", "nope"},
			wantCode:   1,
			wantStderr: "Workflow not found: nope\n",
			wantCall:   true, wantJSON: true,
		},
		{
			name: "blocked reply with no errors says its context_hint on one line",
			resp: &realmv1.StartRunResponse{Reply: &realmv1.Reply{
				Command: "start_run", Status: realmv1.ReplyStatus_REPLY_STATUS_BLOCKED,
				ContextHint: "Step 'a' cannot be called now:\nit is in flight.",
			}},
			args:       []string{"run", "start", "triage"},
			wantCode:   1,
			wantStderr: "Step 'a' cannot be called now: it is in flight.\n",
			wantCall:   true, wantJSON: true,
		},
		{
			name:       "params that are not a JSON object are refused before any call",
			resp:       okStart(),
			args:       []string{"run", "start", "triage", "--params", `[1,2]`},
			wantCode:   1,
			wantStderr: "Error: --params must be a JSON object: json: cannot unmarshal array into Go value of type map[string]interface {}\n",
		},
		{
			name:       "a REALM_OPERATOR with a control character is refused before any call",
			resp:       okStart(),
			env:        map[string]string{"REALM_OPERATOR": "ana\x07"},
			args:       []string{"run", "start", "triage"},
			wantCode:   1,
			wantStderr: "REALM_OPERATOR: contains a control character; nothing was done. Give a name of at most 200 characters with no control characters, or unset it.\n",
		},
		{
			name:       "a REALM_OPERATOR over 200 characters is refused",
			resp:       okStart(),
			env:        map[string]string{"REALM_OPERATOR": strings.Repeat("x", 201)},
			args:       []string{"run", "start", "triage"},
			wantCode:   1,
			wantStderr: "REALM_OPERATOR: longer than 200 characters; nothing was done. Give a name of at most 200 characters with no control characters, or unset it.\n",
		},
		{
			name:       "a missing workflow argument is a usage error",
			args:       []string{"run", "start"},
			wantCode:   1,
			wantStderr: "Error: accepts 1 arg(s), received 0\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeEngine{start: tt.resp}
			run := setup(t, f)
			res := run(tt.env, tt.args...)
			if res.code != tt.wantCode || res.stderr != tt.wantStderr {
				t.Errorf("got (%d, %q), want (%d, %q)", res.code, res.stderr, tt.wantCode, tt.wantStderr)
			}
			if got := len(f.requests()) > 0; got != tt.wantCall {
				t.Errorf("engine called = %v, want %v", got, tt.wantCall)
			}
			if tt.wantJSON {
				got := decodeJSON(t, res.stdout)
				if got["command"] != "start_run" || got["status"] != strings.ToLower(strings.TrimPrefix(tt.resp.GetReply().GetStatus().String(), "REPLY_STATUS_")) {
					t.Errorf("stdout JSON = %v", got)
				}
				if _, ok := got["next_actions"].([]any); !ok {
					t.Errorf("next_actions missing from %v", got)
				}
			} else if res.stdout != "" {
				t.Errorf("stdout = %q, want nothing", res.stdout)
			}
		})
	}
}

func TestRunStartSendsParamsAndCaller(t *testing.T) {
	t.Parallel()
	f := &fakeEngine{start: okStart()}
	run := setup(t, f)
	res := run(map[string]string{"REALM_OPERATOR": "  ana@laptop  "}, "run", "start", "triage",
		"--params", `{"ticket": 101, "tags": ["a"]}`, "--idempotency-key", "k1", "--on-live-match", "fail")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	req := f.requests()[0].(*realmv1.StartRunRequest)
	if req.GetWorkflowId() != "triage" || req.GetIdempotencyKey() != "k1" || req.GetOnLiveMatch() != "fail" {
		t.Errorf("request = %v", req)
	}
	if req.GetParams().AsMap()["ticket"] != 101.0 {
		t.Errorf("params = %v", req.GetParams().AsMap())
	}
	c := req.GetCaller()
	if c.GetBy() != "ana@laptop" || c.GetBySource() != "ambient" || c.GetChannel() != realmv1.Channel_CHANNEL_RUN {
		t.Errorf("caller = %v, want ana@laptop, ambient, run", c)
	}
}

func TestRunStartDerivesCallerFromOSUser(t *testing.T) {
	t.Parallel()
	f := &fakeEngine{start: okStart()}
	run := setup(t, f)
	if res := run(map[string]string{"REALM_OPERATOR": "   "}, "run", "start", "triage"); res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	c := f.requests()[0].(*realmv1.StartRunRequest).GetCaller()
	if c.GetBySource() != "derived" || !strings.Contains(c.GetBy(), "@") {
		t.Errorf("caller = %v, want <user>@<host> derived (blank REALM_OPERATOR counts as unset)", c)
	}
	if req := f.requests()[0].(*realmv1.StartRunRequest); len(req.GetParams().GetFields()) != 0 {
		t.Errorf("params = %v, want {} by default", req.GetParams())
	}
}

func TestRunStep(t *testing.T) {
	t.Parallel()
	gate := &realmv1.ExecuteStepResponse{Reply: &realmv1.Reply{
		Command: "draft", RunId: "r1", Status: realmv1.ReplyStatus_REPLY_STATUS_CONFIRM_REQUIRED,
		RunPhase: realmv1.RunPhase_RUN_PHASE_GATE_WAITING,
		Gate:     &realmv1.Gate{GateId: "g1", StepName: "draft", Choices: []string{"send", "discard"}},
		NextActions: []*realmv1.NextAction{{
			Instruction:   &realmv1.Instruction{Tool: "submit_human_response", CallWithJson: []byte(`{"choice":"<send|discard>"}`)},
			HumanReadable: "Human review required for step 'draft'.",
		}},
	}}
	f := &fakeEngine{step: gate}
	run := setup(t, f)
	res := run(nil, "run", "step", "r1", "draft", "--params", `{"reply":"We have refunded the charge."}`, "--writer-nonce", "n1")
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("got (%d, %q), want 0 for confirm_required", res.code, res.stderr)
	}
	if !strings.Contains(res.stdout, `"choice": "<send|discard>"`) {
		t.Errorf("stdout escapes or loses the placeholder:\n%s", res.stdout)
	}
	got := decodeJSON(t, res.stdout)
	if got["gate"].(map[string]any)["gate_id"] != "g1" || got["run_phase"] != "gate_waiting" {
		t.Errorf("stdout JSON = %v", got)
	}
	req := f.requests()[0].(*realmv1.ExecuteStepRequest)
	if req.GetRunId() != "r1" || req.GetCommand() != "draft" || req.GetWriterNonce() != "n1" ||
		req.GetParams().AsMap()["reply"] != "We have refunded the charge." || req.GetCaller().GetChannel() != realmv1.Channel_CHANNEL_RUN {
		t.Errorf("request = %v", req)
	}
}

func TestRunStepRefusedAnswerExitsOne(t *testing.T) {
	t.Parallel()
	run := setup(t, &fakeEngine{step: &realmv1.ExecuteStepResponse{Reply: &realmv1.Reply{
		Command: "classify", Status: realmv1.ReplyStatus_REPLY_STATUS_ERROR,
		Errors: []string{"Invalid input for step 'classify'"}, ErrorCode: "VALIDATION_INPUT_SCHEMA",
	}}})
	res := run(nil, "run", "step", "r1", "classify", "--params", `{"category":"x"}`)
	if res.code != 1 {
		t.Errorf("exit code = %d, want 1", res.code)
	}
	assertOneLine(t, res.stderr, "Invalid input for step 'classify'")
	if decodeJSON(t, res.stdout)["error_code"] != "VALIDATION_INPUT_SCHEMA" {
		t.Errorf("stdout = %s", res.stdout)
	}
}

func TestRunState(t *testing.T) {
	t.Parallel()
	state := &realmv1.GetRunStateResponse{State: &realmv1.RunState{
		RunId: "r1", WorkflowId: "triage", RunPhase: realmv1.RunPhase_RUN_PHASE_RUNNING,
		CreatedAt:         timestamppb.New(time.Date(2026, 10, 1, 23, 34, 9, 429_000_000, time.UTC)),
		NextActionsStatus: "ok",
		Extra:             mustStruct(t, map[string]any{"step_claims": []any{}}),
	}}
	f := &fakeEngine{state: state}
	run := setup(t, f)
	res := run(nil, "run", "state", "r1", "--include-steps")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	got := decodeJSON(t, res.stdout)
	if got["run_id"] != "r1" || got["run_phase"] != "running" || got["created_at"] != "2026-10-01T23:34:09.429Z" || got["last_step"] != nil {
		t.Errorf("state JSON = %v", got)
	}
	if _, ok := got["step_claims"]; !ok {
		t.Error("extra keys are not merged at top level")
	}
	if req := f.requests()[0].(*realmv1.GetRunStateRequest); !req.GetIncludeSteps() || req.GetRunId() != "r1" {
		t.Errorf("request = %v", req)
	}
}

func TestRunStateOfAMissingRun(t *testing.T) {
	t.Parallel()
	run := setup(t, &fakeEngine{state: &realmv1.GetRunStateResponse{Refusal: &realmv1.Reply{
		Command: "get_run_state", RunId: "nope", Status: realmv1.ReplyStatus_REPLY_STATUS_ERROR,
		Errors: []string{"Run not found: nope"}, ErrorCode: "STATE_RUN_NOT_FOUND",
	}}})
	res := run(nil, "run", "state", "nope")
	if res.code != 1 || res.stdout != "" {
		t.Errorf("got code %d stdout %q, want 1 and nothing", res.code, res.stdout)
	}
	assertOneLine(t, res.stderr, "Run not found: nope")
}

func summary(id, wf string, phase realmv1.RunPhase, updated time.Time, labels ...string) *realmv1.RunSummary {
	return &realmv1.RunSummary{RunId: id, WorkflowId: wf, RunPhase: phase, UpdatedAt: timestamppb.New(updated), Labels: labels}
}

func TestRunList(t *testing.T) {
	t.Parallel()
	at := func(h, m, s int) time.Time { return time.Date(2026, 10, 2, h, m, s, 0, time.UTC) }
	pages := []*realmv1.ListRunsResponse{
		{Runs: []*realmv1.RunSummary{summary("r-old", "tidy", realmv1.RunPhase_RUN_PHASE_COMPLETED, at(0, 30, 5))}, NextPageToken: "p2"},
		{Runs: []*realmv1.RunSummary{summary("r-new", "gated", realmv1.RunPhase_RUN_PHASE_GATE_WAITING, at(13, 52, 37))}},
	}
	stuckPage := []*realmv1.ListRunsResponse{{Runs: []*realmv1.RunSummary{
		summary("r-idle", "idle", realmv1.RunPhase_RUN_PHASE_RUNNING, time.Date(2026, 9, 30, 2, 0, 0, 0, time.UTC)),
		summary("r-claim", "sync", realmv1.RunPhase_RUN_PHASE_RUNNING, at(0, 31, 0), "fetch=claim_stale"),
	}}}
	tests := []struct {
		name       string
		pages      []*realmv1.ListRunsResponse
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
		check      func(t *testing.T, reqs []proto.Message)
	}{
		{
			name:  "every page, newest change first, local time in en-US form",
			pages: pages,
			args:  []string{"run", "list"},
			wantStdout: "r-new  gated v0  gate_waiting  10/2/2026, 1:52:37 PM  0 step(s)\n" +
				"r-old  tidy v0  completed  10/2/2026, 12:30:05 AM  0 step(s)\n",
			check: func(t *testing.T, reqs []proto.Message) {
				if len(reqs) != 2 || reqs[1].(*realmv1.ListRunsRequest).GetPageToken() != "p2" {
					t.Errorf("requests = %v, want two pages", reqs)
				}
			},
		},
		{
			name:  "json for scripts",
			pages: stuckPage,
			args:  []string{"run", "list", "--json"},
			wantStdout: `{
  "runs": [
    {
      "run_id": "r-idle",
      "run_phase": "running",
      "step_count": 0,
      "updated_at": "2026-09-30T02:00:00.000Z",
      "workflow_id": "idle",
      "workflow_version": 0
    },
    {
      "labels": [
        "fetch=claim_stale"
      ],
      "run_id": "r-claim",
      "run_phase": "running",
      "step_count": 0,
      "updated_at": "2026-10-02T00:31:00.000Z",
      "workflow_id": "sync",
      "workflow_version": 0
    }
  ]
}
`,
		},
		{
			name:       "status and workflow filters are sent",
			pages:      nil,
			args:       []string{"run", "list", "--status", "gate_waiting", "--workflow", "gated"},
			wantStdout: "No runs found for workflow 'gated'.\n",
			check: func(t *testing.T, reqs []proto.Message) {
				r := reqs[0].(*realmv1.ListRunsRequest)
				if r.GetPhase() != realmv1.RunPhase_RUN_PHASE_GATE_WAITING || r.GetWorkflowId() != "gated" || r.GetStuck() {
					t.Errorf("request = %v", r)
				}
			},
		},
		{
			name:       "no runs at all",
			args:       []string{"run", "list"},
			wantStdout: "No runs found.\n",
		},
		{
			name:  "stuck runs with idle age and labels",
			pages: stuckPage,
			args:  []string{"run", "list", "--stuck", "--older-than", "0m"},
			wantStdout: "Stuck runs (threshold 0m):\n" +
				"r-claim  sync v0  running  10/2/2026, 12:31:00 AM  0 step(s)  idle: 1h 29m  fetch=claim_stale\n" +
				"r-idle  idle v0  running  9/30/2026, 2:00:00 AM  0 step(s)  idle: 2d 0h\n",
			check: func(t *testing.T, reqs []proto.Message) {
				r := reqs[0].(*realmv1.ListRunsRequest)
				if !r.GetStuck() || r.GetOlderThanSeconds() != 0 {
					t.Errorf("request = %v", r)
				}
			},
		},
		{
			name:       "no stuck runs uses the default threshold",
			args:       []string{"run", "list", "--stuck", "--workflow", "w"},
			wantStdout: "No stuck runs found for workflow 'w' (threshold 24h).\n",
			check: func(t *testing.T, reqs []proto.Message) {
				if got := reqs[0].(*realmv1.ListRunsRequest).GetOlderThanSeconds(); got != 86400 {
					t.Errorf("older_than_seconds = %d, want 86400", got)
				}
			},
		},
		{
			name:       "unknown status",
			args:       []string{"run", "list", "--status", "done"},
			wantCode:   1,
			wantStderr: "Invalid --status value 'done'. Valid values: running, gate_waiting, completed, failed, abandoned, aborted\n",
		},
		{
			name:       "older-than needs stuck",
			args:       []string{"run", "list", "--older-than", "1h"},
			wantCode:   1,
			wantStderr: "--older-than is only valid with --stuck.\n",
		},
		{
			name:       "stuck excludes status",
			args:       []string{"run", "list", "--stuck", "--status", "running"},
			wantCode:   1,
			wantStderr: "--stuck cannot be combined with --status.\n",
		},
		{
			name:       "a bare 0 is not a duration",
			args:       []string{"run", "list", "--stuck", "--older-than", "0"},
			wantCode:   1,
			wantStderr: "Invalid duration '0'. Use format: <number>(d|h|m), e.g. 30d, 6h, 10m\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeEngine{runs: tt.pages}
			run := setup(t, f)
			res := run(nil, tt.args...)
			if res.code != tt.wantCode || res.stdout != tt.wantStdout || res.stderr != tt.wantStderr {
				t.Errorf("got (%d, %q, %q)\nwant (%d, %q, %q)", res.code, res.stdout, res.stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
			if tt.wantCode != 0 && len(f.requests()) != 0 {
				t.Error("a refused command line called the engine")
			}
			if tt.check != nil {
				tt.check(t, f.requests())
			}
		})
	}
}

func TestEngineNotRunning(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	run := runner(addr)
	for _, args := range [][]string{
		{"workflow", "list"},
		{"run", "start", "triage"},
		{"run", "state", "r1"},
		{"run", "list"},
	} {
		res := run(nil, args...)
		if res.code != ExitUnreachable {
			t.Errorf("%v: exit code = %d, want %d", args, res.code, ExitUnreachable)
		}
		prefix := "Error: cannot reach engine-svc at " + addr + ": "
		if !strings.HasPrefix(res.stderr, prefix) || strings.Count(res.stderr, "\n") != 1 {
			t.Errorf("%v: stderr = %q, want one line starting %q", args, res.stderr, prefix)
		}
		if res.stdout != "" {
			t.Errorf("%v: stdout = %q, want nothing", args, res.stdout)
		}
	}
}

func TestAddrFlagOverridesTheVariable(t *testing.T) {
	t.Parallel()
	f := &fakeEngine{list: &realmv1.ListWorkflowsResponse{Status: "ok"}}
	addr := startFake(t, f)
	// The variable points nowhere; --addr names the running fake.
	res := runner("127.0.0.1:1")(nil, "workflow", "list", "--addr", addr)
	if res.code != 0 || len(f.requests()) != 1 {
		t.Fatalf("exit %d (%s), calls %d: --addr was not used", res.code, res.stderr, len(f.requests()))
	}
}

func TestGRPCErrorWithCatalogueCode(t *testing.T) {
	t.Parallel()
	st, err := status.New(codes.Internal, "the run store is unavailable").WithDetails(&realmv1.ErrorDetail{Code: "ENGINE_STORE_FAILED"})
	if err != nil {
		t.Fatal(err)
	}
	run := setup(t, &fakeEngine{err: st.Err()})
	res := run(nil, "run", "state", "r1")
	if res.code != 1 {
		t.Errorf("exit code = %d, want 1", res.code)
	}
	assertOneLine(t, res.stderr, "Error: the run store is unavailable (ENGINE_STORE_FAILED)")
}

func TestVersionAndUnknownCommand(t *testing.T) {
	t.Parallel()
	run := runner("127.0.0.1:1")
	if res := run(nil, "--version"); res.code != 0 || res.stdout != version.Version+"\n" {
		t.Errorf("--version = (%d, %q), want just the version", res.code, res.stdout)
	}
	res := run(nil, "frobnicate")
	if res.code != 1 || !strings.HasPrefix(res.stderr, "Error: unknown command \"frobnicate\"") || strings.Count(res.stderr, "\n") != 1 {
		t.Errorf("unknown command = (%d, %q)", res.code, res.stderr)
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
