package golden

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"

	"github.com/realm-go/realm/engine-svc/enginetest"
	"github.com/realm-go/realm/mcp-svc/mcpserver"
	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// clock is the engine's time: tests move it past a gate's expiry instead
// of waiting.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// stack is one real engine (enginetest, with a clock we move) and the MCP
// server in front of it, reached by the go-sdk client.
type stack struct {
	t     testing.TB
	s     *mcp.ClientSession
	clock *clock
	eng   realmv1.EngineServiceClient
	addr  string
	conn  *grpc.ClientConn
}

// door is how the client reaches the server.
type door struct {
	stdio  bool            // stdio (newline-delimited JSON-RPC over pipes) instead of HTTP
	caller *realmv1.Caller // nil: mcp-svc's own (AmbientCaller, mcp-http)
}

// newStack starts an engine over backend with testdata/<wf>.yaml
// registered for each wf, and the MCP server over streamable HTTP
// (mcp-svc/mcpserver's handler, dev mode: no token).
func newStack(t testing.TB, backend string, workflows ...string) *stack {
	t.Helper()
	return newStackVia(t, backend, door{}, workflows...)
}

func newStackVia(t testing.TB, backend string, d door, workflows ...string) *stack {
	t.Helper()
	clk := &clock{}
	addr := enginetest.StartWith(t, backend, enginetest.Options{Clock: clk.Now})
	eng, conn, err := client.DialEngine(testCtx(t), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn
	for _, wf := range workflows {
		yaml, err := os.ReadFile(filepath.Join("testdata", wf+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := eng.RegisterWorkflow(testCtx(t), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: yaml, Path: wf + ".yaml"}})
		if err != nil || !resp.GetRegistered() {
			t.Fatalf("register %s: %v %s", wf, err, resp.GetReport().GetText())
		}
	}
	caller := d.caller
	if caller == nil {
		ch := realmv1.Channel_CHANNEL_MCP_HTTP
		if d.stdio {
			ch = realmv1.Channel_CHANNEL_MCP_STDIO
		}
		if caller, err = mcpserver.AmbientCaller(func(string) string { return "" }, ch); err != nil {
			t.Fatal(err)
		}
	}
	srv := mcpserver.New(mcpserver.Options{Engine: eng, EngineAddr: addr, Caller: caller, ErrorLog: io.Discard})
	c := mcp.NewClient(&mcp.Implementation{Name: "golden", Version: "0"}, nil)
	var transport mcp.Transport
	if d.stdio {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.ServeStdio(ctx, inR, outW); outW.Close() }()
		t.Cleanup(func() {
			cancel()
			inW.Close()
			if err := <-done; err != nil {
				t.Errorf("stdio server: %v", err)
			}
		})
		transport = &mcp.IOTransport{Reader: outR, Writer: inW}
	} else {
		hs := httptest.NewServer(srv.HTTPHandler(mcpserver.HTTPOptions{ErrorLog: io.Discard}))
		t.Cleanup(hs.Close)
		transport = &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp", DisableStandaloneSSE: true}
	}
	s, err := c.Connect(testCtx(t), transport, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return &stack{t: t, s: s, clock: clk, eng: eng, addr: addr, conn: conn}
}

// call calls a tool over MCP and decodes its one text item as a JSON
// object. A tool error fails the test.
func (st *stack) call(name string, args map[string]any) map[string]any {
	st.t.Helper()
	res, err := st.s.CallTool(testCtx(st.t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		st.t.Fatalf("%s: %v", name, err)
	}
	if len(res.Content) != 1 {
		st.t.Fatalf("%s: %d content items, want 1", name, len(res.Content))
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError {
		st.t.Fatalf("%s: tool error: %s", name, text)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		st.t.Fatalf("%s: reply is not a JSON object: %v\n%s", name, err, text)
	}
	return m
}

// start starts a run and returns the reply; a refusal fails the test.
func (st *stack) start(workflow string, params map[string]any) map[string]any {
	st.t.Helper()
	args := map[string]any{"workflow_id": workflow}
	if params != nil {
		args["params"] = params
	}
	r := st.call("start_run", args)
	if r["status"] != "ok" && r["status"] != "confirm_required" {
		st.t.Fatalf("start_run %s: %s", workflow, pretty(r))
	}
	return r
}

func (st *stack) execute(run, step string, params map[string]any) map[string]any {
	st.t.Helper()
	return st.call("execute_step", map[string]any{"run_id": run, "command": step, "params": params})
}

// respond answers the open gate; token "" passes no claim_token.
func (st *stack) respond(run, gate, choice, token string) map[string]any {
	st.t.Helper()
	args := map[string]any{"run_id": run, "gate_id": gate, "choice": choice}
	if token != "" {
		args["claim_token"] = token
	}
	return st.call("submit_human_response", args)
}

// gateOf returns gate.gate_id and gate.claim_token of a confirm_required reply.
func gateOf(t testing.TB, r map[string]any) (id, token string) {
	t.Helper()
	g, ok := r["gate"].(map[string]any)
	if !ok || r["status"] != "confirm_required" {
		t.Fatalf("no gate opened: %s", pretty(r))
	}
	id, _ = g["gate_id"].(string)
	token, _ = g["claim_token"].(string)
	return id, token
}

func runID(r map[string]any) string { s, _ := r["run_id"].(string); return s }

func pretty(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// eachBackend runs f against a fresh stack per store.
func eachBackend(t *testing.T, f func(t *testing.T, backend string)) {
	t.Helper()
	for _, backend := range enginetest.Backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			f(t, backend)
		})
	}
}

// filepathGlob lists the goldens matching pattern by name (no .json).
func filepathGlob(pattern string) ([]string, error) {
	files, err := filepath.Glob(pattern)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	return names, nil
}
