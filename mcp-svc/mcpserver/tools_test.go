package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

var testCaller = &realmv1.Caller{By: "ops@host", BySource: "derived", Channel: realmv1.Channel_CHANNEL_MCP_HTTP}

func newTestServer(f *fakeEngine) *Server {
	return New(Options{Engine: f, EngineAddr: "127.0.0.1:7070", Caller: testCaller, ErrorLog: io.Discard})
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// call runs a tool on JSON arguments and returns its text and error mark.
func call(t testing.TB, s *Server, tool, args string) (string, bool) {
	t.Helper()
	res, err := s.Call(ctxT(t), tool, []byte(args))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content items, want 1", tool, len(res.Content))
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

// seedParams is each tool's parameters as seed "MCP tools" lists them:
// name → JSON type, and whether it is required.
var seedParams = map[string]map[string]struct {
	typ      string
	required bool
}{
	"list_workflows":        {},
	"get_workflow_protocol": {"workflow_id": {"string", true}},
	"start_run": {"workflow_id": {"string", true}, "params": {"object", false}, "idempotency_key": {"string", false},
		"on_live_match": {"string", false}, "on_terminal_match": {"string", false}},
	"start_run_batch": {"workflow_id": {"string", true}, "items": {"array", true}, "max_items": {"integer", false},
		"parent_run_id": {"string", false}, "on_live_match": {"string", false}, "on_terminal_match": {"string", false}},
	"execute_step": {"run_id": {"string", true}, "command": {"string", true}, "params": {"object", false},
		"trace": {"array", false}, "writer_nonce": {"string", false}},
	"submit_human_response": {"run_id": {"string", true}, "gate_id": {"string", true}, "choice": {"string", true},
		"responded_by": {"string", false}, "claim_token": {"string", false}},
	"advance_run":     {"run_id": {"string", true}},
	"get_run_state":   {"run_id": {"string", true}, "include_steps": {"boolean", false}},
	"abandon_run":     {"run_id": {"string", true}, "reason": {"string", false}},
	"create_workflow": {"steps": {"array", true}, "metadata": {"object", false}},
	"append_trace": {"run_id": {"string", true}, "step_id": {"string", true}, "entries": {"array", true},
		"writer_nonce": {"string", false}},
}

func TestToolsListShowsTheElevenToolsWithTheSeedsParameters(t *testing.T) {
	t.Parallel()
	s := newTestServer(&fakeEngine{})
	st, ct := mcp.NewInMemoryTransports()
	if _, err := s.MCP().Connect(ctxT(t), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(ctxT(t), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ServerInfo.Name; got != "realm" {
		t.Errorf("serverInfo.name = %q, want realm", got)
	}
	list, err := cs.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) != 11 {
		t.Fatalf("%d tools, want 11", len(list.Tools))
	}
	for _, tool := range list.Tools {
		want, ok := seedParams[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %q", tool.Name)
			continue
		}
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
		schema := tool.InputSchema.(map[string]any)
		props, _ := schema["properties"].(map[string]any)
		var required []string
		for _, r := range schema["required"].([]any) {
			required = append(required, r.(string))
		}
		if len(props) != len(want) {
			t.Errorf("%s: %d parameters, want %d", tool.Name, len(props), len(want))
		}
		for name, w := range want {
			p, ok := props[name].(map[string]any)
			if !ok {
				t.Errorf("%s: no parameter %s", tool.Name, name)
				continue
			}
			if p["type"] != w.typ {
				t.Errorf("%s.%s: type %v, want %s", tool.Name, name, p["type"], w.typ)
			}
			if slices.Contains(required, name) != w.required {
				t.Errorf("%s.%s: required = %v, want %v", tool.Name, name, !w.required, w.required)
			}
		}
	}
}

func TestMissingOrMistypedArgumentIsAnMCPErrorNamingIt(t *testing.T) {
	t.Parallel()
	const prefix = "MCP error -32602: Input validation error: Invalid arguments for tool "
	cases := []struct {
		name, tool, args, want string
	}{
		{"missing command", "execute_step", `{"run_id":"r"}`, prefix + "execute_step: Required at command"},
		{"no arguments at all", "get_run_state", ``, prefix + "get_run_state: Required at run_id"},
		{"number for text", "start_run", `{"workflow_id":5}`, prefix + "start_run: Expected string, received number at workflow_id"},
		{"text for object", "start_run", `{"workflow_id":"w","params":"x"}`, prefix + "start_run: Expected object, received string at params"},
		{"null for optional text", "submit_human_response", `{"run_id":"r","gate_id":"g","choice":"c","claim_token":null}`,
			prefix + "submit_human_response: Expected string, received null at claim_token"},
		{"two problems", "append_trace", `{"run_id":1}`, prefix + "append_trace: Expected string, received number at run_id; Required at step_id; Required at entries"},
		{"batch item without params", "start_run_batch", `{"workflow_id":"w","items":[{"idempotency_key":"k"}]}`, prefix + "start_run_batch: Required at items.0.params"},
		{"fractional max_items", "start_run_batch", `{"workflow_id":"w","items":[],"max_items":1.5}`, prefix + "start_run_batch: Expected integer, received float at max_items"},
		{"no steps", "create_workflow", `{"steps":[]}`, prefix + "create_workflow: Array must contain at least 1 element(s) at steps"},
		{"step without description", "create_workflow", `{"steps":[{"id":"a"}]}`, prefix + "create_workflow: Required at steps.0.description"},
		{"nested trace data", "execute_step", `{"run_id":"r","command":"c","trace":[{"event":"e","data":{"x":{}}}]}`,
			prefix + "execute_step: Expected string | number | boolean | null, received object at trace.0.data.x"},
		{"bool as text", "get_run_state", `{"run_id":"r","include_steps":"yes"}`, prefix + "get_run_state: Expected boolean, received string at include_steps"},
		{"arguments not an object", "advance_run", `["r"]`, prefix + "advance_run: Expected object, received array"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeEngine{}
			text, isErr := call(t, newTestServer(f), tc.tool, tc.args)
			if !isErr || text != tc.want {
				t.Errorf("got (%v) %q\nwant (true) %q", isErr, text, tc.want)
			}
			if f.request() != nil {
				t.Errorf("the engine was called: %v", f.request())
			}
		})
	}
}

func TestUnknownArgumentsAreIgnoredExceptWhereTheEngineNamesThem(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, tool, args string
		want             proto.Message
	}{
		{"start_run ignores idempotencyKey", "start_run", `{"workflow_id":"w","idempotencyKey":"k"}`,
			&realmv1.StartRunRequest{WorkflowId: "w", Params: emptyStruct(), Caller: testCaller}},
		{"advance_run passes them in order", "advance_run", `{"zeta":1,"run_id":"r","alpha":2}`,
			&realmv1.AdvanceRunRequest{RunId: "r", UnknownArguments: []string{"zeta", "alpha"}, Caller: testCaller}},
		{"submit_human_response passes claimToken", "submit_human_response", `{"run_id":"r","gate_id":"g","choice":"send","claimToken":"t"}`,
			&realmv1.SubmitHumanResponseRequest{RunId: "r", GateId: "g", Choice: "send", UnknownArguments: []string{"claimToken"}, Caller: testCaller}},
		{"create_workflow passes top-level keys", "create_workflow", `{"steps":[{"id":"a","description":"d","handler":"h"}],"workflow_id":"x","name":"n"}`,
			&realmv1.CreateWorkflowRequest{Steps: mustList(`[{"id":"a","description":"d","handler":"h"}]`), UnknownArguments: []string{"workflow_id", "name"}, Caller: testCaller}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeEngine{}
			if text, isErr := call(t, newTestServer(f), tc.tool, tc.args); isErr {
				t.Fatalf("tool error: %s", text)
			}
			if !proto.Equal(f.request(), tc.want) {
				t.Errorf("request\n got %v\nwant %v", f.request(), tc.want)
			}
		})
	}
}

