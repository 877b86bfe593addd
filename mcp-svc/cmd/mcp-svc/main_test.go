package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/realm-go/realm/engine-svc/enginetest"
	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startStack starts an engine on backend with examples/triage.yaml
// registered, and mcp-svc's run() in dev mode on a free loopback port. It
// returns the MCP endpoint URL.
func startStack(t testing.TB, backend string, env map[string]string, extraArgs ...string) (endpoint string) {
	t.Helper()
	endpoint, _ = startStackMetrics(t, backend, env, extraArgs...)
	return endpoint
}

// startStackMetrics is startStack that also returns the /metrics URL mcp-svc
// printed (with --metrics-addr; "" without).
func startStackMetrics(t testing.TB, backend string, env map[string]string, extraArgs ...string) (endpoint, metricsURL string) {
	t.Helper()
	engineAddr := enginetest.Start(t, backend)
	registerTriage(t, engineAddr)

	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	args := append([]string{"--addr", "127.0.0.1:0", "--engine-addr", engineAddr}, extraArgs...)
	getenv := func(k string) string { return env[k] }
	go func() { done <- run(ctx, args, getenv, pw, io.Discard); pw.Close() }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mcp-svc run: %v", err)
		}
	})
	lines := bufio.NewScanner(pr)
	for lines.Scan() {
		if url, ok := strings.CutPrefix(lines.Text(), "Prometheus metrics on "); ok {
			metricsURL = url
		}
		if url, ok := strings.CutPrefix(lines.Text(), "Realm MCP server listening on "); ok {
			go func() { _, _ = io.Copy(io.Discard, pr) }()
			return url, metricsURL
		}
	}
	t.Fatalf("mcp-svc printed no listening line")
	return "", ""
}

func registerTriage(t testing.TB, engineAddr string) {
	t.Helper()
	yaml, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "triage.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	eng, conn, err := client.DialEngine(testCtx(t), engineAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := eng.RegisterWorkflow(testCtx(t), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: yaml, Path: "triage.yaml"}})
	if err != nil || !resp.GetRegistered() {
		t.Fatalf("register triage: %v %v", err, resp.GetReport().GetErrors())
	}
}

