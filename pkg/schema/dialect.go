package schema

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Severity values of a Problem.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// CodeStrictAdvisory marks the strict-mode advisories a schema block may carry (§9.3).
const CodeStrictAdvisory = "SCHEMA_STRICT_ADVISORY"

// consequence is the run-time phrase each block's refusals carry (§9.3).
var consequence = map[string]string{
	"params_schema": "Every run start would be refused with that error at run time",
	"input_schema":  "Every execute_step submission to this step would be rejected with that error at run time",
	"output_schema": "Every agent submission to this step would be rejected with that error at run time",
	"trace_schema":  "Every trace submission for this step would fail with that error at run time",
	// An adapter's (spec §13.1), which the runner registers.
	"config_schema": "Every workflow that configures a step of this adapter would be refused with that error at registration",
}

func consequenceOf(block string) string {
	if c, ok := consequence[block]; ok {
		return c
	}
	return "Every check against this block would fail with that error at run time"
}

// keyword classes of the accepted draft-07 dialect.
var (
	schemaValued = set("additionalProperties", "additionalItems", "contains", "propertyNames", "not", "if", "then", "else")
	schemaLists  = set("allOf", "anyOf", "oneOf")
	schemaMaps   = set("properties", "patternProperties", "definitions", "$defs")
	nonNegInts   = set("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
	numbers      = set("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
	strings_     = set("title", "description", "$comment", "contentEncoding", "contentMediaType")
	booleans     = set("uniqueItems", "readOnly", "writeOnly")
	anyValued    = set("const", "default")
	special      = set("type", "enum", "required", "items", "dependencies", "pattern", "multipleOf", "$ref", "$schema", "examples", "format", "$id")
	laterDraft   = map[string]string{
		"prefixItems":           "write a list of schemas under 'items' instead",
		"unevaluatedProperties": "use 'additionalProperties' instead",
		"unevaluatedItems":      "use 'additionalItems' instead",
		"dependentRequired":     "use 'dependencies' with a list of property names instead",
		"dependentSchemas":      "use 'dependencies' with a schema instead",
		"minContains":           "remove it; draft-07 'contains' asks for at least one match",
		"maxContains":           "remove it; draft-07 has no upper bound on 'contains' matches",
		"$anchor":               "name the schema under 'definitions' and '$ref' it as '#/definitions/<name>' instead",
		"$dynamicAnchor":        "name the schema under 'definitions' and '$ref' it as '#/definitions/<name>' instead",
		"$dynamicRef":           "write a '$ref' to '#/definitions/<name>' instead",
		"$recursiveAnchor":      "name the schema under 'definitions' and '$ref' it as '#/definitions/<name>' instead",
		"$recursiveRef":         "write a '$ref' to '#/definitions/<name>' instead",
		"$vocabulary":           "remove it",
		"deprecated":            "remove it, or say so in 'description'",
		"contentSchema":         "remove it",
	}
	simpleTypes = []string{"array", "boolean", "integer", "null", "number", "object", "string"}
)

// typed keywords in Ajv's registration order, with the type each needs (strictTypes).
var typedKeywords = []struct{ kw, typ string }{
	{"maximum", "number"}, {"minimum", "number"}, {"exclusiveMaximum", "number"}, {"exclusiveMinimum", "number"}, {"multipleOf", "number"},
	{"maxLength", "string"}, {"minLength", "string"}, {"pattern", "string"},
	{"maxProperties", "object"}, {"minProperties", "object"}, {"required", "object"},
	{"maxItems", "array"}, {"minItems", "array"}, {"uniqueItems", "array"},
	{"propertyNames", "object"}, {"additionalProperties", "object"}, {"dependencies", "object"}, {"properties", "object"}, {"patternProperties", "object"},
	{"additionalItems", "array"}, {"items", "array"}, {"contains", "array"},
}

// knownKeywords lists every keyword a misspelling may be matched against.
var knownKeywords = func() []string {
	var all []string
	for _, m := range []map[string]bool{schemaValued, schemaLists, schemaMaps, nonNegInts, numbers, strings_, booleans, anyValued, special} {
		for k := range m {
			all = append(all, k)
		}
	}
	sort.Strings(all)
	return all
}()

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// checker walks one block and collects its problems.
type checker struct {
	block    string
	root     any
	problems []Problem
	index    map[string]map[string]any // encoded pointer → schema object
}

func (c *checker) errorf(path []string, msg string) {
	c.problems = append(c.problems, Problem{Severity: SeverityError, Message: msg, Path: clone(path)})
}

func (c *checker) warn(path []string, msg string) {
	c.problems = append(c.problems, Problem{Severity: SeverityWarning, Code: CodeStrictAdvisory, Message: msg, Path: clone(path)})
}

// invalid words a value the draft-07 meta-schema itself refuses.
func (c *checker) invalid(path []string, detail, snip, remedy string) {
	c.errorf(path, fmt.Sprintf("'%s' is not a valid JSON Schema — %s (%s here). %s — %s", c.block, detail, snip, consequenceOf(c.block), remedy))
}

// refused words a schema draft-07 allows but realm's strict dialect does not.
func (c *checker) refused(path []string, detail, snip, remedy string) {
	c.errorf(path, fmt.Sprintf("'%s' is refused by realm's validator — %s (%s here), at %q. %s — %s", c.block, detail, snip, c.location(path[:len(path)-1]), consequenceOf(c.block), remedy))
}

func (c *checker) location(path []string) string {
	return strings.Join(append([]string{c.block}, path...), "/")
}

// schema checks one schema position; ctxTypes are the types Ajv infers from
// the enclosing schema for the same value (anyOf branches and the like).
func (c *checker) schema(path []string, v any, ctxTypes []string) {
	switch s := v.(type) {
	case bool:
		return
	case map[string]any:
		c.object(path, s, ctxTypes)
	default:
		name := "schema"
		if len(path) > 0 {
			name = path[len(path)-1]
		}
		c.invalid(path, "a schema must be an object or the boolean true/false", snippet(name, v), fmt.Sprintf("write a schema at %q, or remove it.", c.location(path)))
	}
}

func (c *checker) object(path []string, s map[string]any, ctxTypes []string) {
	c.index[encodePointer(path)] = s
	eff := ownTypes(s)
	if len(eff) == 0 {
		eff = ctxTypes
	}
	for _, k := range sortedKeys(s) {
		c.keyword(path, k, s[k], eff)
	}
	c.strictTypes(path, s, eff)
}

func (c *checker) keyword(parent []string, k string, v any, eff []string) {
	path := append(clone(parent), k)
	snip := snippet(k, v)
	switch {
	case schemaValued[k]:
		c.schema(path, v, sameValueTypes(k, eff))
	case schemaLists[k]:
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			c.invalid(path, fmt.Sprintf("'%s' must be a non-empty list of schemas", k), snip, fmt.Sprintf("give '%s' a list of schemas, or remove it.", k))
			return
		}
		for i, item := range list {
			c.schema(append(clone(path), strconv.Itoa(i)), item, eff)
		}
	case schemaMaps[k]:
		m, ok := v.(map[string]any)
		if !ok {
			c.invalid(path, fmt.Sprintf("'%s' must be a mapping of names to schemas", k), snip, fmt.Sprintf("give '%s' a mapping of names to schemas, or remove it.", k))
			return
		}
		for _, name := range sortedKeys(m) {
			if k == "patternProperties" {
				if _, err := regexp.Compile(name); err != nil {
					c.invalid(append(clone(path), name), fmt.Sprintf("'patternProperties' names must be regular expressions, and %q is not one (%v)", name, err), snippet(name, m[name]), "fix the expression, or remove the entry.")
					continue
				}
			}
			c.schema(append(clone(path), name), m[name], nil)
		}
	case nonNegInts[k]:
		if f, ok := v.(float64); !ok || f < 0 || f != math.Trunc(f) {
			c.invalid(path, fmt.Sprintf("'%s' must be a non-negative integer", k), snip, fmt.Sprintf("give '%s' a whole number, 0 or more, or remove it.", k))
		}
	case numbers[k]:
		if _, ok := v.(float64); !ok {
			c.invalid(path, fmt.Sprintf("'%s' must be a number", k), snip, fmt.Sprintf("give '%s' a number, or remove it.", k))
		}
	case strings_[k]:
		if _, ok := v.(string); !ok {
			c.invalid(path, fmt.Sprintf("'%s' must be a string", k), snip, fmt.Sprintf("give '%s' a string, or remove it.", k))
		}
	case booleans[k]:
		if _, ok := v.(bool); !ok {
			c.invalid(path, fmt.Sprintf("'%s' must be true or false", k), snip, fmt.Sprintf("give '%s' true or false, or remove it.", k))
		}
	case anyValued[k]:
	case k == "examples":
		if _, ok := v.([]any); !ok {
			c.invalid(path, "'examples' must be a list", snip, "give 'examples' a list of example values, or remove it.")
		}
	case k == "type":
		c.typeKeyword(path, v, snip)
	case k == "enum":
		list, ok := v.([]any)
		switch {
		case !ok:
			c.invalid(path, "'enum' must be a list", snip, "give 'enum' a list of the allowed values, or remove it.")
		case len(list) == 0:
			c.invalid(path, "'enum' must not be empty", snip, "add at least one value to 'enum', or remove it.")
		}
	case k == "required":
		c.required(path, v, snip)
	case k == "items":
		if list, ok := v.([]any); ok {
			for i, item := range list {
				c.schema(append(clone(path), strconv.Itoa(i)), item, nil)
			}
			return
		}
		c.schema(path, v, nil)
	case k == "dependencies":
		m, ok := v.(map[string]any)
		if !ok {
			c.invalid(path, "'dependencies' must be a mapping of property names to schemas or lists of property names", snip, "give 'dependencies' such a mapping, or remove it.")
			return
		}
		for _, name := range sortedKeys(m) {
			if list, ok := m[name].([]any); ok {
				if !allStrings(list) {
					c.invalid(append(clone(path), name), "a 'dependencies' list must name properties as strings", snippet(name, m[name]), "list property names only.")
				}
				continue
			}
			c.schema(append(clone(path), name), m[name], eff)
		}
	case k == "pattern":
		p, ok := v.(string)
		if !ok {
			c.invalid(path, "'pattern' must be a string", snip, "give 'pattern' a regular expression, or remove it.")
			return
		}
		if _, err := regexp.Compile(p); err != nil {
			c.invalid(path, fmt.Sprintf("'pattern' must be a regular expression realm can run (%v)", err), snip, "rewrite the expression without look-around or back-references, or remove 'pattern'.")
		}
	case k == "multipleOf":
		if f, ok := v.(float64); !ok || f <= 0 {
			c.invalid(path, "'multipleOf' must be a number greater than 0", snip, "give 'multipleOf' a positive number, or remove it.")
		}
	case k == "$ref":
		c.ref(path, v, snip)
	case k == "$schema":
		c.dialect(path, v, snip)
	case k == "$id":
		c.refused(path, "'$id' is not accepted: a realm schema block has no address of its own, and '$ref' resolves only inside the block", snip, "remove '$id'.")
	case k == "format":
		c.refused(path, "the 'format' keyword is unsupported, whatever its value", snip, "remove the 'format' keyword, or replace it with a 'pattern' that expresses the string shape you need.")
	default:
		c.unknown(path, k, snip)
	}
}

func (c *checker) unknown(path []string, k, snip string) {
	if remedy, ok := laterDraft[k]; ok {
		c.refused(path, fmt.Sprintf("'%s' belongs to a later JSON-Schema draft than the draft-07 realm validates", k), snip, fmt.Sprintf("remove '%s', or %s.", k, strings.TrimPrefix(remedy, "remove it; ")))
		return
	}
	detail := fmt.Sprintf("'%s' is not a JSON-Schema keyword", k)
	switch {
	case strings.HasPrefix(strings.ToLower(k), "x-"):
		c.refused(path, detail, snip, "remove it, or move it to the top of the workflow file, where the 'x-' extension namespace lives.")
	case suggest(k) != "":
		c.refused(path, detail, snip, fmt.Sprintf("remove '%s', or write '%s' if that is what you meant.", k, suggest(k)))
	default:
		c.refused(path, detail, snip, fmt.Sprintf("remove '%s', or correct its spelling.", k))
	}
}

func (c *checker) typeKeyword(path []string, v any, snip string) {
	detail := "'type' must be one of " + strings.Join(simpleTypes, ", ")
	remedy := "write one of those types, or remove 'type'."
	switch t := v.(type) {
	case string:
		if !isSimpleType(t) {
			c.invalid(path, detail, snip, remedy)
		}
	case []any:
		seen := map[string]bool{}
		for _, item := range t {
			s, ok := item.(string)
			if !ok || !isSimpleType(s) || seen[s] {
				c.invalid(path, detail+", each at most once", snip, remedy)
				return
			}
			seen[s] = true
		}
		if len(t) == 0 {
			c.invalid(path, detail, snip, remedy)
		}
	default:
		c.invalid(path, detail, snip, remedy)
	}
}

func (c *checker) required(path []string, v any, snip string) {
	list, ok := v.([]any)
	if !ok {
		c.invalid(path, "'required' must be a list", snip, "give 'required' a list.")
		return
	}
	seen := map[string]bool{}
	for _, item := range list {
		s, ok := item.(string)
		if !ok {
			c.invalid(path, "'required' must list property names as strings", snip, "give 'required' a list of property names.")
			return
		}
		if seen[s] {
			c.invalid(path, fmt.Sprintf("'required' must not name '%s' twice", s), snip, fmt.Sprintf("name '%s' once.", s))
			return
		}
		seen[s] = true
	}
}

func (c *checker) ref(path []string, v any, snip string) {
	ref, ok := v.(string)
	if !ok {
		c.invalid(path, "'$ref' must be a string", snip, "give '$ref' a '#/definitions/<name>' reference, or remove it.")
		return
	}
	if !strings.HasPrefix(ref, "#") {
		c.refused(path, "'$ref' points outside this block, and realm fetches no remote schemas", snip, "copy the schema you need under 'definitions' in this block and point '$ref' at '#/definitions/<name>'.")
		return
	}
	if _, ok := resolvePointer(c.root, ref[1:]); !ok {
		holder := path[0]
		c.refused(path, "'$ref' points at a definition this block does not have", snip, fmt.Sprintf("add that definition, or remove '%s'.", holder))
	}
}

func (c *checker) dialect(path []string, v any, snip string) {
	s, _ := v.(string)
	norm := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(s, "https://"), "http://"), "#")
	switch {
	case norm == "json-schema.org/draft-07/schema":
	case strings.Contains(norm, "2019-09") || strings.Contains(norm, "2020-12") || strings.Contains(norm, "json-schema.org/draft/"):
		c.refused(path, "'$schema' names a later JSON-Schema draft than the draft-07 realm validates", snip, "remove '$schema', or name http://json-schema.org/draft-07/schema#.")
	default:
		c.refused(path, "'$schema' names a dialect realm's validator does not know; it validates draft-07 only", snip, "remove '$schema', or name http://json-schema.org/draft-07/schema#.")
	}
}