func TestArgumentsMapFieldForFieldOntoTheRequest(t *testing.T) {
	t.Parallel()
	one := int32(3)
	by, token := "Ana", "tok"
	cases := []struct {
		name, tool, args string
		want             proto.Message
	}{
		{"execute_step", "execute_step",
			`{"run_id":"r","command":"classify","params":{"category":"billing"},"writer_nonce":"n","trace":[{"event":"e","timestamp":"t","data":{"k":1},"extra":true}]}`,
			&realmv1.ExecuteStepRequest{RunId: "r", Command: "classify", ParamsJson: []byte(`{"category":"billing"}`), WriterNonce: "n",
				Trace: []*realmv1.TraceEntry{{Event: "e", Timestamp: "t", Data: mustStruct(`{"k":1}`)}}, Caller: testCaller}},
		{"start_run_batch", "start_run_batch",
			`{"workflow_id":"w","items":[{"params":{"ticket":201},"idempotency_key":"k"}],"max_items":3,"parent_run_id":"p","on_live_match":"fail","on_terminal_match":"rerun"}`,
			&realmv1.StartRunBatchRequest{WorkflowId: "w", Items: []*realmv1.BatchItem{{Params: mustStruct(`{"ticket":201}`), IdempotencyKey: "k"}},
				MaxItems: &one, ParentRunId: "p", OnLiveMatch: "fail", OnTerminalMatch: "rerun", Caller: testCaller}},
		{"submit_human_response with optional fields", "submit_human_response",
			`{"run_id":"r","gate_id":"g","choice":"send","responded_by":"Ana","claim_token":"tok"}`,
			&realmv1.SubmitHumanResponseRequest{RunId: "r", GateId: "g", Choice: "send", RespondedBy: &by, ClaimToken: &token, Caller: testCaller}},
		{"get_run_state", "get_run_state", `{"run_id":"r","include_steps":true}`, &realmv1.GetRunStateRequest{RunId: "r", IncludeSteps: true}},
		{"abandon_run", "abandon_run", `{"run_id":"r","reason":"why"}`, &realmv1.AbandonRunRequest{RunId: "r", Reason: "why", Caller: testCaller}},
		{"append_trace", "append_trace", `{"run_id":"r","step_id":"s","entries":[{"event":"e"}],"writer_nonce":"n"}`,
			&realmv1.AppendTraceRequest{RunId: "r", StepId: "s", Entries: []*realmv1.TraceEntry{{Event: "e"}}, WriterNonce: "n", Caller: testCaller}},
		{"create_workflow with metadata", "create_workflow", `{"steps":[{"id":"a","description":"d"}],"metadata":{"name":"n"}}`,
			&realmv1.CreateWorkflowRequest{Steps: mustList(`[{"id":"a","description":"d"}]`), Metadata: mustStruct(`{"name":"n"}`), Caller: testCaller}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeEngine{}
			if text, isErr := call(t, newTestServer(f), tc.tool, tc.args); isErr {
				t.Fatalf("tool error: %s", text)
			}
			if !proto.Equal(f.request(), tc.want) {
				t.Errorf("request\n got %v\nwant %v", f.request(), tc.want)
			}
		})
	}
}

