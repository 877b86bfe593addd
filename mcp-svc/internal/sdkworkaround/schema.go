// Package sdkworkaround holds what the door does only because of a cost in
// the go-sdk version it builds with; each item names the upstream change
// that makes it unnecessary, and its test fails once the SDK has made it.
//
// RawSchema: go-sdk v1.8.0 reads a tool's x-mcp-header annotations on
// every tools/call whose client speaks protocol 2026-07-28 or later
// (validateParamHeaders → extractParamHeaderAnnotations), by marshalling
// the tool's whole InputSchema to JSON and decoding it again. For a schema
// given as map[string]any that marshal sorts and boxes every key on every
// call (~100 allocations for execute_step's schema). Given as
// json.RawMessage, the marshal is a copy. Upstream fix: compute the
// bindings once in Server.AddTool (it already validates them there).
//
// ListedSchemas (listed.go): the same re-read still scans and decodes a
// raw schema's every property; the SDK is given a schema holding only what
// it reads there, and tools/list the whole one.
package sdkworkaround

import (
	"encoding/json"
	"fmt"
)

// RawSchema is schema encoded once, for mcp.Tool.InputSchema. tools/list
// shows the same bytes the SDK would write for schema itself (encoding/json
// either way: sorted keys, the same escaping).
func RawSchema(schema any) json.RawMessage {
	b, err := json.Marshal(schema)
	if err != nil {
		// The schemas are the door's own constant tables.
		panic(fmt.Sprintf("sdkworkaround: input schema does not encode: %v", err))
	}
	return b
}
