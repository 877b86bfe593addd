package runner

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// toValue turns a handler's data into a protobuf Value. structpb only takes
// JSON-like Go values (map[string]any, []any, …); anything else (structs,
// typed slices) goes through encoding/json, so a handler may return what it
// would marshal.
func toValue(v any) (*structpb.Value, error) {
	if pv, err := structpb.NewValue(v); err == nil {
		return pv, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("the data is not a JSON value: %w", err)
	}
	out := &structpb.Value{}
	if err := protojson.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("the data is not a JSON value: %w", err)
	}
	return out, nil
}

// toStruct turns a JSON object into a Struct, the way toValue does; what
// cannot be encoded is replaced by a note, never dropped silently.
func toStruct(m map[string]any) *structpb.Struct {
	if len(m) == 0 {
		return nil
	}
	v, err := toValue(m)
	if err == nil {
		if s := v.GetStructValue(); s != nil {
			return s
		}
	}
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		"details_unencodable": structpb.NewStringValue(fmt.Sprint(err)),
	}}
}

// asMap is s as a Go map, never nil (a missing Struct reads as {}).
func asMap(s *structpb.Struct) map[string]any {
	m := s.AsMap()
	if m == nil {
		m = map[string]any{}
	}
	return m
}
