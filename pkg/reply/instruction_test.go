package reply

import (
	"encoding/json"
	"reflect"
	"testing"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// olderEngineAction is classifyAction as an engine released before the
// JSON fields sent it: params, call_with and input_schema as Structs of
// the same values.
func olderEngineAction(t *testing.T) *realmv1.NextAction {
	t.Helper()
	na := classifyAction(t)
	in := na.GetInstruction()
	var params, callWith map[string]any
	var schema any
	for raw, v := range map[string]any{string(in.GetParamsJson()): &params, string(in.GetCallWithJson()): &callWith, string(na.GetInputSchemaJson()): &schema} {
		if err := json.Unmarshal([]byte(raw), v); err != nil {
			t.Fatal(err)
		}
	}
	return &realmv1.NextAction{
		Instruction:   &realmv1.Instruction{Tool: in.GetTool(), Params: mustStruct(t, params), CallWith: mustStruct(t, callWith)},
		InputSchema:   mustValue(t, schema),
		HumanReadable: na.GetHumanReadable(),
		Orientation:   na.GetOrientation(),
	}
}

// During a rolling deploy a door already on this release reads replies
// from an engine that is not: both encodings must read the same.
func TestAnOlderEnginesStructFieldsReadAsTheJSONFields(t *testing.T) {
	t.Parallel()
	newer, older := classifyAction(t), olderEngineAction(t)
	a, _ := json.Marshal(NextActionJSON(newer))
	b, _ := json.Marshal(NextActionJSON(older))
	if string(a) != string(b) {
		t.Errorf("next action JSON differs\n JSON fields: %s\nStruct fields: %s", a, b)
	}
	for _, na := range []*realmv1.NextAction{newer, older} {
		in := na.GetInstruction()
		if got := Command(in); got != "classify" {
			t.Errorf("Command = %q, want classify", got)
		}
		if got := Params(in); !reflect.DeepEqual(got, map[string]any{"run_id": runA, "command": "classify"}) {
			t.Errorf("Params = %v", got)
		}
		if got := CallWith(in)["params"]; !reflect.DeepEqual(got, map[string]any{"category": "<billing|bug|other>", "confidence": 0.0}) {
			t.Errorf("CallWith params = %v", got)
		}
		var schema any
		if err := json.Unmarshal(InputSchemaJSON(na), &schema); err != nil || !reflect.DeepEqual(schema, InputSchema(na)) || schema.(map[string]any)["type"] != "object" {
			t.Errorf("InputSchemaJSON = %s (%v), InputSchema = %v", InputSchemaJSON(na), err, InputSchema(na))
		}
	}
}

func TestAnInstructionWithoutParamsReadsEmpty(t *testing.T) {
	t.Parallel()
	for name, in := range map[string]*realmv1.Instruction{
		"nil":        nil,
		"none":       {Tool: "advance_run"},
		"not JSON":   {Tool: "execute_step", ParamsJson: []byte(`{"command":`), CallWithJson: []byte(`[`)},
		"not object": {Tool: "execute_step", ParamsJson: []byte(`"classify"`), CallWithJson: []byte(`null`)},
	} {
		if p, c := Params(in), CallWith(in); p == nil || len(p) != 0 || c == nil || len(c) != 0 {
			t.Errorf("%s: Params = %v, CallWith = %v, want both empty", name, p, c)
		}
		if got := Command(in); got != "" {
			t.Errorf("%s: Command = %q, want empty", name, got)
		}
	}
	if InputSchema(&realmv1.NextAction{}) != nil || InputSchemaJSON(&realmv1.NextAction{}) != nil {
		t.Error("a next action without a schema reads one")
	}
}