func TestRepliesAreOneTextItemOfTheSeedsJSON(t *testing.T) {
	t.Parallel()
	cases := []struct {
		tool, args string
		want       map[string]any // fields that must be there, with these values
	}{
		{"list_workflows", `{}`, map[string]any{"status": "ok", "hint": "h", "unreadable": []any{}}},
		{"get_workflow_protocol", `{"workflow_id":"triage"}`, map[string]any{"workflow_id": "triage"}},
		{"start_run", `{"workflow_id":"w"}`, map[string]any{"command": "start_run", "status": "ok", "run_version": 0.0, "context_hint": "<hint>", "next_actions": []any{}}},
		{"start_run_batch", `{"workflow_id":"w","items":[{"params":{}}]}`, map[string]any{"failed": []any{}}},
		{"get_run_state", `{"run_id":"r1"}`, map[string]any{"run_id": "r1", "run_phase": "running", "last_step": nil}},
		{"abandon_run", `{"run_id":"r1"}`, map[string]any{"run_id": "r1", "run_phase": "abandoned", "terminal_state": true}},
		{"append_trace", `{"run_id":"r","step_id":"s","entries":[{"event":"e"}]}`, map[string]any{"status": "ok", "buffer_count": 1.0}},
	}
	for _, tc := range cases {
		t.Run(tc.tool, func(t *testing.T) {
			t.Parallel()
			text, isErr := call(t, newTestServer(&fakeEngine{}), tc.tool, tc.args)
			if isErr {
				t.Fatalf("tool error: %s", text)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(text), &got); err != nil {
				t.Fatalf("not a JSON object: %s", text)
			}
			for k, v := range tc.want {
				if g, ok := got[k]; !ok || !jsonEqual(g, v) {
					t.Errorf("%s = %v, want %v (reply %s)", k, g, v, text)
				}
			}
		})
	}
	// Placeholders reach the model as written, not \u003c-escaped.
	if text, _ := call(t, newTestServer(&fakeEngine{}), "start_run", `{"workflow_id":"w"}`); !strings.Contains(text, `"<hint>"`) {
		t.Errorf("HTML-escaped reply: %s", text)
	}
}

