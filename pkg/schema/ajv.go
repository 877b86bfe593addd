package schema

import (
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// ajvRank is the order Ajv evaluates a schema's keywords in: untyped keywords
// first, then the number, string, array and object groups, each in Ajv's
// registration order. Errors come out in this order.
var ajvRank = map[string]int{
	"false schema": -2, "type": -1,
	"$ref": 0, "const": 1, "enum": 2, "not": 3, "anyOf": 4, "oneOf": 5, "allOf": 6, "if": 7, "then": 7, "else": 7,
	"maximum": 10, "minimum": 11, "exclusiveMaximum": 12, "exclusiveMinimum": 13, "multipleOf": 14,
	"maxLength": 20, "minLength": 21, "pattern": 22,
	"maxItems": 30, "minItems": 31, "additionalItems": 32, "items": 33, "contains": 34, "uniqueItems": 35,
	"maxProperties": 40, "minProperties": 41, "required": 42, "propertyNames": 43, "additionalProperties": 44,
	"dependencies": 45, "properties": 46, "patternProperties": 47,
}

// mapper turns one santhosh error tree into Ajv errors.
type mapper struct {
	s    *Schema
	inst any
	// instPrefix replaces the instance location of errors found while
	// checking a property name (Ajv reports them at the object).
	instPrefix []string
	inNames    bool
}

// node maps n, an error raised while validating the schema at fragment ctx
// (an instance at ctxInst), or inside one of its applicators.
func (m *mapper) node(n *jsonschema.ValidationError, ctx string, ctxInst []string) []Error {
	frag := fragment(n.SchemaURL)
	if frag != ctx && strings.HasPrefix(frag, ctx+"/") {
		return m.branch(n, ctx, ctxInst, frag)
	}
	switch k := n.ErrorKind.(type) {
	case *kind.Group, *kind.Schema:
		return m.siblings(n.Causes, frag, n.InstanceLocation)
	case *kind.Reference:
		return m.siblings(n.Causes, fragment(k.URL), n.InstanceLocation)
	case *kind.AllOf:
		return m.branches(n, frag, "allOf")
	case *kind.AnyOf:
		return append(m.branches(n, frag, "anyOf"), m.err(n, frag, "anyOf", map[string]any{}, "must match a schema in anyOf"))
	case *kind.OneOf:
		var passing any
		if k.Subschemas != nil {
			passing = k.Subschemas
		}
		return append(m.branches(n, frag, "oneOf"), m.err(n, frag, "oneOf", map[string]any{"passingSchemas": passing}, "must match exactly one schema in oneOf"))
	case *kind.PropertyNames:
		saved, savedIn := m.instPrefix, m.inNames
		m.instPrefix, m.inNames = n.InstanceLocation, true
		var out []Error
		for _, c := range n.Causes {
			out = append(out, m.node(c, frag, nil)...)
		}
		m.instPrefix, m.inNames = saved, savedIn
		return append(out, m.err(n, ctxOf(frag, "propertyNames"), "propertyNames", map[string]any{"propertyName": k.Property}, "property name must be valid"))
	}
	return m.leaf(n, frag)
}

// branch maps an error raised inside a subschema of ctx, adding the error
// Ajv raises for the applicator itself when it has one (if/then/else).
func (m *mapper) branch(n *jsonschema.ValidationError, ctx string, ctxInst []string, frag string) []Error {
	rest := strings.Split(frag[len(ctx)+1:], "/")
	take := 1
	switch rest[0] {
	case "properties", "patternProperties", "dependencies", "definitions", "$defs", "allOf", "anyOf", "oneOf":
		take = 2
	case "items":
		if _, isList := m.s.index[ctx]["items"].([]any); isList {
			take = 2
		}
	}
	take = min(take, len(rest))
	child := ctx + "/" + strings.Join(rest[:take], "/")
	childInst := ctxInst
	switch rest[0] {
	case "properties", "patternProperties", "additionalProperties", "items", "additionalItems":
		if len(n.InstanceLocation) > len(ctxInst) {
			childInst = n.InstanceLocation[:len(ctxInst)+1]
		}
	}
	out := m.node(n, child, childInst)
	if rest[0] == "then" || rest[0] == "else" {
		e := Error{
			InstancePath: m.pointer(ctxInst),
			SchemaPath:   "#" + ctx + "/if",
			Keyword:      "if",
			Params:       map[string]any{"failingKeyword": rest[0]},
			Message:      fmt.Sprintf("must match %q schema", rest[0]),
		}
		out = append(out, e)
	}
	return out
}

// siblings maps errors raised by one schema (at ctx), sorted into Ajv order.
func (m *mapper) siblings(causes []*jsonschema.ValidationError, ctx string, ctxInst []string) []Error {
	type ranked struct {
		key  rankKey
		errs []Error
	}
	list := make([]ranked, 0, len(causes))
	for _, c := range causes {
		list = append(list, ranked{m.rank(c, ctx, ctxInst), m.node(c, ctx, ctxInst)})
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].key.less(list[j].key) })
	var out []Error
	for _, r := range list {
		out = append(out, r.errs...)
	}
	return out
}

