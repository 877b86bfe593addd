package condition

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// Field is the workflow field a condition belongs to; the three fields
// evaluate the same grammar slightly differently (spec §7.4).
type Field int

const (
	FieldWhen Field = iota
	FieldPrecondition
	FieldAbortUnless
)

func (f Field) String() string {
	switch f {
	case FieldWhen:
		return "when"
	case FieldPrecondition:
		return "preconditions"
	case FieldAbortUnless:
		return "abort_unless"
	default:
		return "Field(" + strconv.Itoa(int(f)) + ")"
	}
}

// Scope is what a condition can read.
type Scope struct {
	// Outputs holds the recorded output of each step, by step name.
	Outputs map[string]any
	Params  map[string]any
	// Settlement maps a step to {failed, settled_by_default,
	// validation_rejections}; only completed or failed steps have an entry.
	Settlement map[string]map[string]any
}

// Result records one evaluated condition (the "leaf" of skip records).
type Result struct {
	Leaf          string
	LHSPresent    bool
	ResolvedValue any
	Passed        bool
	// ResolutionError is set only for FieldAbortUnless when the path finds
	// nothing or reads run.params: the run fails instead of aborting.
	ResolutionError bool
}

// Eval evaluates c for field f against s.
func (c *Condition) Eval(f Field, s Scope) Result {
	r := Result{Leaf: c.Text}
	if c.Root == RootParams && f != FieldWhen {
		// Only `when` reads run params; the others treat it as unreadable.
		r.ResolutionError = f == FieldAbortUnless
		return r
	}
	v, ok := c.resolve(s)
	r.LHSPresent, r.ResolvedValue = ok, v
	if !ok && f == FieldAbortUnless {
		r.ResolutionError = true
		return r
	}
	if !c.HasOp {
		r.Passed = ok && Truthy(v)
		return r
	}
	if c.Value == nil && c.Op == "==" && f != FieldWhen {
		// Only `when` understands `== null`.
		return r
	}
	r.Passed = compare(v, ok, c.Op, c.Value)
	return r
}

func (c *Condition) resolve(s Scope) (any, bool) {
	switch c.Root {
	case RootParams:
		if s.Params == nil {
			return nil, false
		}
		return Lookup(s.Params, c.Field)
	case RootSettlement:
		facts, ok := s.Settlement[c.Step]
		if !ok {
			return nil, false
		}
		return Lookup(facts, c.Field)
	default:
		out, ok := s.Outputs[c.Step]
		if !ok {
			return nil, false
		}
		return Lookup(out, c.Field)
	}
}

// EvalAll evaluates every condition (all are recorded) and passes only if
// all pass (a list means AND). An empty list passes.
func EvalAll(f Field, conds []*Condition, s Scope) (bool, []Result) {
	passed := true
	results := make([]Result, 0, len(conds))
	for _, c := range conds {
		r := c.Eval(f, s)
		if !r.Passed || r.ResolutionError {
			passed = false
		}
		results = append(results, r)
	}
	return passed, results
}

// compare applies the §7.3 table. present is false when the path found
// nothing.
func compare(v any, present bool, op string, lit any) bool {
	if !present {
		return op == "==" && lit == nil
	}
	switch op {
	case "==":
		return equal(v, lit)
	case "!=":
		return !equal(v, lit)
	}
	a, aok := ToFloat(v)
	b, bok := ToFloat(lit)
	if !aok || !bok {
		return false
	}
	switch op {
	case ">":
		return a > b
	case ">=":
		return a >= b
	case "<":
		return a < b
	case "<=":
		return a <= b
	}
	return false
}

// equal compares a resolved value with a literal (string, float64, bool or
// nil). Lists and maps never equal anything (JS identity semantics).
func equal(v, lit any) bool {
	if lit == nil || v == nil {
		return lit == nil && v == nil
	}
	if a, ok := ToFloat(v); ok {
		b, ok := ToFloat(lit)
		return ok && a == b
	}
	switch x := v.(type) {
	case string:
		y, ok := lit.(string)
		return ok && x == y
	case bool:
		y, ok := lit.(bool)
		return ok && x == y
	}
	return false
}

// Truthy is JavaScript truthiness, except that lists and maps are always
// true (spec §7.3 "path alone").
func Truthy(v any) bool {
	if v == nil {
		return false
	}
	if f, ok := ToFloat(v); ok {
		return f != 0 && !math.IsNaN(f)
	}
	switch x := v.(type) {
	case bool:
		return x
	case string:
		return x != ""
	}
	rv := reflect.ValueOf(v)
	if (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface) && rv.IsNil() {
		return false
	}
	return true
}

// ToFloat reports whether v is a JSON number (any Go numeric kind or
// json.Number) and returns it as float64.
func ToFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case bool, string, nil:
		return 0, false
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(rv.Uint()), true
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	}
	return 0, false
}

// Lookup walks v along path. Maps are indexed by key (a numeric segment on
// a map is a key too); lists by a 0-based decimal index. It reports false
// when the path finds nothing; a present JSON null returns (nil, true).
func Lookup(v any, path []string) (any, bool) {
	cur := v
	for _, seg := range path {
		switch x := cur.(type) {
		case map[string]any:
			next, ok := x[seg]
			if !ok {
				return nil, false
			}
			cur = next
			continue
		case []any:
			i, ok := index(seg)
			if !ok || i >= len(x) {
				return nil, false
			}
			cur = x[i]
			continue
		case nil:
			return nil, false
		}
		next, ok := lookupReflect(cur, seg)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

func lookupReflect(cur any, seg string) (any, bool) {
	rv := reflect.ValueOf(cur)
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			return nil, false
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, false
		}
		e := rv.MapIndex(reflect.ValueOf(seg).Convert(rv.Type().Key()))
		if !e.IsValid() {
			return nil, false
		}
		return e.Interface(), true
	case reflect.Slice, reflect.Array:
		i, ok := index(seg)
		if !ok || i >= rv.Len() {
			return nil, false
		}
		return rv.Index(i).Interface(), true
	}
	return nil, false
}

func index(seg string) (int, bool) {
	if seg == "" {
		return 0, false
	}
	for i := 0; i < len(seg); i++ {
		if seg[i] < '0' || seg[i] > '9' {
			return 0, false
		}
	}
	i, err := strconv.Atoi(seg)
	if err != nil {
		return 0, false
	}
	return i, true
}

// FormatValue renders a resolved value as compact JSON for records and
// inspect lines ("discard" in quotes, 12, true, null). A value the path did
// not find prints as "missing".
func FormatValue(v any, present bool) string {
	if !present {
		return "missing"
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "null"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Describe gives the inspect form used in skip records: [lhs → <JSON value>].
func Describe(r Result) string {
	return "[lhs → " + FormatValue(r.ResolvedValue, r.LHSPresent) + "]"
}
