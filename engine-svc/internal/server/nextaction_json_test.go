package server_test

import (
	"bytes"
	"encoding/json"
	"testing"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// The doors embed a next action's JSON fields in their replies as they are,
// so each must be exactly what encoding/json writes of its own value (HTML
// characters as they are, keys sorted, no space): otherwise an MCP reply's
// bytes would change with the encoding.
func TestNextActionJSONFieldsAreWhatEncodingJSONWrites(t *testing.T) {
	t.Parallel()
	e := setup(t, "miniredis")
	for _, wf := range []string{"testdata/support.yaml", "testdata/triage.yaml"} {
		if r := e.register(t, readFile(t, wf)); !r.GetRegistered() {
			t.Fatal(r.GetReport().GetText())
		}
	}
	var actions []*realmv1.NextAction
	collect := func(r *realmv1.Reply) {
		t.Helper()
		if r.GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_ERROR {
			t.Fatalf("refused: %v", r)
		}
		actions = append(actions, r.GetNextActions()...)
	}
	triage := start(t, e, "triage", map[string]any{"ticket": 101})
	collect(triage)
	collect(step(t, e, triage.GetRunId(), "classify", map[string]any{"category": "bug", "confidence": 0.9}))
	support := start(t, e, "support", nil)
	collect(support)
	opened := step(t, e, support.GetRunId(), "draft", map[string]any{"reply": "We <refunded> & closed it."})
	collect(opened)
	collect(respond(t, e, support.GetRunId(), opened.GetGate().GetGateId(), "send", opened.GetGate().ClaimToken))

	tools := map[string]bool{}
	for _, na := range actions {
		in := na.GetInstruction()
		tools[in.GetTool()] = true
		if in.GetParams() != nil || in.GetCallWith() != nil || na.GetInputSchema() != nil {
			t.Errorf("%s: the engine still fills a Struct field", in.GetTool())
		}
		for name, raw := range map[string][]byte{"params": in.GetParamsJson(), "call_with": in.GetCallWithJson(), "input_schema": na.GetInputSchemaJson()} {
			if len(raw) == 0 {
				if name != "input_schema" || in.GetTool() == "execute_step" {
					t.Errorf("%s: %s is empty", in.GetTool(), name)
				}
				continue
			}
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatalf("%s: %s is not JSON: %v\n%s", in.GetTool(), name, err, raw)
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
			if want := bytes.TrimSuffix(buf.Bytes(), []byte("\n")); !bytes.Equal(raw, want) {
				t.Errorf("%s: %s is\n%s\nencoding/json writes\n%s", in.GetTool(), name, raw, want)
			}
		}
	}
	for _, tool := range []string{"execute_step", "advance_run", "submit_human_response"} {
		if !tools[tool] {
			t.Errorf("no %s action was looked at (saw %v)", tool, tools)
		}
	}
}
