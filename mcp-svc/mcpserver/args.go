package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
)

// kind is a parameter's JSON type, as tools/list shows it and as the
// arguments are checked.
type kind int

const (
	kString kind = iota
	kBool
	kInteger
	kObject
	kArray
)

func (k kind) word() string {
	switch k {
	case kString:
		return "string"
	case kBool:
		return "boolean"
	case kInteger:
		return "integer"
	case kObject:
		return "object"
	default:
		return "array"
	}
}

// param is one argument (or one field of an argument) of a tool. The same
// table gives the input schema tools/list shows and the check of a call's
// arguments, so the two cannot disagree.
type param struct {
	name     string
	kind     kind
	required bool
	desc     string
	// items is the element of an array.
	items *param
	// fields are the known fields of an object; others pass untouched.
	fields []param
	// minItems is the shortest array accepted.
	minItems int
	// scalarValues: an object whose values must be text, numbers, true,
	// false or null (trace entry data).
	scalarValues bool
}

// schema is p's JSON Schema, as tools/list shows it.
func (p param) schema() map[string]any {
	s := map[string]any{"type": p.kind.word()}
	if p.desc != "" {
		s["description"] = p.desc
	}
	switch p.kind {
	case kArray:
		if p.items != nil {
			s["items"] = p.items.schema()
		}
		if p.minItems > 0 {
			s["minItems"] = p.minItems
		}
	case kObject:
		if len(p.fields) > 0 {
			s["properties"], s["required"] = propertiesOf(p.fields)
		}
		if p.scalarValues {
			s["additionalProperties"] = map[string]any{"type": []any{"string", "number", "boolean", "null"}}
		}
	}
	return s
}

func propertiesOf(ps []param) (map[string]any, []any) {
	props := make(map[string]any, len(ps))
	required := []any{}
	for _, p := range ps {
		props[p.name] = p.schema()
		if p.required {
			required = append(required, p.name)
		}
	}
	return props, required
}

// inputSchema is a tool's input schema: an object of its parameters.
// Unknown arguments are allowed (and ignored, or passed on), so the schema
// does not close the object.
func inputSchema(ps []param) map[string]any {
	props, required := propertiesOf(ps)
	return map[string]any{"type": "object", "properties": props, "required": required}
}

// ArgError is a call refused by the MCP layer: a required argument missing
// or a value of the wrong type. Its text is the original's, e.g.
// "MCP error -32602: Input validation error: Invalid arguments for tool
// execute_step: Required at command".
type ArgError struct {
	Tool   string
	Issues []string
}

func (e *ArgError) Error() string {
	return fmt.Sprintf("MCP error -32602: Input validation error: Invalid arguments for tool %s: %s", e.Tool, strings.Join(e.Issues, "; "))
}

// args are a call's decoded arguments.
type args struct {
	m map[string]any
	// unknown are the top-level argument names the tool does not take, in
	// the order the call gave them.
	unknown []string
}

// decodeArgs reads and checks raw arguments against ps. Absent or null
// arguments are an empty object.
func decodeArgs(tool string, ps []param, raw []byte) (*args, error) {
	raw = bytes.TrimSpace(raw)
	a := &args{m: map[string]any{}}
	if len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, &ArgError{Tool: tool, Issues: []string{"Invalid JSON in arguments"}}
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, &ArgError{Tool: tool, Issues: []string{"Expected object, received " + jsonType(v)}}
		}
		a.m = m
		// The order of unknown names is the call's, which only the raw
		// text has; it is read again only when there is one.
		for k := range m {
			if !takes(ps, k) {
				a.unknown = unknownKeys(ps, raw)
				break
			}
		}
	}
	var issues []string
	for _, p := range ps {
		check(a.m[p.name], hasKey(a.m, p.name), p, "", p.name, &issues)
	}
	if len(issues) > 0 {
		return nil, &ArgError{Tool: tool, Issues: issues}
	}
	return a, nil
}

// takes reports whether one of ps is named k.
func takes(ps []param, k string) bool {
	for _, p := range ps {
		if p.name == k {
			return true
		}
	}
	return false
}