// strictTypes reproduces Ajv's strictTypes advisories for one schema object.
func (c *checker) strictTypes(path []string, s map[string]any, eff []string) {
	types := ownTypes(s)
	if len(types) > 1 && !(len(types) == 2 && contains(types, "null")) {
		alts := make([]string, len(types))
		for i, t := range types {
			alts[i] = "{type: " + t + "}"
		}
		c.warn(append(clone(path), "type"), fmt.Sprintf("'%s' compiles, but Ajv warns: strict mode: use allowUnionTypes to allow union type keyword at %q (strictTypes). Remedy: realm does not enable union types — write anyOf: [%s] instead. This advisory clears when the schema is fixed; nothing is printed at run time.", c.block, c.location(path), strings.Join(alts, ", ")))
	}
	types = eff
	for _, tk := range typedKeywords {
		if _, ok := s[tk.kw]; !ok {
			continue
		}
		if contains(types, tk.typ) || (tk.typ == "number" && contains(types, "integer")) {
			continue
		}
		c.warn(append(clone(path), tk.kw), fmt.Sprintf("'%s' compiles, but Ajv warns: strict mode: missing type %q for keyword %q at %q (strictTypes). Remedy: add type: %s beside %s, or remove %s. This advisory clears when the schema is fixed; nothing is printed at run time.", c.block, tk.typ, tk.kw, c.location(path), tk.typ, tk.kw, tk.kw))
	}
}

