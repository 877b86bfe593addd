package workflow

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/realm-go/realm/pkg/schema"
)

// compileSchema decodes and compiles one JSON Schema block (spec §9.3).
// step is "" for params_schema. It returns the decoded value.
func (l *loader) compileSchema(step, block string, p pair) any {
	if isNull(p.Value) {
		l.errf("%s'%s' is null, not a schema (a JSON-Schema block is an object, or the boolean true/false); write a schema under '%s', or remove it.%s", stepPrefix(step), block, block, lineOf(p.Key))
		return nil
	}
	v := l.jsonOf(p.Value, fmt.Sprintf("%s'%s'", stepPrefix(step), block))
	l.compileValue(step, block, p, v)
	return v
}

func stepPrefix(step string) string {
	if step == "" {
		return ""
	}
	return fmt.Sprintf("Step '%s': ", step)
}

// compileValue compiles an already decoded block and reports its problems
// at the line of the offending keyword.
func (l *loader) compileValue(step, block string, p pair, v any) *schema.Schema {
	switch v.(type) {
	case map[string]any, bool:
	default:
		l.errf("%s'%s' is not a valid JSON Schema — a JSON-Schema block is an object, or the boolean true/false (found %s).%s", stepPrefix(step), block, kindName(p.Value), lineOf(p.Key))
		return nil
	}
	compiled, problems := schema.Compile(block, v)
	failed := false
	for _, pr := range problems {
		at := p.Key
		if len(pr.Path) > 0 {
			if n := nodeAt(p.Value, pr.Path); n != nil {
				at = n
			}
		}
		msg := stepPrefix(step) + pr.Message + lineOf(at)
		if pr.Severity == SeverityWarning {
			code := pr.Code
			if code == "" {
				code = "SCHEMA_STRICT_ADVISORY"
			}
			scope := "workflow"
			if step != "" {
				scope = "step"
			}
			key := block
			if len(pr.Path) > 0 {
				key = pr.Path[len(pr.Path)-1]
			}
			l.warn(Diagnostic{Code: code, Message: msg, Scope: scope, Step: step, Key: key}, at)
			continue
		}
		failed = true
		l.rep.Errors = append(l.rep.Errors, msg)
	}
	if failed {
		return nil
	}
	return compiled
}

// stepSchemas compiles a step's schema blocks and runs the checks that need
// them: default_output against output_schema, structured_output eligibility.
func (l *loader) stepSchemas(s *stepSrc) {
	c := l.checks[s.name]
	if c == nil || c.kind == "" {
		return
	}
	for _, block := range []string{"input_schema", "output_schema", "trace_schema"} {
		p, ok := c.use[block]
		if !ok {
			continue
		}
		if c.nullSchemas[block] {
			l.errf("Step '%s': '%s' is null, not a schema (a JSON-Schema block is an object, or the boolean true/false); write a schema under '%s', or remove it.%s", s.name, block, block, lineOf(p.Key))
			continue
		}
		c.compiled[block] = l.compileValue(s.name, block, p, c.schemaVals[block])
	}
	st := c.st
	if ve := st.ValidationExhaustion; ve != nil && ve.HasDefaultOutput {
		if out := c.compiled["output_schema"]; out != nil {
			if errs := out.Validate(ve.DefaultOutput); len(errs) > 0 {
				b, _ := json.Marshal(errs)
				c.errf("'validation_exhaustion.default_output' does not validate against the step's own 'output_schema': %s%s", b, c.at())
			}
		}
	}
	if st.StructuredOutput == "strict" {
		c.structuredOutput()
	}
}

// structuredOutput applies the load-time eligibility rules of
// `structured_output: strict` (spec §11.2): the enforced schema must be an
// object whose every object forbids additional properties.
func (c *stepCheck) structuredOutput() {
	sch := c.st.OutputSchema
	if sch == nil {
		sch = c.st.InputSchema
	}
	if sch == nil {
		c.errf("'structured_output: strict' needs an 'input_schema' or 'output_schema' the provider can enforce — declare one, or remove 'structured_output'%s", c.at())
		return
	}
	root, ok := sch.(map[string]any)
	if !ok || root["type"] != "object" {
		c.errf("'structured_output: strict' is not eligible for this step's schema — give 'the schema root' 'type: object'%s", c.at())
		return
	}
	if where := missingAdditionalProperties(root, nil, 0); where != nil {
		loc := "the schema root"
		if len(where) > 0 {
			loc = strings.Join(where, "/")
		}
		c.errf("'structured_output: strict' is not eligible for this step's schema — add 'additionalProperties: false' at '%s'%s", loc, c.at())
	}
}

// missingAdditionalProperties returns the path of the first object schema
// without `additionalProperties: false`, or nil when every one has it.
func missingAdditionalProperties(s map[string]any, path []string, depth int) []string {
	if depth > 32 {
		return nil
	}
	_, hasProps := s["properties"]
	if s["type"] == "object" || hasProps {
		if ap, ok := s["additionalProperties"].(bool); !ok || ap {
			return append([]string{}, path...)
		}
	}
	if props, ok := s["properties"].(map[string]any); ok {
		for _, name := range sortedKeys(props) {
			if sub, ok := props[name].(map[string]any); ok {
				if w := missingAdditionalProperties(sub, append(path, "properties", name), depth+1); w != nil {
					return w
				}
			}
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		if w := missingAdditionalProperties(items, append(path, "items"), depth+1); w != nil {
			return w
		}
	}
	for _, kw := range []string{"anyOf", "oneOf", "allOf"} {
		if list, ok := s[kw].([]any); ok {
			for i, e := range list {
				if sub, ok := e.(map[string]any); ok {
					if w := missingAdditionalProperties(sub, append(path, kw, fmt.Sprint(i)), depth+1); w != nil {
						return w
					}
				}
			}
		}
	}
	for _, kw := range []string{"definitions", "$defs"} {
		if defs, ok := s[kw].(map[string]any); ok {
			for _, name := range sortedKeys(defs) {
				if sub, ok := defs[name].(map[string]any); ok {
					if w := missingAdditionalProperties(sub, append(path, kw, name), depth+1); w != nil {
						return w
					}
				}
			}
		}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
