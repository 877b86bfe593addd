package schema

import (
	"fmt"
	"math"
	"testing"
)

// TestFlatSchemasDecideAsTheValidator runs every property type, with and
// without required and additionalProperties, against values of every
// JSON type: the flat check and the validator must agree on each.
func TestFlatSchemasDecideAsTheValidator(t *testing.T) {
	t.Parallel()
	values := []any{"s", "", 1.0, 0.0, math.Copysign(0, -1), 1.5, -3.0, 1e300, 4.5e15 + 0.5, true, false, nil, []any{}, map[string]any{}}
	n := 0
	for _, typ := range []string{"string", "integer", "number", "boolean"} {
		for _, required := range []bool{false, true} {
			for _, closed := range []bool{false, true} {
				src := fmt.Sprintf(`{"type":"object","title":"t","properties":{"v":{"type":%q,"description":"d"}}`, typ)
				if required {
					src += `,"required":["v"]`
				}
				if closed {
					src += `,"additionalProperties":false`
				}
				s := mustCompile(t, src+"}")
				if s.flat == nil {
					t.Fatalf("%s is not flat", src)
				}
				instances := []any{map[string]any{}, map[string]any{"other": 1.0}, "not an object", nil}
				for _, v := range values {
					instances = append(instances, map[string]any{"v": v}, map[string]any{"v": v, "w": "extra"})
				}
				for _, inst := range instances {
					if fast, lib := s.flat.valid(inst), s.compiled.Validate(inst) == nil; fast != lib {
						t.Errorf("%s: %#v: flat check %v, validator %v", src, inst, fast, lib)
					}
					n++
				}
			}
		}
	}
	t.Logf("%d schema-value pairs", n)
}

func TestSchemasThatSayMoreAreNotFlat(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`{"type":"object","properties":{"v":{"type":"string","enum":["a"]}}}`,
		`{"type":"object","properties":{"v":{"type":"number","minimum":0}}}`,
		`{"type":"object","properties":{"v":{"type":["string","null"]}}}`,
		`{"type":"object","properties":{"v":{}}}`,
		`{"type":"object","properties":{"v":{"type":"object"}}}`,
		`{"type":"object","minProperties":1}`,
		`{"type":"object","additionalProperties":{"type":"string"}}`,
		`{"type":"array"}`,
		`{"required":["v"]}`,
	} {
		if s := mustCompile(t, src); s.flat != nil {
			t.Errorf("%s is taken as flat", src)
		}
	}
}