// branches maps the failing subschemas of allOf/anyOf/oneOf in index order.
func (m *mapper) branches(n *jsonschema.ValidationError, frag, kw string) []Error {
	type indexed struct {
		i    int
		errs []Error
	}
	var list []indexed
	prefix := frag + "/" + kw + "/"
	for _, c := range n.Causes {
		cf := fragment(c.SchemaURL)
		if !strings.HasPrefix(cf, prefix) {
			list = append(list, indexed{math.MaxInt, m.node(c, frag, n.InstanceLocation)})
			continue
		}
		tok, _, _ := strings.Cut(cf[len(prefix):], "/")
		i, _ := strconv.Atoi(tok)
		list = append(list, indexed{i, m.node(c, prefix+tok, n.InstanceLocation)})
	}
	sort.SliceStable(list, func(a, b int) bool { return list[a].i < list[b].i })
	var out []Error
	for _, x := range list {
		out = append(out, x.errs...)
	}
	return out
}

type rankKey struct {
	kw   int
	sub  int
	name string
}

func (a rankKey) less(b rankKey) bool {
	if a.kw != b.kw {
		return a.kw < b.kw
	}
	if a.sub != b.sub {
		return a.sub < b.sub
	}
	return a.name < b.name
}

// rank places error c among the errors of the schema at ctx.
func (m *mapper) rank(c *jsonschema.ValidationError, ctx string, ctxInst []string) rankKey {
	frag := fragment(c.SchemaURL)
	if frag == ctx || !strings.HasPrefix(frag, ctx+"/") {
		kw := "$ref"
		if kp := c.ErrorKind.KeywordPath(); len(kp) > 0 {
			kw = kp[0]
		}
		if _, ok := c.ErrorKind.(*kind.FalseSchema); ok {
			kw = "false schema"
		}
		return rankKey{kw: ajvRank[kw]}
	}
	rest := strings.Split(frag[len(ctx)+1:], "/")
	key := rankKey{kw: ajvRank[rest[0]]}
	var instTok string
	if len(c.InstanceLocation) > len(ctxInst) {
		instTok = c.InstanceLocation[len(ctxInst)]
	}
	switch rest[0] {
	case "properties":
		if len(rest) > 1 {
			name := unescapeToken(rest[1])
			key.sub = m.s.order[ctx][name]
			key.name = name
		}
	case "items", "additionalItems":
		key.sub, _ = strconv.Atoi(instTok)
	case "patternProperties", "additionalProperties":
		key.name = instTok
		if len(rest) > 1 {
			key.name = unescapeToken(rest[1]) + "\x00" + instTok
		}
	case "dependencies":
		if len(rest) > 1 {
			key.name = unescapeToken(rest[1])
		}
	}
	return key
}