// sameValueTypes gives the context types for a subschema of keyword k:
// the enclosing types when it checks the same value, none otherwise.
func sameValueTypes(k string, eff []string) []string {
	switch k {
	case "not", "if", "then", "else":
		return eff
	}
	return nil
}

func ownTypes(s map[string]any) []string {
	switch t := s["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if str, ok := x.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	return nil
}

// suggest names the keyword k most likely misspells, or "".
func suggest(k string) string {
	lower := strings.ToLower(k)
	best, bestD := "", 3
	for _, kw := range knownKeywords {
		if strings.ToLower(kw) == lower {
			return kw
		}
		if len(k) < 4 {
			continue
		}
		if d := editDistance(lower, strings.ToLower(kw)); d < bestD {
			best, bestD = kw, d
		}
	}
	for kw := range laterDraft {
		if strings.ToLower(kw) == lower {
			return kw
		}
	}
	return best
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// snippet renders 'key: value' the way the published messages quote it.
func snippet(k string, v any) string {
	s := k + ": " + flow(v)
	if r := []rune(s); len(r) > 60 {
		s = string(r[:59]) + "…"
	}
	return "'" + s + "'"
}

func flow(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return x
	case float64:
		return formatNumber(x)
	case bool:
		return strconv.FormatBool(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = flow(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		keys := sortedKeys(x)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ": " + flow(x[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}

// formatNumber prints a number as JavaScript would.
func formatNumber(f float64) string {
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		mant, exp, _ := strings.Cut(s, "e")
		exp = strings.TrimLeft(strings.TrimPrefix(exp, "+"), "0")
		if strings.HasPrefix(exp, "-") {
			exp = "-" + strings.TrimLeft(exp[1:], "0")
		} else {
			exp = "+" + exp
		}
		return mant + "e" + exp
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

func isSimpleType(s string) bool { return contains(simpleTypes, s) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func allStrings(list []any) bool {
	for _, x := range list {
		if _, ok := x.(string); !ok {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func clone(p []string) []string {
	if p == nil {
		return nil
	}
	return append([]string(nil), p...)
}
