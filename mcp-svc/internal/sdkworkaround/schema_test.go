package sdkworkaround_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/realm-go/realm/mcp-svc/internal/sdkworkaround"
	"github.com/realm-go/realm/mcp-svc/mcpserver"
)

// doorSchema is execute_step's input schema as tools/list shows it.
func doorSchema(t testing.TB) map[string]any {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	srv := mcpserver.New(mcpserver.Options{})
	if _, err := srv.MCP().Connect(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range list.Tools {
		if tl.Name == "execute_step" {
			return tl.InputSchema.(map[string]any)
		}
	}
	t.Fatal("no execute_step in tools/list")
	return nil
}

func noop(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}}, nil
}

// statelessSession serves srv as the door does (stateless, JSON replies)
// and connects the go-sdk client to it.
func statelessSession(t testing.TB, srv *mcp.Server, o *mcp.StreamableHTTPOptions) *mcp.ClientSession {
	t.Helper()
	_, cs := serveStateless(t, srv, o)
	return cs
}

// serveStateless is statelessSession that also returns the server.
func serveStateless(t testing.TB, srv *mcp.Server, o *mcp.StreamableHTTPOptions) (*httptest.Server, *mcp.ClientSession) {
	t.Helper()
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, o))
	t.Cleanup(hs.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: hs.URL, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return hs, cs
}

func call(t testing.TB, cs *mcp.ClientSession, tool string) {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"run_id": "r", "command": "c"}})
	if err != nil || res.IsError {
		t.Fatalf("%s: %v %v", tool, err, res)
	}
}

var doorOptions = &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}

// allocsPerCall is the allocations of one no-op tools/call with each input
// schema, served as the door serves its tools.
func allocsPerCall(t *testing.T, a, b any) (float64, float64) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	srv.AddTool(&mcp.Tool{Name: "a", InputSchema: a}, noop)
	srv.AddTool(&mcp.Tool{Name: "b", InputSchema: b}, noop)
	cs := statelessSession(t, srv, doorOptions)
	return testing.AllocsPerRun(200, func() { call(t, cs, "a") }), testing.AllocsPerRun(200, func() { call(t, cs, "b") })
}

// The workaround is kept while the SDK still pays for a map schema on
// every call. When this fails, the SDK caches what it reads from the
// schema: RawSchema can go (mcpserver.New may pass the maps again).
func TestSDKStillRereadsAMapSchemaOnEveryCall(t *testing.T) {
	schema := doorSchema(t)
	mapAllocs, rawAllocs := allocsPerCall(t, schema, sdkworkaround.RawSchema(schema))
	t.Logf("allocations per call: map schema %.0f, raw schema %.0f", mapAllocs, rawAllocs)
	if mapAllocs-rawAllocs < 30 {
		t.Errorf("a map schema costs %.0f allocations per call more than a raw one (was ~100 with go-sdk v1.8.0): the SDK no longer re-reads it; drop sdkworkaround.RawSchema", mapAllocs-rawAllocs)
	}
}

func TestRawSchemaListsTheSameBytesAsTheMap(t *testing.T) {
	schema := doorSchema(t)
	want, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]any{"map": schema, "raw": sdkworkaround.RawSchema(schema)} {
		got, err := json.Marshal(&mcp.Tool{Name: "x", InputSchema: s})
		if err != nil {
			t.Fatal(err)
		}
		var tool struct{ InputSchema json.RawMessage }
		if err := json.Unmarshal(got, &tool); err != nil {
			t.Fatal(err)
		}
		if string(tool.InputSchema) != string(want) {
			t.Errorf("%s: tools/list shows %s, want %s", name, tool.InputSchema, want)
		}
	}
}