// leaf maps one keyword failure to Ajv's error(s).
func (m *mapper) leaf(n *jsonschema.ValidationError, frag string) []Error {
	sch := m.s.index[frag]
	p := map[string]any{}
	switch k := n.ErrorKind.(type) {
	case *kind.FalseSchema:
		return []Error{{InstancePath: m.instPath(n), SchemaPath: "#" + frag, Keyword: "false schema", Params: p, Message: "boolean schema is false"}}
	case *kind.Type:
		t := sch["type"]
		return []Error{m.err(n, frag, "type", map[string]any{"type": t}, "must be "+typeWords(t))}
	case *kind.Enum:
		return []Error{m.err(n, frag, "enum", map[string]any{"allowedValues": sch["enum"]}, "must be equal to one of the allowed values")}
	case *kind.Const:
		return []Error{m.err(n, frag, "const", map[string]any{"allowedValue": sch["const"]}, "must be equal to constant")}
	case *kind.Required:
		out := make([]Error, 0, len(k.Missing))
		for _, miss := range k.Missing {
			out = append(out, m.err(n, frag, "required", map[string]any{"missingProperty": miss}, fmt.Sprintf("must have required property '%s'", miss)))
		}
		return out
	case *kind.AdditionalProperties:
		props := append([]string(nil), k.Properties...)
		sort.Strings(props)
		out := make([]Error, 0, len(props))
		for _, prop := range props {
			out = append(out, m.err(n, frag, "additionalProperties", map[string]any{"additionalProperty": prop}, "must NOT have additional properties"))
		}
		return out
	case *kind.Dependency:
		deps := stringList(m.dependency(sch, k.Prop))
		out := make([]Error, 0, len(k.Missing))
		word := "properties"
		if len(deps) == 1 {
			word = "property"
		}
		for _, miss := range k.Missing {
			out = append(out, m.err(n, frag, "dependencies", map[string]any{"property": k.Prop, "missingProperty": miss, "depsCount": len(deps), "deps": strings.Join(deps, ", ")},
				fmt.Sprintf("must have %s %s when property %s is present", word, strings.Join(deps, ", "), k.Prop)))
		}
		return out
	case *kind.MinLength:
		return []Error{m.limit(n, frag, sch, "minLength", "must NOT have fewer than %s characters")}
	case *kind.MaxLength:
		return []Error{m.limit(n, frag, sch, "maxLength", "must NOT have more than %s characters")}
	case *kind.MinItems:
		return []Error{m.limit(n, frag, sch, "minItems", "must NOT have fewer than %s items")}
	case *kind.MaxItems:
		return []Error{m.limit(n, frag, sch, "maxItems", "must NOT have more than %s items")}
	case *kind.MinProperties:
		return []Error{m.limit(n, frag, sch, "minProperties", "must NOT have fewer than %s properties")}
	case *kind.MaxProperties:
		return []Error{m.limit(n, frag, sch, "maxProperties", "must NOT have more than %s properties")}
	case *kind.Minimum:
		return []Error{m.compare(n, frag, sch, "minimum", ">=")}
	case *kind.Maximum:
		return []Error{m.compare(n, frag, sch, "maximum", "<=")}
	case *kind.ExclusiveMinimum:
		return []Error{m.compare(n, frag, sch, "exclusiveMinimum", ">")}
	case *kind.ExclusiveMaximum:
		return []Error{m.compare(n, frag, sch, "exclusiveMaximum", "<")}
	case *kind.MultipleOf:
		return []Error{m.err(n, frag, "multipleOf", map[string]any{"multipleOf": sch["multipleOf"]}, "must be multiple of "+numWords(sch["multipleOf"]))}
	case *kind.Pattern:
		return []Error{m.err(n, frag, "pattern", map[string]any{"pattern": sch["pattern"]}, fmt.Sprintf("must match pattern \"%s\"", k.Want))}
	case *kind.AdditionalItems:
		items, _ := sch["items"].([]any)
		return []Error{m.err(n, frag, "additionalItems", map[string]any{"limit": len(items)}, fmt.Sprintf("must NOT have more than %d items", len(items)))}
	case *kind.Contains:
		return []Error{m.err(n, frag, "contains", map[string]any{"minContains": 1}, "must contain at least 1 valid item(s)")}
	case *kind.UniqueItems:
		i, j := m.duplicates(n, sch)
		return []Error{m.err(n, frag, "uniqueItems", map[string]any{"i": i, "j": j}, fmt.Sprintf("must NOT have duplicate items (items ## %d and %d are identical)", j, i))}
	case *kind.Not:
		return []Error{m.err(n, frag, "not", p, "must NOT be valid")}
	case *kind.RefCycle:
		return []Error{m.err(n, frag, "$ref", p, "must not refer back to itself without descending into the value")}
	case *kind.InvalidJsonValue:
		return []Error{{InstancePath: m.instPath(n), SchemaPath: "#" + frag, Keyword: "type", Params: p, Message: "must be a JSON value"}}
	}
	kw := "schema"
	if kp := n.ErrorKind.KeywordPath(); len(kp) > 0 {
		kw = kp[0]
	}
	return []Error{m.err(n, frag, kw, p, "must be valid")}
}

func (m *mapper) err(n *jsonschema.ValidationError, frag, kw string, params map[string]any, msg string) Error {
	return Error{InstancePath: m.instPath(n), SchemaPath: "#" + frag + "/" + kw, Keyword: kw, Params: params, Message: msg}
}

func (m *mapper) limit(n *jsonschema.ValidationError, frag string, sch map[string]any, kw, msg string) Error {
	return m.err(n, frag, kw, map[string]any{"limit": sch[kw]}, fmt.Sprintf(msg, numWords(sch[kw])))
}