func TestEngineFailuresBecomeToolErrors(t *testing.T) {
	t.Parallel()
	notFound := errcode.ToStatus(errcode.New(errcode.StateWorkflowNotFound, "Workflow not found: nope")).Err()
	cases := []struct {
		name, tool, args string
		err              error
		want             string
	}{
		{"unknown workflow id", "get_workflow_protocol", `{"workflow_id":"nope"}`, notFound, "Error: Workflow not found: nope"},
		{"not implemented yet", "append_trace", `{"run_id":"r","step_id":"s","entries":[]}`, status.Error(codes.Unimplemented, "method AppendTrace not implemented"),
			"Error: append_trace is not available: engine-svc does not implement it yet (gRPC Unimplemented)."},
		{"engine down", "start_run", `{"workflow_id":"w"}`, status.Error(codes.Unavailable, "connection refused"),
			"Error: cannot reach engine-svc at 127.0.0.1:7070: connection refused"},
		{"bad request", "execute_step", `{"run_id":"r","command":""}`, status.Error(codes.InvalidArgument, "command is required"), "Error: command is required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			text, isErr := call(t, newTestServer(&fakeEngine{err: tc.err}), tc.tool, tc.args)
			if !isErr || text != tc.want {
				t.Errorf("got (%v) %q, want (true) %q", isErr, text, tc.want)
			}
		})
	}
}

func TestListWorkflowsRefusesWithItsOwnFields(t *testing.T) {
	t.Parallel()
	err := errcode.ToStatus(errcode.New(errcode.StateWorkflowUnreadable, "registry unreadable")).Err()
	text, isErr := call(t, newTestServer(&fakeEngine{err: err}), "list_workflows", `{}`)
	if isErr {
		t.Fatalf("marked as an MCP error: %s", text)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(text), &got); err != nil {
		t.Fatal(err)
	}
	if got["status"] != "error" || got["error_code"] != "STATE_WORKFLOW_UNREADABLE" || !jsonEqual(got["workflows"], []any{}) ||
		!jsonEqual(got["errors"], []any{"registry unreadable"}) || got["agent_action"] == nil {
		t.Errorf("reply %s", text)
	}
}

func TestAmbientCallerNamesTheProgram(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	c, err := AmbientCaller(env(map[string]string{"REALM_OPERATOR": " ops-bot "}), realmv1.Channel_CHANNEL_MCP_STDIO)
	if err != nil || c.GetBy() != "ops-bot" || c.GetBySource() != "ambient" || c.GetChannel() != realmv1.Channel_CHANNEL_MCP_STDIO {
		t.Errorf("ambient: %v %v", c, err)
	}
	c, err = AmbientCaller(env(nil), realmv1.Channel_CHANNEL_MCP_HTTP)
	if err != nil || c.GetBySource() != "derived" || !strings.Contains(c.GetBy(), "@") {
		t.Errorf("derived: %v %v", c, err)
	}
	if _, err := AmbientCaller(env(map[string]string{"REALM_OPERATOR": "a\x07b"}), realmv1.Channel_CHANNEL_MCP_HTTP); err == nil ||
		!strings.Contains(err.Error(), "contains a control character") {
		t.Errorf("control character accepted: %v", err)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
