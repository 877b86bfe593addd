package reply

import (
	"encoding/json"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// Params is an instruction's params decoded (numbers as float64, as a
// Struct gave them); empty, never nil, when it has none.
func Params(in *realmv1.Instruction) map[string]any {
	return object(in.GetParamsJson(), in.GetParams())
}

// CallWith is an instruction's call_with decoded; empty, never nil, when
// it has none.
func CallWith(in *realmv1.Instruction) map[string]any {
	return object(in.GetCallWithJson(), in.GetCallWith())
}

// Command is the step an execute_step instruction names: params.command,
// or "" when it names none.
func Command(in *realmv1.Instruction) string {
	if raw := in.GetParamsJson(); len(raw) > 0 {
		var p struct {
			Command string `json:"command"`
		}
		if json.Unmarshal(raw, &p) != nil {
			return ""
		}
		return p.Command
	}
	return in.GetParams().GetFields()["command"].GetStringValue()
}

// InputSchema is a next action's input_schema decoded, or nil when it has
// none.
func InputSchema(a *realmv1.NextAction) any {
	if raw := a.GetInputSchemaJson(); len(raw) > 0 {
		var v any
		if json.Unmarshal(raw, &v) != nil {
			return nil
		}
		return v
	}
	if a.GetInputSchema() == nil {
		return nil
	}
	return a.GetInputSchema().AsInterface()
}

// InputSchemaJSON is a next action's input_schema as JSON, or nil when it
// has none.
func InputSchemaJSON(a *realmv1.NextAction) []byte {
	if raw := a.GetInputSchemaJson(); len(raw) > 0 {
		return raw
	}
	if a.GetInputSchema() == nil {
		return nil
	}
	b, err := a.GetInputSchema().MarshalJSON()
	if err != nil {
		return nil
	}
	return b
}

// object decodes raw when it is set, else reads s (the field an older
// engine filled).
func object(raw []byte, s *structpb.Struct) map[string]any {
	if len(raw) == 0 {
		return structOrEmpty(s)
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return map[string]any{}
	}
	return m
}

// rawObject is raw for a reply's JSON as it is (it is already the JSON
// encoding/json would write, package jsonenc), or s's map when raw is
// unset.
func rawObject(raw []byte, s *structpb.Struct) any {
	if len(raw) == 0 {
		return structOrEmpty(s)
	}
	return json.RawMessage(raw)
}
