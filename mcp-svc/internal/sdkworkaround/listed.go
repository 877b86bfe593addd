package sdkworkaround

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ListedSchemas registers tools so that go-sdk reads a small schema on
// every call and tools/list shows the full one. Why: go-sdk v1.8.0
// re-reads a tool's whole input schema on every tools/call over
// streamable HTTP whose client speaks protocol 2026-07-28 or later,
// looking for x-mcp-header annotations (validateMcpHeaders →
// extractParamHeaderAnnotations → remarshal). Even as json.RawMessage
// (RawSchema) that is a compaction pass, a depth scan and a decode of
// every property: for execute_step's schema about 20 µs of CPU and 30
// allocations per call more than for {"type":"object"}
// (docs/benchmarks.md). The door's schemas hold no such annotation, so
// each tool is registered with a schema holding only what the SDK reads
// there (nothing), and the middleware puts the full schema back into
// every tools/list reply. Upstream fix: compute the bindings once in
// Server.AddTool (it already validates them there).
type ListedSchemas struct {
	full map[string]json.RawMessage
}

// readOnCall is the schema the SDK re-reads on every call when the full
// one carries no x-mcp-header annotation.
var readOnCall = json.RawMessage(`{"type":"object"}`)

// NewListedSchemas is an empty set; add the tools with AddTool and the
// middleware with Middleware.
func NewListedSchemas() *ListedSchemas {
	return &ListedSchemas{full: map[string]json.RawMessage{}}
}

// AddTool adds t to s with handler h. A schema that carries an
// x-mcp-header annotation is registered whole, since the SDK must read it
// on each call; any other is registered as {"type":"object"} and listed
// whole by the middleware.
func (l *ListedSchemas) AddTool(s *mcp.Server, t *mcp.Tool, schema json.RawMessage, h mcp.ToolHandler) {
	tool := *t
	tool.InputSchema = schema
	if !bytes.Contains(schema, []byte(`"x-mcp-header"`)) {
		tool.InputSchema = readOnCall
		l.full[t.Name] = schema
	}
	s.AddTool(&tool, h)
}

// Middleware is the server's receiving middleware that lists each tool
// added through AddTool with its full input schema.
func (l *ListedSchemas) Middleware() mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			list, ok := res.(*mcp.ListToolsResult)
			if err != nil || !ok {
				return res, err
			}
			// A copy: the SDK's list holds the registered tools themselves.
			out := *list
			out.Tools = make([]*mcp.Tool, len(list.Tools))
			for i, t := range list.Tools {
				out.Tools[i] = t
				if full, ok := l.full[t.Name]; ok {
					listed := *t
					listed.InputSchema = full
					out.Tools[i] = &listed
				}
			}
			return &out, nil
		}
	}
}