func (m *mapper) compare(n *jsonschema.ValidationError, frag string, sch map[string]any, kw, cmp string) Error {
	return m.err(n, frag, kw, map[string]any{"comparison": cmp, "limit": sch[kw]}, "must be "+cmp+" "+numWords(sch[kw]))
}

func (m *mapper) dependency(sch map[string]any, prop string) any {
	deps, _ := sch["dependencies"].(map[string]any)
	return deps[prop]
}

// duplicates finds the pair Ajv names: scanning from the end, the first item
// seen again; Ajv's two loops report the pair in opposite orders.
func (m *mapper) duplicates(n *jsonschema.ValidationError, sch map[string]any) (int, int) {
	arr, _ := lookup(m.inst, n.InstanceLocation).([]any)
	var itemTypes []string
	if items, ok := sch["items"].(map[string]any); ok {
		itemTypes = ownTypes(items)
	}
	scalar := len(itemTypes) > 0 && !contains(itemTypes, "object") && !contains(itemTypes, "array")
	if scalar {
		for i := len(arr) - 1; i >= 0; i-- {
			for j := len(arr) - 1; j > i; j-- {
				if jsonEqual(arr[i], arr[j]) {
					return i, j
				}
			}
		}
		return 0, 0
	}
	for i := len(arr) - 1; i > 0; i-- {
		for j := i - 1; j >= 0; j-- {
			if jsonEqual(arr[i], arr[j]) {
				return i, j
			}
		}
	}
	return 0, 0
}

func (m *mapper) instPath(n *jsonschema.ValidationError) string {
	if m.inNames {
		return m.pointer(m.instPrefix)
	}
	return m.pointer(n.InstanceLocation)
}

func (m *mapper) pointer(loc []string) string {
	if len(loc) == 0 {
		return ""
	}
	var b strings.Builder
	for _, tok := range loc {
		b.WriteByte('/')
		b.WriteString(escapeToken(tok))
	}
	return b.String()
}

func ctxOf(frag, kw string) string {
	return strings.TrimSuffix(frag, "/"+kw)
}

func typeWords(t any) string {
	switch x := t.(type) {
	case string:
		return x
	case []any:
		return strings.Join(stringList(x), ",")
	}
	return fmt.Sprint(t)
}

func numWords(v any) string {
	if f, ok := v.(float64); ok {
		return formatNumber(f)
	}
	return fmt.Sprint(v)
}

func stringList(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// fragment returns the JSON-pointer fragment of a santhosh schema location.
func fragment(loc string) string {
	if i := strings.IndexByte(loc, '#'); i >= 0 {
		return loc[i+1:]
	}
	return ""
}

func escapeToken(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

func unescapeToken(tok string) string {
	if u, err := url.PathUnescape(tok); err == nil {
		tok = u
	}
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
}

// encodePointer spells a schema path the way santhosh spells locations.
func encodePointer(path []string) string {
	var b strings.Builder
	for _, tok := range path {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(escapeToken(tok)))
	}
	return b.String()
}

// resolvePointer follows a fragment pointer ("" or "/a/b") inside doc.
func resolvePointer(doc any, frag string) (any, bool) {
	if frag == "" {
		return doc, true
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, false
	}
	cur := doc
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = unescapeToken(tok)
		switch x := cur.(type) {
		case map[string]any:
			v, ok := x[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			cur = x[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func lookup(doc any, loc []string) any {
	cur := doc
	for _, tok := range loc {
		switch x := cur.(type) {
		case map[string]any:
			cur = x[tok]
		case []any:
			i, _ := strconv.Atoi(tok)
			if i < 0 || i >= len(x) {
				return nil
			}
			cur = x[i]
		default:
			return nil
		}
	}
	return cur
}

// propertyOrder ranks a schema's properties: required ones in 'required'
// order, then the rest by name (decoded maps keep no source order).
func propertyOrder(obj map[string]any) map[string]int {
	props, _ := obj["properties"].(map[string]any)
	if len(props) == 0 {
		return nil
	}
	order := make(map[string]int, len(props))
	n := 0
	for _, r := range stringList(obj["required"]) {
		if _, ok := props[r]; ok {
			if _, seen := order[r]; !seen {
				order[r] = n
				n++
			}
		}
	}
	for _, k := range sortedKeys(props) {
		if _, seen := order[k]; !seen {
			order[k] = n
			n++
		}
	}
	return order
}

func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}