func unknownKeys(ps []param, raw []byte) []string {
	var out []string
	for _, k := range topKeys(raw) {
		if !takes(ps, k) {
			out = append(out, k)
		}
	}
	return out
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

// joinPath is parent.name, or name at the top.
func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// check appends what is wrong with v (present or not) for p at
// parent.name, in zod's words, which the original's MCP layer used. The
// path is built only when an issue names it or a nested value needs it.
func check(v any, present bool, p param, parent, name string, issues *[]string) {
	if !present {
		if p.required {
			*issues = append(*issues, "Required at "+joinPath(parent, name))
		}
		return
	}
	switch p.kind {
	case kString:
		if _, ok := v.(string); !ok {
			*issues = append(*issues, expected("string", v, joinPath(parent, name)))
		}
	case kBool:
		if _, ok := v.(bool); !ok {
			*issues = append(*issues, expected("boolean", v, joinPath(parent, name)))
		}
	case kInteger:
		f, ok := v.(float64)
		switch {
		case !ok:
			*issues = append(*issues, expected("number", v, joinPath(parent, name)))
		case f != math.Trunc(f):
			*issues = append(*issues, "Expected integer, received float at "+joinPath(parent, name))
		case f > math.MaxInt32:
			*issues = append(*issues, fmt.Sprintf("Number must be less than or equal to %d at %s", math.MaxInt32, joinPath(parent, name)))
		case f < math.MinInt32:
			*issues = append(*issues, fmt.Sprintf("Number must be greater than or equal to %d at %s", math.MinInt32, joinPath(parent, name)))
		}
	case kObject:
		m, ok := v.(map[string]any)
		if !ok {
			*issues = append(*issues, expected("object", v, joinPath(parent, name)))
			return
		}
		if len(p.fields) == 0 && !p.scalarValues {
			return
		}
		path := joinPath(parent, name)
		for _, f := range p.fields {
			check(m[f.name], hasKey(m, f.name), f, path, f.name, issues)
		}
		if p.scalarValues && !allScalar(m) {
			for _, k := range slices.Sorted(maps.Keys(m)) {
				if x := m[k]; !scalar(x) {
					*issues = append(*issues, expected("string | number | boolean | null", x, path+"."+k))
				}
			}
		}
	case kArray:
		l, ok := v.([]any)
		if !ok {
			*issues = append(*issues, expected("array", v, joinPath(parent, name)))
			return
		}
		if len(l) < p.minItems {
			*issues = append(*issues, fmt.Sprintf("Array must contain at least %d element(s) at %s", p.minItems, joinPath(parent, name)))
		}
		if p.items != nil && len(l) > 0 {
			path := joinPath(parent, name)
			for i, x := range l {
				check(x, true, *p.items, path, strconv.Itoa(i), issues)
			}
		}
	}
}

func scalar(x any) bool {
	switch x.(type) {
	case nil, string, float64, bool:
		return true
	}
	return false
}

func allScalar(m map[string]any) bool {
	for _, x := range m {
		if !scalar(x) {
			return false
		}
	}
	return true
}

func expected(want string, v any, path string) string {
	return fmt.Sprintf("Expected %s, received %s at %s", want, jsonType(v), path)
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "unknown"
}

// topKeys lists the keys of a JSON object in the order they appear, each
// once. raw is known to be a valid object.
func topKeys(raw []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		k, _ := t.(string)
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return keys
		}
	}
	return keys
}

// Accessors. Each is called only after decodeArgs checked the type, so a
// wrong type cannot reach them; they still never panic.

func (a *args) str(name string) string {
	s, _ := a.m[name].(string)
	return s
}

// optStr is a string argument that is left unset when absent.
func (a *args) optStr(name string) *string {
	s, ok := a.m[name].(string)
	if !ok {
		return nil
	}
	return &s
}

func (a *args) boolean(name string) bool {
	b, _ := a.m[name].(bool)
	return b
}

func (a *args) optInt32(name string) *int32 {
	f, ok := a.m[name].(float64)
	if !ok {
		return nil
	}
	n := int32(f)
	return &n
}

// object is an object argument as a Struct; {} when absent.
func (a *args) object(name string) (*structpb.Struct, error) {
	m, _ := a.m[name].(map[string]any)
	return toStruct(m)
}

// objectJSON is an object argument as JSON ({} when absent), the form
// engine-svc prefers to a Struct.
func (a *args) objectJSON(name string) ([]byte, error) {
	m, _ := a.m[name].(map[string]any)
	if m == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(m)
}

// optObject is an object argument as a Struct; nil when absent.
func (a *args) optObject(name string) (*structpb.Struct, error) {
	m, ok := a.m[name].(map[string]any)
	if !ok {
		return nil, nil
	}
	return toStruct(m)
}

func (a *args) list(name string) []any {
	l, _ := a.m[name].([]any)
	return l
}

func toStruct(m map[string]any) (*structpb.Struct, error) {
	if m == nil {
		return &structpb.Struct{Fields: map[string]*structpb.Value{}}, nil
	}
	return structpb.NewStruct(m)
}
