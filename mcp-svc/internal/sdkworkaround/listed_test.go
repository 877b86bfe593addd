package sdkworkaround_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/realm-go/realm/mcp-svc/internal/sdkworkaround"
)

// ListedSchemas is kept while the SDK still reads a raw schema whole on
// every call. When this fails, it reads what it needs once: register the
// full schemas again (mcpserver.New) and drop ListedSchemas.
func TestSDKStillRereadsARawSchemaOnEveryCall(t *testing.T) {
	full, object := allocsPerCall(t, sdkworkaround.RawSchema(doorSchema(t)), json.RawMessage(`{"type":"object"}`))
	t.Logf("allocations per call: execute_step's schema %.0f, {\"type\":\"object\"} %.0f", full, object)
	if full-object < 15 {
		t.Errorf("execute_step's raw schema costs %.0f allocations per call more than {\"type\":\"object\"} (30 with go-sdk v1.8.0): the SDK no longer re-reads it; drop sdkworkaround.ListedSchemas", full-object)
	}
}

// listed serves tools added through a ListedSchemas as the door does.
func listed(t *testing.T, tools map[string]json.RawMessage) (*httptest.Server, *mcp.ClientSession) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	l := sdkworkaround.NewListedSchemas()
	for name, schema := range tools {
		l.AddTool(srv, &mcp.Tool{Name: name, Description: "d"}, schema, noop)
	}
	srv.AddReceivingMiddleware(l.Middleware())
	return serveStateless(t, srv, doorOptions)
}

func TestListedSchemasListEachToolWithItsFullSchema(t *testing.T) {
	door := sdkworkaround.RawSchema(doorSchema(t))
	_, cs := listed(t, map[string]json.RawMessage{"execute_step": door, "other": json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)})
	for range 2 { // the registered tools are not changed by a listing
		list, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, tl := range list.Tools {
			b, err := json.Marshal(tl.InputSchema)
			if err != nil {
				t.Fatal(err)
			}
			got[tl.Name] = string(b)
		}
		want := map[string]string{"execute_step": string(door), "other": `{"properties":{"a":{"type":"string"}},"type":"object"}`}
		for name, w := range want {
			if got[name] != w {
				t.Errorf("tools/list shows %s with %s, want %s", name, got[name], w)
			}
		}
	}
	call(t, cs, "execute_step")
}

// A schema that carries an x-mcp-header annotation is registered whole,
// so the SDK still checks the header against the argument on each call.
func TestListedSchemasKeepASchemaWithHeaderAnnotationsWhole(t *testing.T) {
	annotated := json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)
	hs, cs := listed(t, map[string]json.RawMessage{"annotated": annotated})
	// The go-sdk client sends the header it reads from the listed schema.
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "annotated", Arguments: map[string]any{"region": "eu"}})
	if err != nil || res.IsError {
		t.Fatalf("call with the header: %v %v", err, res)
	}
	// Over raw HTTP: with the header the call is taken, without it the
	// SDK refuses it, so it read the annotation.
	post := func(header string) (int, string) {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"annotated","arguments":{"region":"eu"},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"` + cs.InitializeResult().ProtocolVersion + `","io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, err := http.NewRequest(http.MethodPost, hs.URL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "annotated")
		if header != "" {
			req.Header.Set("Mcp-Param-Region", header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		_, _ = out.ReadFrom(resp.Body)
		return resp.StatusCode, out.String()
	}
	if code, body := post("eu"); code != http.StatusOK || strings.Contains(body, `"error"`) {
		t.Fatalf("with the header: %d %s", code, body)
	}
	if code, body := post(""); !strings.Contains(body, "Mcp-Param-Region") {
		t.Fatalf("a call without the Mcp-Param-Region header was not refused for it: %d %s", code, body)
	}
}
