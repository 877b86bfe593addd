package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/realm-go/realm/agent-svc/internal/server"
	"github.com/realm-go/realm/agent-svc/internal/tools/toolstest"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// call is one tool call a scripted model asks for.
type call struct {
	name string
	args map[string]any
}

// turn is a scripted model turn: tool calls, else an answer (through the
// submit tool on Anthropic, as JSON text on OpenAI), else raw text.
type turn struct {
	calls  []call
	answer map[string]any
	text   string
	// thinking, when set, leads the turn as a thinking block (Anthropic).
	thinking string
}

// toolStub is a model service that follows a script of turns and keeps
// every request body.
type toolStub struct {
	kind   string
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []map[string]any
	// hold, when set, holds request n (1-based) until the request ends.
	hold int
	// refuse, when set, answers 400 to the requests it picks (or
	// refuseStatus with refuseBody, when set).
	refuse       func(body map[string]any) bool
	refuseStatus int
	refuseBody   string
}

func (s *toolStub) requests() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.bodies...)
}

func newToolStub(t *testing.T, kind string, script func(n int, body map[string]any) turn) *toolStub {
	t.Helper()
	s := &toolStub{kind: kind}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		s.mu.Lock()
		s.bodies = append(s.bodies, body)
		n := len(s.bodies)
		hold, refuse, status, errBody := s.hold, s.refuse, s.refuseStatus, s.refuseBody
		s.mu.Unlock()
		if n == hold {
			<-r.Context().Done()
			return
		}
		if refuse != nil && refuse(body) {
			w.Header().Set("Content-Type", "application/json")
			if status != 0 {
				w.Header().Set("retry-after-ms", "1")
				w.WriteHeader(status)
				_, _ = io.WriteString(w, errBody)
				return
			}
			w.WriteHeader(http.StatusBadRequest)
			if kind == "anthropic" {
				_, _ = io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"strict tools rejected"}}`)
			} else {
				_, _ = io.WriteString(w, `{"error":{"message":"strict tools rejected","type":"invalid_request_error","param":null,"code":null}}`)
			}
			return
		}
		tr := script(n, body)
		w.Header().Set("Content-Type", "application/json")
		if kind == "anthropic" {
			var content []any
			stop := "end_turn"
			if tr.thinking != "" {
				content = append(content, map[string]any{"type": "thinking", "thinking": tr.thinking, "signature": "sig"})
			}
			for i, c := range tr.calls {
				content = append(content, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d_%d", n, i), "name": c.name, "input": orEmpty(c.args)})
				stop = "tool_use"
			}
			if tr.answer != nil {
				content = append(content, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d_submit", n), "name": "__realm_submit__", "input": tr.answer})
				stop = "tool_use"
			}
			if tr.text != "" {
				content = append(content, map[string]any{"type": "text", "text": tr.text})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{
				"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "content": content,
				"stop_reason": stop, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 40, "output_tokens": 7},
			})
			return
		}
		msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
		finish := "stop"
		if len(tr.calls) > 0 {
			var calls []any
			for i, c := range tr.calls {
				args, _ := json.Marshal(orEmpty(c.args))
				calls = append(calls, map[string]any{"id": fmt.Sprintf("call_%d_%d", n, i), "type": "function",
					"function": map[string]any{"name": c.name, "arguments": string(args)}})
			}
			msg["tool_calls"], finish = calls, "tool_calls"
		}
		switch {
		case tr.answer != nil:
			b, _ := json.Marshal(tr.answer)
			msg["content"] = string(b)
		case tr.text != "":
			msg["content"] = tr.text
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
			"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "logprobs": nil, "message": msg}},
			"usage":   map[string]any{"prompt_tokens": 40, "completion_tokens": 7, "total_tokens": 47},
		})
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// toolNames are the tools a request offered.
func toolNames(kind string, body map[string]any) []string {
	var out []string
	list, _ := body["tools"].([]any)
	for _, t := range list {
		m, _ := t.(map[string]any)
		if kind == "openai" {
			m, _ = m["function"].(map[string]any)
		}
		name, _ := m["name"].(string)
		out = append(out, name)
	}
	return out
}

// told is what the request's last turn told the model: each tool answer
// and the user's text after them, in order.
func told(kind string, body map[string]any) []string {
	msgs, _ := body["messages"].([]any)
	var out []string
	if kind == "anthropic" {
		m, _ := msgs[len(msgs)-1].(map[string]any)
		blocks, _ := m["content"].([]any)
		for _, b := range blocks {
			bm, _ := b.(map[string]any)
			switch bm["type"] {
			case "text":
				out = append(out, bm["text"].(string))
			case "tool_result":
				switch c := bm["content"].(type) {
				case string:
					out = append(out, c)
				case []any:
					for _, p := range c {
						out = append(out, p.(map[string]any)["text"].(string))
					}
				}
			}
		}
		return out
	}
	// OpenAI: the messages after the last assistant message.
	start := 0
	for i, m := range msgs {
		if m.(map[string]any)["role"] == "assistant" {
			start = i + 1
		}
	}
	for _, m := range msgs[start:] {
		mm := m.(map[string]any)
		if s, ok := mm["content"].(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// toolSetup is an engine, a stub model of kind following script, an
// agent-svc with environment env, and the notes servers: the stdio
// program (server "notes") and the HTTP one (server "web").
type toolSetup struct {
	eng   realmv1.EngineServiceClient
	agent realmv1.AgentServiceClient
	stub  *toolStub
	bin   string
	web   string
	kind  string
}

var toolEnv = []string{"NOTES_TOKEN=notes-secret-value", "WEB_TOKEN=web-secret-value", "PATH=/usr/bin:/bin"}

func setupTools(t *testing.T, kind string, env []string, script func(n int, body map[string]any) turn) *toolSetup {
	t.Helper()
	s := &toolSetup{kind: kind, bin: toolstest.Build(t), web: toolstest.ServeHTTP(t, "web-secret-value")}
	s.eng = startEngine(t)
	s.stub = newToolStub(t, kind, script)
	services := anthropicAt(s.stub.srv.URL)
	if kind == "openai" {
		services = openaiAt(s.stub.srv.URL)
	}
	s.agent = startAgent(t, server.Config{Engine: s.eng, Services: services, Environ: env})
	return s
}

// workflow is a one-step workflow whose step declares tools, with extra
// step keys (YAML lines, indented 4).
func (s *toolSetup) workflow(extra string, tools ...string) *realmv1.WorkflowSource {
	y := fmt.Sprintf(`id: tooly
name: Tooly
version: 1
mcp_servers:
  - id: notes
    transport: stdio
    command: %q
    env: { NOTES_TOKEN: '${NOTES_TOKEN}' }
  - id: web
    transport: http
    url: %q
    headers: { Authorization: 'Bearer ${WEB_TOKEN}' }
steps:
  answer:
    description: Answer from the notes.
    execution: agent
    prompt: "What is the invoice total?"
    input_schema:
      type: object
      additionalProperties: false
      required: [answer]
      properties:
        answer: { type: string }
    tools: [%s]
%s`, s.bin, s.web+"/", "'"+strings.Join(tools, "', '")+"'", extra)
	return &realmv1.WorkflowSource{Yaml: []byte(y), Path: "tooly.yaml"}
}

func (s *toolSetup) drive(t *testing.T, src *realmv1.WorkflowSource) []*realmv1.DriveEvent {
	t.Helper()
	return drive(t, s.agent, &realmv1.DriveRunRequest{WorkflowSource: src, Options: opts(s.kind, "test-model")}, nil)
}

// attempt is include_steps' first attempt of the step answer.
func (s *toolSetup) attempt(t *testing.T, run string) map[string]any {
	t.Helper()
	resp, err := s.eng.GetRunState(ctx(t), &realmv1.GetRunStateRequest{RunId: run, IncludeSteps: true})
	if err != nil {
		t.Fatal(err)
	}
	steps, _ := resp.GetState().GetExtra().AsMap()["steps"].(map[string]any)
	st, _ := steps["answer"].(map[string]any)
	list, _ := st["attempts"].([]any)
	if len(list) == 0 {
		t.Fatalf("no attempt recorded: %v", resp.GetState().GetExtra().AsMap())
	}
	return list[0].(map[string]any)
}

func callsOf(a map[string]any) []map[string]any {
	list, _ := a["tool_calls"].([]any)
	var out []map[string]any
	for _, c := range list {
		out = append(out, c.(map[string]any))
	}
	return out
}

func completed(t *testing.T, evs []*realmv1.DriveEvent) string {
	t.Helper()
	end := last(evs)
	if end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
		t.Fatalf("drive did not complete: %v\n%s", end, texts(evs))
	}
	return end.GetRunId()
}

func TestAToolStepThatNeedsTwoCallsCompletesWithBothInItsEvidence(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"anthropic", "openai"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			s := setupTools(t, kind, toolEnv, func(n int, _ map[string]any) turn {
				switch n {
				case 1:
					return turn{calls: []call{{"read_note", map[string]any{"name": "inv"}}}}
				case 2:
					return turn{calls: []call{{"search", map[string]any{"name": "total"}}}}
				}
				return turn{answer: map[string]any{"answer": "120"}}
			})
			run := completed(t, s.drive(t, s.workflow("", "notes:read_note", "web:search")))
			reqs := s.stub.requests()
			if len(reqs) != 3 {
				t.Fatalf("%d model requests, want 3", len(reqs))
			}
			want := "read_note,search"
			if kind == "anthropic" {
				want += ",__realm_submit__"
			}
			if got := strings.Join(toolNames(kind, reqs[0]), ","); got != want {
				t.Errorf("tools offered %q, want %q", got, want)
			}
			if got := told(kind, reqs[1]); len(got) != 1 || got[0] != "note inv: the invoice total is 120" {
				t.Errorf("model was told %q after the first call", got)
			}
			if got := told(kind, reqs[2]); len(got) != 1 || got[0] != `{"hits":["total-1","total-2"]}` {
				t.Errorf("model was told %q after the second call", got)
			}
			a := s.attempt(t, run)
			calls := callsOf(a)
			if len(calls) != 2 || calls[0]["server_id"] != "notes" || calls[0]["tool"] != "read_note" ||
				calls[0]["result"] != "note inv: the invoice total is 120" || calls[1]["server_id"] != "web" || calls[1]["tool"] != "search" {
				t.Fatalf("tool_calls = %v", calls)
			}
			if args, _ := calls[0]["args"].(map[string]any); args["name"] != "inv" {
				t.Errorf("args = %v", calls[0]["args"])
			}
			if hits, _ := calls[1]["result"].(map[string]any)["hits"].([]any); len(hits) != 2 {
				t.Errorf("a JSON result is kept as JSON: %v", calls[1]["result"])
			}
			if _, ok := a["cost"]; !ok {
				t.Errorf("a tool-calling step's usage is recorded here: %v", a)
			}
			ins, err := s.eng.InspectRun(ctx(t), &realmv1.InspectRunRequest{RunId: run})
			if err != nil {
				t.Fatal(err)
			}
			if txt := ins.GetText(); !strings.Contains(txt, "Tool calls (2):") || !strings.Contains(txt, "[notes:read_note]") || !strings.Contains(txt, "[web:search]") {
				t.Errorf("inspect shows no tool calls:\n%s", txt)
			}
		})
	}
}

// oneCallThen is a script: the calls first, then the answer.
func oneCallThen(calls ...call) func(int, map[string]any) turn {
	return func(n int, _ map[string]any) turn {
		if n == 1 {
			return turn{calls: calls}
		}
		return turn{answer: map[string]any{"answer": "done"}}
	}
}

func TestToolCallOutcomesAreToldToTheModelAndRecorded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, kind, extra string
		tools             []string
		call              call
		told              string
		recorded          string // error recorded, "" for a result
		result            string
	}{
		{name: "a call past its timeout", kind: "anthropic", extra: "    tool_timeout: 1\n", tools: []string{"notes:slow"},
			call: call{"slow", map[string]any{"ms": 5000}}, told: "Error: tool call timed out after 1000ms", recorded: "tool call timed out after 1000ms"},
		{name: "a failing tool", kind: "openai", tools: []string{"notes:fail"},
			call: call{"fail", nil}, told: "Error: the notes backend refused the request", recorded: "the notes backend refused the request"},
		{name: "a tool the step was not given", kind: "anthropic", tools: []string{"notes:read_note"},
			call: call{"delete_everything", nil}, told: "Error: tool 'delete_everything' is not one of this step's tools",
			recorded: "tool 'delete_everything' is not one of this step's tools"},
		{name: "a declared tool of the other server is not given either", kind: "openai", tools: []string{"web:search"},
			call: call{"read_note", map[string]any{"name": "a"}}, told: "Error: tool 'read_note' is not one of this step's tools",
			recorded: "tool 'read_note' is not one of this step's tools"},
		{name: "a secret a tool returns is redacted", kind: "openai", tools: []string{"notes:leak"},
			call: call{"leak", nil}, told: "token is [REDACTED]", result: "token is [REDACTED]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setupTools(t, tt.kind, toolEnv, oneCallThen(tt.call))
			run := completed(t, s.drive(t, s.workflow(tt.extra, tt.tools...)))
			reqs := s.stub.requests()
			if got := told(tt.kind, reqs[1]); len(got) != 1 || got[0] != tt.told {
				t.Errorf("model was told %q, want %q", got, tt.told)
			}
			calls := callsOf(s.attempt(t, run))
			if len(calls) != 1 {
				t.Fatalf("tool_calls = %v", calls)
			}
			c := calls[0]
			if tt.recorded != "" && (c["error"] != tt.recorded || c["result"] != nil) {
				t.Errorf("recorded %v, want error %q and no result", c, tt.recorded)
			}
			if tt.result != "" && (c["result"] != tt.result || c["error"] != nil) {
				t.Errorf("recorded %v, want result %q", c, tt.result)
			}
			if strings.Contains(fmt.Sprint(c), "notes-secret-value") {
				t.Errorf("the secret reached the record: %v", c)
			}
		})
	}
}

func TestASpentBudgetAsksForTheFinalAnswerWithoutTools(t *testing.T) {
	t.Parallel()
	const sentence = "You have reached the maximum number of tool calls. Produce your final JSON answer now using only what you have already gathered. No further tool calls will be executed."
	tests := []struct {
		name, kind, extra string
		calls             []call
		executed          int
		told              []string
	}{
		{name: "max_tool_calls", kind: "anthropic", extra: "    max_tool_calls: 2\n",
			calls:    []call{{"read_note", map[string]any{"name": "a"}}, {"read_note", map[string]any{"name": "b"}}, {"read_note", map[string]any{"name": "c"}}},
			executed: 2,
			told:     []string{"note a: the invoice total is 120", "note b: the invoice total is 120", "Error: tool call budget exhausted", sentence}},
		{name: "max_fan_out", kind: "openai", extra: "    max_fan_out: 1\n",
			calls:    []call{{"start_run", map[string]any{"workflow": "w"}}, {"start_run", map[string]any{"workflow": "w"}}},
			executed: 1,
			told:     []string{"started run-of-x", "Error: tool call budget exhausted", sentence}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setupTools(t, tt.kind, toolEnv, oneCallThen(tt.calls...))
			run := completed(t, s.drive(t, s.workflow(tt.extra, "notes:read_note", "notes:start_run")))
			reqs := s.stub.requests()
			if len(reqs) != 2 {
				t.Fatalf("%d model requests, want 2", len(reqs))
			}
			if got := told(tt.kind, reqs[1]); strings.Join(got, "|") != strings.Join(tt.told, "|") {
				t.Errorf("model was told\n%q\nwant\n%q", got, tt.told)
			}
			want := ""
			if tt.kind == "anthropic" {
				want = "__realm_submit__"
			}
			if got := strings.Join(toolNames(tt.kind, reqs[1]), ","); got != want {
				t.Errorf("final request offered %q, want %q", got, want)
			}
			if calls := callsOf(s.attempt(t, run)); len(calls) != tt.executed {
				t.Errorf("%d calls recorded, want %d: %v", len(calls), tt.executed, calls)
			}
		})
	}
}

func TestAnAnswerThatMissesTheSchemaIsCorrectedInTheConversation(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"anthropic", "openai"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			s := setupTools(t, kind, toolEnv, func(n int, _ map[string]any) turn {
				if n == 1 {
					return turn{answer: map[string]any{"answer": 5}}
				}
				return turn{answer: map[string]any{"answer": "120"}}
			})
			evs := s.drive(t, s.workflow("", "notes:read_note"))
			completed(t, evs)
			if !strings.Contains(texts(evs), "  ⚠ output rejected (in-conversation); correcting (1)\n") {
				t.Errorf("no correction line:\n%s", texts(evs))
			}
			reqs := s.stub.requests()
			want := "Your response did not match the required JSON schema: - /answer: must be string [type]. Try again."
			if got := told(kind, reqs[1]); len(got) != 1 || got[0] != want {
				t.Errorf("model was told %q, want %q", got, want)
			}
		})
	}
}

func TestToolStepsRefusedBeforeAnyModelCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		env   []string
		tools []string
		code  string
		line  string
	}{
		{name: "a tool the server lacks", env: toolEnv, tools: []string{"notes:read_pdf"}, code: "MCP_TOOL_NOT_FOUND",
			line: "✗ Step 'answer' (tools) failed: Step 'answer' declares tool 'notes:read_pdf' which is not exposed by MCP server 'notes'. Check the tool name against the server's published tool list."},
		{name: "one bare name from two servers", env: toolEnv, tools: []string{"notes:search", "web:search"}, code: "MCP_TOOL_NAME_COLLISION",
			line: "✗ Step 'answer' (tools) failed: Step 'answer' declares tool 'search' from both MCP server 'notes' and MCP server 'web'."},
		{name: "an unset env var", env: []string{"WEB_TOKEN=web-secret-value"}, tools: []string{"notes:read_note"}, code: "MCP_CONNECTION_FAILED",
			line: "✗ Step 'answer' (tools) failed: MCP server 'notes': env var NOTES_TOKEN is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := setupTools(t, "openai", tt.env, oneCallThen())
			evs := s.drive(t, s.workflow("", tt.tools...))
			if n := len(s.stub.requests()); n != 0 {
				t.Fatalf("%d model requests, want none", n)
			}
			if !strings.Contains(texts(evs), tt.line) {
				t.Errorf("no line %q:\n%s", tt.line, texts(evs))
			}
			var code string
			for _, e := range evs {
				if f := e.GetFailure(); f != nil {
					code = f.GetCode()
				}
			}
			if code != tt.code {
				t.Errorf("failure code %q, want %q", code, tt.code)
			}
			end := last(evs)
			if end.GetExitCode() != 1 || phaseOf(t, s.eng, end.GetRunId()) != realmv1.RunPhase_RUN_PHASE_RUNNING {
				t.Errorf("the run should stay open and the drive exit 1: %v", end)
			}
		})
	}
}

// alive reports whether process pid exists.
func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// gone waits up to 10 s for process pid to end.
func gone(pid int) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func TestNoStdioServerOutlivesItsDrive(t *testing.T) {
	t.Parallel()
	t.Run("drive ends", func(t *testing.T) {
		t.Parallel()
		s := setupTools(t, "anthropic", toolEnv, oneCallThen(call{"pid", nil}))
		run := completed(t, s.drive(t, s.workflow("", "notes:pid")))
		calls := callsOf(s.attempt(t, run))
		pid, _ := strconv.Atoi(fmt.Sprint(calls[0]["result"]))
		if pid == 0 || !gone(pid) {
			t.Fatalf("stdio server %v still running after the drive", calls[0]["result"])
		}
	})
	t.Run("drive cancelled", func(t *testing.T) {
		t.Parallel()
		s := setupTools(t, "openai", toolEnv, oneCallThen(call{"pid", nil}))
		s.stub.mu.Lock()
		s.stub.hold = 2 // the request after the call waits for the cancel
		s.stub.mu.Unlock()
		c, cancel := context.WithCancel(ctx(t))
		defer cancel()
		stream, err := s.agent.DriveRun(c, &realmv1.DriveRunRequest{WorkflowSource: s.workflow("", "notes:pid"), Options: opts("openai", "test-model")})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				if _, err := stream.Recv(); err != nil {
					return
				}
			}
		}()
		var pid int
		for deadline := time.Now().Add(30 * time.Second); pid == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if reqs := s.stub.requests(); len(reqs) == 2 {
				for _, m := range told("openai", reqs[1]) {
					pid, _ = strconv.Atoi(m)
				}
			}
		}
		if pid == 0 || !alive(pid) {
			t.Fatalf("no running stdio server seen (pid %d)", pid)
		}
		cancel()
		if !gone(pid) {
			t.Fatalf("stdio server %d still running after the drive was cancelled", pid)
		}
	})
}

func TestAnUnreadableFinalAnswerFailsTheStepAndLeavesTheRunOpen(t *testing.T) {
	t.Parallel()
	s := setupTools(t, "anthropic", toolEnv, func(n int, _ map[string]any) turn {
		if n == 1 {
			return turn{calls: []call{{"read_note", map[string]any{"name": "a"}}}}
		}
		return turn{text: "I could not decide."}
	})
	evs := s.drive(t, s.workflow("    max_tool_calls: 1\n", "notes:read_note"))
	line := "✗ Step 'answer' (tools) failed: max_tool_calls reached; final extraction failed: the model's final answer holds no JSON object"
	if !strings.Contains(texts(evs), line) {
		t.Fatalf("no line %q:\n%s", line, texts(evs))
	}
	var f *realmv1.DriveFailure
	for _, e := range evs {
		if e.GetFailure() != nil {
			f = e.GetFailure()
		}
	}
	if f.GetCode() != "ENGINE_STEP_FAILED" || len(f.GetUsage()) != 2 {
		t.Errorf("failure %v, want ENGINE_STEP_FAILED with both requests' usage", f)
	}
	if phaseOf(t, s.eng, last(evs).GetRunId()) != realmv1.RunPhase_RUN_PHASE_RUNNING {
		t.Errorf("the run should stay open")
	}
}

func TestTheToolExampleIsDrivenToCompletion(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "notes-mcp")
	build := exec.Command("go", "build", "-o", bin, "./notes-mcp/cmd/notes-mcp")
	build.Dir = "../../../services"
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build notes-mcp: %v\n%s", err, out)
	}
	y, err := os.ReadFile("../../../examples/invoice-notes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	y = []byte(strings.Replace(string(y), "command: bin/notes-mcp", "command: "+strconv.Quote(bin), 1))
	for _, kind := range []string{"anthropic", "openai"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			s := setupTools(t, kind, toolEnv, func(n int, _ map[string]any) turn {
				switch n {
				case 1:
					return turn{calls: []call{{"list_notes", map[string]any{"prefix": "invoice"}}}}
				case 2:
					return turn{calls: []call{{"read_note", map[string]any{"name": "invoice-1042"}}}}
				}
				return turn{answer: map[string]any{"answer": "Invoice 1042 totals 120 EUR.", "total_eur": 120, "sources": []any{"invoice-1042"}}}
			})
			evs := drive(t, s.agent, &realmv1.DriveRunRequest{WorkflowSource: &realmv1.WorkflowSource{Yaml: y, Path: "invoice-notes.yaml"},
				Params: params(t, map[string]any{"question": "What is the total of invoice 1042?"}), Options: opts(kind, "test-model")}, nil)
			run := completed(t, evs)
			reqs := s.stub.requests()
			if got := told(kind, reqs[1]); len(got) != 1 || got[0] != "invoice-1042\ninvoice-1043" {
				t.Errorf("list_notes told %q", got)
			}
			calls := callsOf(s.attempt(t, run))
			if len(calls) != 2 || !strings.Contains(fmt.Sprint(calls[1]["result"]), "total 120 EUR") {
				t.Fatalf("tool_calls = %v", calls)
			}
		})
	}
}

func TestStrictOnAToolStepIsAppliedToToolArguments(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"anthropic", "openai"} {
		for _, drop := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/refused=%v", kind, drop), func(t *testing.T) {
				t.Parallel()
				s := setupTools(t, kind, toolEnv, oneCallThen(call{"read_note", map[string]any{"name": "a"}}))
				if drop {
					s.stub.mu.Lock()
					s.stub.refuse = func(body map[string]any) bool { return strings.Contains(fmt.Sprint(body["tools"]), "strict:true") }
					s.stub.mu.Unlock()
				}
				run := completed(t, s.drive(t, s.workflow("    structured_output: strict\n", "notes:read_note")))
				reqs := s.stub.requests()
				if rf, ok := reqs[0]["response_format"]; ok {
					t.Errorf("a tools step's output was constrained: %v", rf)
				}
				if got := strings.Contains(fmt.Sprint(reqs[0]["tools"]), "strict:true"); !got {
					t.Errorf("the first request's tools were not strict: %v", reqs[0]["tools"])
				}
				so := structuredOutput(t, s.eng, run)
				if so["downgrade_reason"] != "unsupported_context_tools" {
					t.Errorf("structured_output = %v", so)
				}
				ta, _ := so["tool_args"].(map[string]any)
				list, _ := ta["tools"].([]any)
				if len(list) != 1 {
					t.Fatalf("tool_args = %v", ta)
				}
				e := list[0].(map[string]any)
				if e["name"] != "read_note" || e["strict_requested"] != true || e["strict_sent"] != !drop {
					t.Errorf("tool_args entry = %v", e)
				}
				dm, dropped := ta["dropped_mid_attempt"].(map[string]any)
				if dropped != drop {
					t.Errorf("dropped_mid_attempt present %v, want %v: %v", dropped, drop, ta)
				}
				if drop && (dm["reason"] != "api_rejected_schema" || dm["api_message"] != "strict tools rejected") {
					t.Errorf("dropped_mid_attempt = %v, want api_rejected_schema with the service's message", dm)
				}
				if drop && strings.Contains(fmt.Sprint(reqs[len(reqs)-1]["tools"]), "strict:true") {
					t.Errorf("strict came back after the refusal")
				}
			})
		}
	}
}

// structuredOutput is the structured_output diagnostics of the run's
// evidence entry for step answer.
func structuredOutput(t *testing.T, eng realmv1.EngineServiceClient, run string) map[string]any {
	t.Helper()
	resp, err := eng.ExportRun(ctx(t), &realmv1.ExportRunRequest{RunId: run})
	if err != nil {
		t.Fatal(err)
	}
	var found map[string]any
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if x["step_id"] == "answer" {
				if d, ok := x["diagnostics"].(map[string]any); ok {
					if so, ok := d["structured_output"].(map[string]any); ok {
						found = so
					}
				}
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	var bundle any
	if err := json.Unmarshal(resp.GetBundle(), &bundle); err != nil {
		t.Fatal(err)
	}
	walk(bundle)
	if found == nil {
		t.Fatalf("no structured_output in the evidence: %s", resp.GetBundle())
	}
	return found
}

func TestAStdioServerIsStartedOncePerDrive(t *testing.T) {
	t.Parallel()
	s := setupTools(t, "anthropic", toolEnv, func(n int, _ map[string]any) turn {
		if n%2 == 1 {
			return turn{calls: []call{{"pid", nil}}}
		}
		return turn{answer: map[string]any{"answer": "done"}}
	})
	y := fmt.Sprintf(`id: twice
name: Twice
version: 1
mcp_servers:
  - { id: notes, transport: stdio, command: %q }
steps:
  first:
    description: First.
    execution: agent
    input_schema: { type: object, required: [answer], properties: { answer: { type: string } } }
    tools: ['notes:pid']
  second:
    description: Second.
    execution: agent
    depends_on: [first]
    input_schema: { type: object, required: [answer], properties: { answer: { type: string } } }
    tools: ['notes:pid']
`, s.bin)
	completed(t, s.drive(t, &realmv1.WorkflowSource{Yaml: []byte(y), Path: "twice.yaml"}))
	reqs := s.stub.requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model requests, want 4", len(reqs))
	}
	first, second := told("anthropic", reqs[1]), told("anthropic", reqs[3])
	if len(first) != 1 || len(second) != 1 || first[0] != second[0] {
		t.Fatalf("the steps saw servers %v and %v, want one server", first, second)
	}
	pid, _ := strconv.Atoi(first[0])
	if pid == 0 || !gone(pid) {
		t.Fatalf("stdio server %q still running after the drive", first[0])
	}
}

func TestASecretInToolArgumentsIsRedactedInTheRecord(t *testing.T) {
	t.Parallel()
	s := setupTools(t, "openai", toolEnv, oneCallThen(call{"read_note", map[string]any{"name": "web-secret-value"}}))
	run := completed(t, s.drive(t, s.workflow("", "notes:read_note")))
	calls := callsOf(s.attempt(t, run))
	if len(calls) != 1 {
		t.Fatalf("tool_calls = %v", calls)
	}
	if args, _ := calls[0]["args"].(map[string]any); args["name"] != "[REDACTED]" {
		t.Errorf("args recorded as %v", calls[0]["args"])
	}
	if calls[0]["result"] != "note [REDACTED]: the invoice total is 120" {
		t.Errorf("result recorded as %v", calls[0]["result"])
	}
}

// thinkingBlocks counts the thinking blocks an Anthropic request sends
// back in its history.
func thinkingBlocks(body map[string]any) int {
	n := 0
	msgs, _ := body["messages"].([]any)
	for _, m := range msgs {
		content, _ := m.(map[string]any)["content"].([]any)
		for _, b := range content {
			if bm, _ := b.(map[string]any); bm["type"] == "thinking" {
				n++
			}
		}
	}
	return n
}

// After Anthropic refuses strict tools mid-step, the resend leaves out the
// thinking blocks produced while strict was on: they were signed against
// a tool list that has changed.
func TestAStrictToolDropLeavesOutTheThinkingOfStrictTurns(t *testing.T) {
	t.Parallel()
	s := setupTools(t, "anthropic", toolEnv, func(n int, _ map[string]any) turn {
		if n == 1 {
			return turn{thinking: "I should read note a.", calls: []call{{"read_note", map[string]any{"name": "a"}}}}
		}
		return turn{answer: map[string]any{"answer": "done"}}
	})
	strictSeen := 0
	s.stub.mu.Lock()
	s.stub.refuse = func(body map[string]any) bool {
		if !strings.Contains(fmt.Sprint(body["tools"]), "strict:true") {
			return false
		}
		strictSeen++
		return strictSeen == 2 // the second strict request, after a strict turn
	}
	s.stub.mu.Unlock()
	run := completed(t, s.drive(t, s.workflow("    structured_output: strict\n", "notes:read_note")))
	reqs := s.stub.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3 (strict, refused strict, resend)", len(reqs))
	}
	if got := []int{thinkingBlocks(reqs[1]), thinkingBlocks(reqs[2])}; got[0] != 1 || got[1] != 0 {
		t.Errorf("thinking blocks sent back = %v (refused strict request, resend), want [1 0]", got)
	}
	ta, _ := structuredOutput(t, s.eng, run)["tool_args"].(map[string]any)
	if dm, _ := ta["dropped_mid_attempt"].(map[string]any); dm["strict_turns_before_drop"] != float64(1) {
		t.Errorf("dropped_mid_attempt = %v, want strict_turns_before_drop 1", dm)
	}
}

// An Anthropic 503 on a request with strict tools sends that request again
// without strict, once: strict comes back on the next turn (only a 400
// keeps it off) and the drop is disclosed with its reason. OpenAI never
// downgrades on a 5xx.
func TestA503OnStrictToolsDropsStrictForThatRequestOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind, body string
		// strict is, per request, whether its tools were strict; nil
		// means the step fails on the 503.
		strict []bool
	}{
		{kind: "anthropic", body: `{"type":"error","error":{"type":"overloaded_error","message":"Grammar compilation is temporarily unavailable"}}`,
			strict: []bool{true, false, true}},
		{kind: "openai", body: `{"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}`},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			served := 0 // turns answered: a tool call first, then the answer
			s := setupTools(t, tc.kind, toolEnv, func(int, map[string]any) turn {
				if served++; served == 1 {
					return turn{calls: []call{{"read_note", map[string]any{"name": "a"}}}}
				}
				return turn{answer: map[string]any{"answer": "done"}}
			})
			refused := 0
			s.stub.mu.Lock()
			s.stub.refuseStatus, s.stub.refuseBody = http.StatusServiceUnavailable, tc.body
			s.stub.refuse = func(body map[string]any) bool {
				// The SDK's three attempts of the first request.
				if refused == 3 || !strings.Contains(fmt.Sprint(body["tools"]), "strict:true") {
					return false
				}
				refused++
				return true
			}
			s.stub.mu.Unlock()
			evs := s.drive(t, s.workflow("    structured_output: strict\n", "notes:read_note"))
			if tc.strict == nil {
				if last(evs).GetOutcome() == realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
					t.Fatalf("the step completed; want it failed by the 503\n%s", texts(evs))
				}
				for i, b := range s.stub.requests() {
					if !strings.Contains(fmt.Sprint(b["tools"]), "strict:true") {
						t.Errorf("request %d went out without strict after a 503", i+1)
					}
				}
				return
			}
			run := completed(t, evs)
			var got []bool
			for _, b := range s.stub.requests()[2:] { // after the SDK's retries of the first
				got = append(got, strings.Contains(fmt.Sprint(b["tools"]), "strict:true"))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.strict) {
				t.Errorf("strict tools per request (from the last refused one) = %v, want %v", got, tc.strict)
			}
			ta, _ := structuredOutput(t, s.eng, run)["tool_args"].(map[string]any)
			dm, _ := ta["dropped_mid_attempt"].(map[string]any)
			list, _ := ta["tools"].([]any)
			if dm["reason"] != "grammar_unavailable" || dm["strict_turns_before_drop"] != float64(0) || len(list) != 1 || list[0].(map[string]any)["strict_sent"] != true {
				t.Errorf("tool_args = %v, want the grammar_unavailable drop and read_note still strict_sent", ta)
			}
		})
	}
}
