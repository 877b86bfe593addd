// Package schema checks workflow JSON-Schema blocks against realm's strict
// draft-07 dialect (spec §9.2, §9.3) and validates values against them,
// reporting errors worded as Ajv words them, since the product contract shows
// Ajv's output (instancePath, schemaPath, keyword, params, message).
//
// Validation itself runs on github.com/santhosh-tekuri/jsonschema/v6; this
// package maps its error tree to Ajv's errors and Ajv's order.
package schema

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Problem is one load-time finding about a schema block. Message is the full
// text without position; the loader adds the step prefix and line suffix.
type Problem struct {
	Severity string   // "error" | "warning"
	Code     string   // "SCHEMA_STRICT_ADVISORY" for warnings, "" for errors
	Message  string   // full message, no position suffix
	Path     []string // path inside the block to the offending keyword; nil for the block itself
}

// Schema is a compiled block: compile once, validate many (safe for concurrent use).
type Schema struct {
	block    string
	raw      any
	compiled *jsonschema.Schema
	index    map[string]map[string]any // santhosh fragment → schema object
	order    map[string]map[string]int // santhosh fragment → property rank
	flat     *flat                     // non-nil: valid values are decided without the validator (flat.go)
}

// Error is one validation error in Ajv's shape.
type Error struct {
	InstancePath string         `json:"instancePath"`
	SchemaPath   string         `json:"schemaPath"`
	Keyword      string         `json:"keyword"`
	Params       map[string]any `json:"params"`
	Message      string         `json:"message"`
}

// Text renders "<instancePath> <message>", or the bare message for the root,
// as trace-schema messages show it (§9.1).
func (e Error) Text() string {
	if e.InstancePath == "" {
		return e.Message
	}
	return e.InstancePath + " " + e.Message
}

// RootedText renders like Text but names the root "(root)", as params
// messages do (§3.2).
func (e Error) RootedText() string {
	p := e.InstancePath
	if p == "" {
		p = "(root)"
	}
	return p + " " + e.Message
}

// Valid reports whether v satisfies s; a nil schema accepts everything.
func Valid(s *Schema, v any) bool {
	if s == nil {
		return true
	}
	inst := s.instance(v)
	if s.flat != nil && s.flat.valid(inst) {
		return true
	}
	return s.compiled.Validate(inst) == nil
}

// Compile checks block value v (decoded JSON or YAML) against the strict
// dialect and compiles it. The *Schema is nil when any Problem is an error.
func Compile(block string, v any) (*Schema, []Problem) {
	if v == nil {
		return nil, []Problem{{Severity: SeverityError, Message: fmt.Sprintf("'%s' is null, not a schema (a JSON-Schema block is an object, or the boolean true/false); write a schema under '%s', or remove it.", block, block)}}
	}
	doc, err := normalize(v)
	if err != nil {
		return nil, []Problem{{Severity: SeverityError, Message: fmt.Sprintf("'%s' is not a valid JSON Schema — %v. %s — write the block as plain JSON values.", block, err, consequenceOf(block))}}
	}
	c := &checker{block: block, root: doc, index: map[string]map[string]any{}}
	switch doc.(type) {
	case map[string]any, bool:
		c.schema(nil, doc, nil)
	default:
		c.problems = append(c.problems, Problem{Severity: SeverityError, Message: fmt.Sprintf("'%s' is not a valid JSON Schema — a JSON-Schema block is an object, or the boolean true/false (%s here). %s — write a schema under '%s', or remove it.", block, snippet(block, doc), consequenceOf(block), block)})
	}
	for _, p := range c.problems {
		if p.Severity == SeverityError {
			return nil, c.problems
		}
	}
	compiled, err := compile(block, doc)
	if err != nil {
		// The dialect checks should have caught it; say what the validator said.
		return nil, append(c.problems, Problem{Severity: SeverityError, Message: fmt.Sprintf("'%s' is not a valid JSON Schema — %s. %s — fix the schema, or remove it.", block, oneLine(err), consequenceOf(block))})
	}
	s := &Schema{block: block, raw: doc, compiled: compiled, index: c.index, order: map[string]map[string]int{}, flat: flatOf(doc)}
	for ptr, obj := range c.index {
		s.order[ptr] = propertyOrder(obj)
	}
	return s, c.problems
}

// refuseAll is the compiler's URL loader: realm never fetches a schema.
type refuseAll struct{}

func (refuseAll) Load(url string) (any, error) {
	return nil, errors.New("realm fetches no remote schemas")
}

const baseURL = "urn:realm:schema:"

func compile(block string, doc any) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.UseLoader(refuseAll{})
	url := baseURL + block
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// Validate returns every error of v against s in Ajv's order: the first is
// the one a refusal names.
func (s *Schema) Validate(v any) []Error {
	if s == nil {
		return nil
	}
	inst := s.instance(v)
	if s.flat != nil && s.flat.valid(inst) {
		return nil
	}
	err := s.compiled.Validate(inst)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return []Error{{Keyword: "type", Params: map[string]any{}, Message: oneLine(err)}}
	}
	m := &mapper{s: s, inst: inst}
	return m.node(verr, "", nil)
}

// instance returns v in the shape the validator reads; plain decoded JSON
// passes through untouched (validation runs on every answer).
func (s *Schema) instance(v any) any {
	if plainJSON(v) {
		return v
	}
	if n, err := normalize(v); err == nil {
		return n
	}
	return v
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// normalize turns decoded YAML/JSON into the JSON data model: objects as
// map[string]any, arrays as []any, numbers as float64.
func normalize(v any) (any, error) {
	switch x := v.(type) {
	case nil, bool, string, float64:
		return x, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			n, err := normalize(e)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			n, err := normalize(e)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("object keys must be strings, not %v", k)
			}
			n, err := normalize(e)
			if err != nil {
				return nil, err
			}
			out[ks] = n
		}
		return out, nil
	case interface{ Float64() (float64, error) }: // json.Number
		f, err := x.Float64()
		return f, err
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(rv.Uint()), nil
	case reflect.Float32:
		return rv.Float(), nil
	case reflect.Slice:
		out := make([]any, rv.Len())
		for i := range out {
			n, err := normalize(rv.Index(i).Interface())
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("object keys must be strings")
		}
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			n, err := normalize(it.Value().Interface())
			if err != nil {
				return nil, err
			}
			out[it.Key().String()] = n
		}
		return out, nil
	}
	return nil, fmt.Errorf("%T is not a JSON value", v)
}

func plainJSON(v any) bool {
	switch x := v.(type) {
	case nil, bool, string:
		return true
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	case map[string]any:
		for _, e := range x {
			if !plainJSON(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !plainJSON(e) {
				return false
			}
		}
		return true
	}
	return false
}
