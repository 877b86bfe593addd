package sdkworkaround_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/realm-go/realm/mcp-svc/internal/sdkworkaround"
)

type noopIn struct {
	RunID   string `json:"run_id"`
	Command string `json:"command"`
}

func typedNoop(context.Context, *mcp.CallToolRequest, noopIn) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}}, nil, nil
}

// BenchmarkStatelessOptions is one no-op tools/call over loopback HTTP
// under each way of running go-sdk's streamable handler the door could
// choose, and with each form of an input schema the size of the door's.
// The door uses "stateless-json/one-server" with raw schemas, listed
// (ListedSchemas).
func BenchmarkStatelessOptions(b *testing.B) {
	object := map[string]any{"type": "object"}
	door := doorSchema(b)
	oneServer := func(schema any) func(*http.Request) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "noop", Version: "0"}, nil)
		s.AddTool(&mcp.Tool{Name: "noop", InputSchema: schema}, noop)
		return func(*http.Request) *mcp.Server { return s }
	}
	// A pooled server is not needed: the door's server holds no per-call
	// state. These rows show what building one per request would cost.
	perRequest := func(*http.Request) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "noop", Version: "0"}, nil)
		s.AddTool(&mcp.Tool{Name: "noop", InputSchema: object}, noop)
		return s
	}
	perRequestTyped := func(cache *mcp.SchemaCache) func(*http.Request) *mcp.Server {
		return func(*http.Request) *mcp.Server {
			s := mcp.NewServer(&mcp.Implementation{Name: "noop", Version: "0"}, &mcp.ServerOptions{SchemaCache: cache})
			mcp.AddTool(s, &mcp.Tool{Name: "noop"}, typedNoop)
			return s
		}
	}
	rows := []struct {
		name   string
		server func(*http.Request) *mcp.Server
		opts   mcp.StreamableHTTPOptions
	}{
		{"stateless-json/one-server", oneServer(object), mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}},
		{"stateless-sse/one-server", oneServer(object), mcp.StreamableHTTPOptions{Stateless: true}},
		{"sessions-json/one-server", oneServer(object), mcp.StreamableHTTPOptions{JSONResponse: true}},
		{"stateless-json/server-per-request", perRequest, mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}},
		{"stateless-json/server-per-request-typed", perRequestTyped(nil), mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}},
		{"stateless-json/server-per-request-typed-schema-cache", perRequestTyped(mcp.NewSchemaCache()), mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}},
		{"stateless-json/door-schema-map", oneServer(door), mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}},
		{"stateless-json/door-schema-raw", oneServer(sdkworkaround.RawSchema(door)), mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}},
		{"stateless-json/door-schema-listed", listedServer(sdkworkaround.RawSchema(door)), mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}},
	}
	for _, r := range rows {
		b.Run(r.name, func(b *testing.B) {
			hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(r.server, &r.opts))
			defer hs.Close()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).Connect(context.Background(),
				&mcp.StreamableClientTransport{Endpoint: hs.URL, DisableStandaloneSSE: true}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			b.ReportAllocs()
			for b.Loop() {
				call(b, cs, "noop")
			}
		})
	}
}

// listedServer is one server with the no-op tool added through
// ListedSchemas, as the door adds its tools.
func listedServer(schema []byte) func(*http.Request) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "noop", Version: "0"}, nil)
	l := sdkworkaround.NewListedSchemas()
	l.AddTool(s, &mcp.Tool{Name: "noop"}, schema, noop)
	s.AddReceivingMiddleware(l.Middleware())
	return func(*http.Request) *mcp.Server { return s }
}
