package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzToolArguments feeds arbitrary arguments to every tool: no input may
// panic, every input the MCP layer refuses gets an error reply naming the
// tool, and every input it accepts reaches the (fake) engine once and
// comes back as one JSON object. The seed corpus runs in plain go test.
func FuzzToolArguments(f *testing.F) {
	seeds := []string{
		``, `null`, `{}`, `[]`, `"x"`, `42`, `{"run_id":null}`, `{"run_id":"r","command":"c"}`,
		`{"run_id":"r","command":"c","params":{"a":[1,{"b":null}]},"trace":[{"event":"e","data":{"k":"v"}}]}`,
		`{"workflow_id":"w","items":[{"params":{}},{"params":{"x":1},"idempotency_key":"k"}],"max_items":1e300}`,
		`{"workflow_id":"w","items":[],"max_items":-2147483649}`,
		`{"steps":[{"id":"a","description":"d","depends_on":[1]}],"metadata":[]}`,
		`{"run_id":"r","gate_id":"g","choice":"c","claimToken":"t","claim_token":"u"}`,
		`{"run_id":"r","step_id":"s","entries":[{"event":"e","data":{"x":{"y":1}}}]}`,
		`{"run_id":"r","run_id":"dup"}`, `{"run_id":"\ud800"}`, "{\"run_id\":\"\xff\"}", `{"a":`,
	}
	for i := range tools {
		for _, s := range seeds {
			f.Add(uint8(i), []byte(s))
		}
	}
	var log syncBuffer // a recovered panic would be logged here
	s := New(Options{Engine: &fakeEngine{}, EngineAddr: "test", Caller: testCaller, ErrorLog: &log})
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		tl := tools[int(which)%len(tools)]
		res, err := s.Call(context.Background(), tl.name, raw)
		if err != nil || res == nil || len(res.Content) != 1 {
			t.Fatalf("%s(%q): no single-item result: %v %v", tl.name, raw, res, err)
		}
		if l := log.String(); l != "" {
			t.Fatalf("%s(%q): server logged %q", tl.name, raw, l)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		_, decodeErr := decodeArgs(tl.name, tl.params, raw)
		if decodeErr != nil {
			want := "MCP error -32602: Input validation error: Invalid arguments for tool " + tl.name + ": "
			if !res.IsError || !strings.HasPrefix(text, want) {
				t.Fatalf("%s(%q): bad input got (%v) %q", tl.name, raw, res.IsError, text)
			}
			return
		}
		var obj map[string]any
		if res.IsError || json.Unmarshal([]byte(text), &obj) != nil {
			t.Fatalf("%s(%q): accepted input got (%v) %q", tl.name, raw, res.IsError, text)
		}
	})
}