// connect opens a go-sdk client session over streamable HTTP.
func connect(t testing.TB, endpoint string, hc *http.Client) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "0"}, nil)
	s, err := c.Connect(testCtx(t), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// callTool calls a tool and decodes its one text item as a JSON object.
func callTool(t testing.TB, s *mcp.ClientSession, name string, args any) (map[string]any, bool) {
	t.Helper()
	res, err := s.CallTool(testCtx(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content items, want 1", name, len(res.Content))
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError {
		return map[string]any{"text": text}, true
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatalf("%s: reply is not a JSON object: %v\n%s", name, err, text)
	}
	return m, false
}

// TestAgentDrivesTriageToItsEndFollowingOnlyNextActions is the front door
// end to end: the go-sdk client over real HTTP, a real engine over each
// store, and a driver that only ever calls what next_actions names —
// through an agent step refused once, an auto step, a guard and a second
// agent step, to a completed run.
func TestAgentDrivesTriageToItsEndFollowingOnlyNextActions(t *testing.T) {
	t.Parallel()
	for _, backend := range enginetest.Backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := connect(t, startStack(t, backend, nil, "--dev"), nil)

			list, isErr := callTool(t, s, "list_workflows", map[string]any{})
			if isErr || !strings.Contains(mustJSON(t, list["workflows"]), `"id":"triage"`) {
				t.Fatalf("list_workflows: %v", list)
			}
			proto, isErr := callTool(t, s, "get_workflow_protocol", map[string]any{"workflow_id": "triage"})
			if isErr || proto["workflow_id"] != "triage" {
				t.Fatalf("get_workflow_protocol: %v", proto)
			}

			r, _ := callTool(t, s, "start_run", map[string]any{
				"workflow_id": "triage",
				"params":      map[string]any{"subject": "Invoice", "body": "My invoice is wrong"},
			})
			if r["status"] != "ok" {
				t.Fatalf("start_run: %v", r)
			}
			runID, _ := r["run_id"].(string)

			// The driver's answers, by step; the first answer to classify
			// is refused by its schema.
			answers := map[string][]map[string]any{
				"classify": {{"category": "spam", "confidence": 0.9}, {"category": "billing", "confidence": 0.9}},
				"draft":    {{"reply": "We are fixing your invoice."}},
			}
			var refused, calls int
			for {
				actions, _ := r["next_actions"].([]any)
				if len(actions) == 0 {
					break
				}
				if calls++; calls > 10 {
					t.Fatalf("no end after 10 calls; last reply %v", r)
				}
				in := actions[0].(map[string]any)["instruction"].(map[string]any)
				tool := in["tool"].(string)
				args := in["call_with"].(map[string]any)
				if tool == "execute_step" {
					step := args["command"].(string)
					if len(answers[step]) == 0 {
						t.Fatalf("no answer left for step %q", step)
					}
					args["params"], answers[step] = answers[step][0], answers[step][1:]
				}
				next, isErr := callTool(t, s, tool, args)
				if isErr {
					t.Fatalf("%s: tool error %v", tool, next)
				}
				if next["status"] == "error" {
					if next["error_code"] != "VALIDATION_INPUT_SCHEMA" || next["agent_action"] != "provide_input" {
						t.Fatalf("unexpected refusal: %v", next)
					}
					refused++
				}
				r = next
			}
			if refused != 1 {
				t.Errorf("refused answers = %d, want 1", refused)
			}
			if r["status"] != "ok" || r["run_phase"] != "completed" {
				t.Errorf("last reply: status %v phase %v, want ok completed: %v", r["status"], r["run_phase"], r)
			}
			state, _ := callTool(t, s, "get_run_state", map[string]any{"run_id": runID})
			if state["run_phase"] != "completed" || state["terminal_state"] != true {
				t.Errorf("get_run_state: %v", state)
			}
			done := mustJSON(t, state["completed_steps"])
			for _, step := range []string{"classify", "route", "not_spam", "draft"} {
				if !strings.Contains(done, `"`+step+`"`) {
					t.Errorf("completed_steps %s lacks %s", done, step)
				}
			}
		})
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestStartRefusesWithoutATokenOutsideDevMode(t *testing.T) {
	t.Parallel()
	err := run(testCtx(t), []string{"--addr", "127.0.0.1:0"}, func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || err.Error() != "Error: REALM_SERVE_TOKEN is not set.\nSet it to a secret token, or use --dev / REALM_DEV=1 for local development only." {
		t.Errorf("got %v", err)
	}
}

func TestWithATokenOnlyBearerCallsReachTheTools(t *testing.T) {
	t.Parallel()
	endpoint, metricsURL := startStackMetrics(t, "miniredis", map[string]string{"REALM_SERVE_TOKEN": "s3cret"}, "--metrics-addr", "127.0.0.1:0")
	hr, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	hr.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("no token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	hc := &http.Client{Transport: bearerTransport{"s3cret"}}
	s := connect(t, endpoint, hc)
	if list, isErr := callTool(t, s, "list_workflows", nil); isErr || list["status"] != "ok" {
		t.Errorf("list_workflows with the token: %v", list)
	}
	if _, isErr := callTool(t, s, "get_workflow_protocol", map[string]any{"workflow_id": "no-such-workflow"}); !isErr {
		t.Errorf("get_workflow_protocol of an unknown workflow is not a tool error")
	}
	health, err := http.Get(strings.TrimSuffix(endpoint, "/mcp") + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	health.Body.Close()
	if health.StatusCode != 200 {
		t.Errorf("/healthz without a token: %d", health.StatusCode)
	}
	// /metrics is not on the public port: it has its own listener.
	if pub, err := http.Get(strings.TrimSuffix(endpoint, "/mcp") + "/metrics"); err != nil || pub.StatusCode != http.StatusNotFound {
		t.Errorf("/metrics on the public port: %v %v, want 404", pub.StatusCode, err)
	} else {
		pub.Body.Close()
	}
	// The refused call and the tool calls are counted by code.
	m, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(m.Body)
	m.Body.Close()
	for _, want := range []string{
		`realm_http_requests_total{code="401",handler="mcp",method="post"} 1`,
		`realm_http_requests_total{code="200",handler="mcp",method="post"}`,
		`realm_mcp_tool_calls_total{result="ok",tool="list_workflows"} 1`,
		`realm_mcp_tool_call_seconds_count{tool="list_workflows"} 1`,
		`realm_mcp_tool_calls_total{result="tool_error",tool="get_workflow_protocol"} 1`,
		`grpc_client_handled_total{grpc_code="OK",grpc_method="ListWorkflows",grpc_service="realm.v1.EngineService",grpc_type="unary"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// Without a token (dev mode) mcp-svc never listens beyond this machine: a
// non-loopback --addr is narrowed to 127.0.0.1 and the start says so.
func TestDevModeListensOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	cases := []struct {
		addr, want, narrowed string
	}{
		{"0.0.0.0:8080", "127.0.0.1:8080", "0.0.0.0:8080"},
		{"[::]:9000", "127.0.0.1:9000", "[::]:9000"},
		{"10.1.2.3:0", "127.0.0.1:0", "10.1.2.3:0"},
		{"127.0.0.1:8080", "127.0.0.1:8080", ""},
		{"[::1]:8080", "[::1]:8080", ""},
		{"localhost:8080", "localhost:8080", ""},
	}
	for _, c := range cases {
		got, narrowed := loopbackOnly(c.addr)
		if got != c.want || narrowed != c.narrowed {
			t.Errorf("loopbackOnly(%q) = %q, %q; want %q, %q", c.addr, got, narrowed, c.want, c.narrowed)
		}
	}

	// The running server: asked for every interface, it listens on loopback.
	engineAddr := enginetest.Start(t, "miniredis")
	ctx, cancel := context.WithCancel(context.Background())
	var out syncedBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--addr", "0.0.0.0:0", "--engine-addr", engineAddr, "--dev"}, func(string) string { return "" }, &out, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "Realm MCP server listening on ") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	text := out.String()
	if !strings.Contains(text, "Realm MCP server listening on http://127.0.0.1:") ||
		!strings.Contains(text, "Dev mode serves loopback only: listening on 127.0.0.1:") ||
		!strings.Contains(text, " instead of 0.0.0.0:0 (set REALM_SERVE_TOKEN to serve other hosts).") {
		t.Errorf("start output:\n%s", text)
	}
}

// syncedBuffer collects run's output while the test reads it.
type syncedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncedBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncedBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The collector's target is refused out of range before anything starts,
// and the start says what was set and where it came from.
func TestGCTargetIsCheckedAndTheStartSaysIt(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	err := run(testCtx(t), []string{"--dev", "--addr", "127.0.0.1:0", "--gc-percent", "5"}, env(nil), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--gc-percent: GC target 5: want 10 to 10000") {
		t.Errorf("--gc-percent 5: %v", err)
	}
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{nil, "mcp-svc: garbage collector: target 400 (from flag), soft memory limit "},
		{map[string]string{"GOMEMLIMIT": "1GiB"}, "(from GOMEMLIMIT)"},
	} {
		ctx, cancel := context.WithCancel(testCtx(t))
		var stderr strings.Builder
		// The server stops as soon as it says it listens.
		stdout := writerFunc(func(p []byte) (int, error) {
			if strings.Contains(string(p), "listening") {
				cancel()
			}
			return len(p), nil
		})
		if err := run(ctx, []string{"--dev", "--addr", "127.0.0.1:0"}, env(c.vars), stdout, &stderr); err != nil {
			t.Fatal(err)
		}
		cancel()
		if !strings.Contains(stderr.String(), c.want) {
			t.Errorf("with %v the start says %q, want it to hold %q", c.vars, stderr.String(), c.want)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
