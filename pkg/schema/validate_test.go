package schema

import (
	"reflect"
	"testing"
)

func mustCompile(t testing.TB, src string) *Schema {
	t.Helper()
	s, probs := Compile("input_schema", setup(t, src))
	if s == nil {
		t.Fatalf("Compile refused %s: %+v", src, probs)
	}
	return s
}

func TestValidateReproducesTheSeedRefusal(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","required":["category"],"properties":{"category":{"type":"string","enum":["billing","bug","other"]}}}`)
	got := s.Validate(setup(t, `{"category":"refund"}`))
	want := []Error{{
		InstancePath: "/category",
		SchemaPath:   "#/properties/category/enum",
		Keyword:      "enum",
		Params:       map[string]any{"allowedValues": []any{"billing", "bug", "other"}},
		Message:      "must be equal to one of the allowed values",
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v\nwant %#v", got, want)
	}
}

func TestValidateWordsErrorsAsAjv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema, value string
		want                Error // the first error
	}{
		{"required", `{"type":"object","required":["path"]}`, `{}`,
			Error{"", "#/required", "required", map[string]any{"missingProperty": "path"}, "must have required property 'path'"}},
		{"type", `{"type":"object","properties":{"n":{"type":"number"}}}`, `{"n":"x"}`,
			Error{"/n", "#/properties/n/type", "type", map[string]any{"type": "number"}, "must be number"}},
		{"type list", `{"type":["string","number"]}`, `true`,
			Error{"", "#/type", "type", map[string]any{"type": []any{"string", "number"}}, "must be string,number"}},
		{"const", `{"const":"yes"}`, `"no"`,
			Error{"", "#/const", "const", map[string]any{"allowedValue": "yes"}, "must be equal to constant"}},
		{"minLength", `{"type":"string","minLength":10}`, `"short"`,
			Error{"", "#/minLength", "minLength", map[string]any{"limit": 10.0}, "must NOT have fewer than 10 characters"}},
		{"maxLength", `{"type":"string","maxLength":3}`, `"long"`,
			Error{"", "#/maxLength", "maxLength", map[string]any{"limit": 3.0}, "must NOT have more than 3 characters"}},
		{"minItems", `{"type":"array","minItems":2}`, `[1]`,
			Error{"", "#/minItems", "minItems", map[string]any{"limit": 2.0}, "must NOT have fewer than 2 items"}},
		{"maxItems", `{"type":"array","maxItems":8}`, `[1,2,3,4,5,6,7,8,9]`,
			Error{"", "#/maxItems", "maxItems", map[string]any{"limit": 8.0}, "must NOT have more than 8 items"}},
		{"minimum", `{"type":"number","minimum":1}`, `0`,
			Error{"", "#/minimum", "minimum", map[string]any{"comparison": ">=", "limit": 1.0}, "must be >= 1"}},
		{"maximum", `{"type":"number","maximum":10080}`, `20000`,
			Error{"", "#/maximum", "maximum", map[string]any{"comparison": "<=", "limit": 10080.0}, "must be <= 10080"}},
		{"exclusiveMinimum", `{"type":"number","exclusiveMinimum":0}`, `0`,
			Error{"", "#/exclusiveMinimum", "exclusiveMinimum", map[string]any{"comparison": ">", "limit": 0.0}, "must be > 0"}},
		{"exclusiveMaximum", `{"type":"number","exclusiveMaximum":1.5}`, `2`,
			Error{"", "#/exclusiveMaximum", "exclusiveMaximum", map[string]any{"comparison": "<", "limit": 1.5}, "must be < 1.5"}},
		{"multipleOf", `{"type":"number","multipleOf":5}`, `7`,
			Error{"", "#/multipleOf", "multipleOf", map[string]any{"multipleOf": 5.0}, "must be multiple of 5"}},
		{"pattern", `{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]+-[0-9]+$"}}}`, `{"code":"abc"}`,
			Error{"/code", "#/properties/code/pattern", "pattern", map[string]any{"pattern": "^[A-Z]+-[0-9]+$"}, `must match pattern "^[A-Z]+-[0-9]+$"`}},
		{"additionalProperties", `{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"}}}`, `{"a":"x","b":1}`,
			Error{"", "#/additionalProperties", "additionalProperties", map[string]any{"additionalProperty": "b"}, "must NOT have additional properties"}},
		{"minProperties", `{"type":"object","minProperties":2}`, `{"a":1}`,
			Error{"", "#/minProperties", "minProperties", map[string]any{"limit": 2.0}, "must NOT have fewer than 2 properties"}},
		{"maxProperties", `{"type":"object","maxProperties":1}`, `{"a":1,"b":2}`,
			Error{"", "#/maxProperties", "maxProperties", map[string]any{"limit": 1.0}, "must NOT have more than 1 properties"}},
		{"uniqueItems scalar", `{"type":"array","items":{"type":"number"},"uniqueItems":true}`, `[1,2,1]`,
			Error{"", "#/uniqueItems", "uniqueItems", map[string]any{"i": 0, "j": 2}, "must NOT have duplicate items (items ## 2 and 0 are identical)"}},
		{"uniqueItems objects", `{"type":"array","uniqueItems":true}`, `[{"a":1},2,{"a":1}]`,
			Error{"", "#/uniqueItems", "uniqueItems", map[string]any{"i": 2, "j": 0}, "must NOT have duplicate items (items ## 0 and 2 are identical)"}},
		{"dependencies", `{"type":"object","dependencies":{"card":["billing_address"]}}`, `{"card":"x"}`,
			Error{"", "#/dependencies", "dependencies", map[string]any{"property": "card", "missingProperty": "billing_address", "depsCount": 1, "deps": "billing_address"}, "must have property billing_address when property card is present"}},
		{"propertyNames", `{"type":"object","propertyNames":{"pattern":"^[a-z]+$"}}`, `{"Bad":1}`,
			Error{"", "#/propertyNames/pattern", "pattern", map[string]any{"pattern": "^[a-z]+$"}, `must match pattern "^[a-z]+$"`}},
		{"anyOf reports its branches first", `{"anyOf":[{"type":"string"},{"type":"number"}]}`, `true`,
			Error{"", "#/anyOf/0/type", "type", map[string]any{"type": "string"}, "must be string"}},
		{"oneOf with two passing", `{"oneOf":[{"type":"number"},{"type":"integer"}]}`, `3`,
			Error{"", "#/oneOf", "oneOf", map[string]any{"passingSchemas": []int{0, 1}}, "must match exactly one schema in oneOf"}},
		{"not", `{"not":{"type":"string"}}`, `"x"`,
			Error{"", "#/not", "not", map[string]any{}, "must NOT be valid"}},
		{"contains", `{"type":"array","contains":{"type":"string"}}`, `[1]`,
			Error{"", "#/contains", "contains", map[string]any{"minContains": 1}, "must contain at least 1 valid item(s)"}},
		{"additionalItems", `{"type":"array","items":[{"type":"string"}],"additionalItems":false}`, `["a","b"]`,
			Error{"", "#/additionalItems", "additionalItems", map[string]any{"limit": 1}, "must NOT have more than 1 items"}},
		{"false schema", `{"type":"object","properties":{"gone":false}}`, `{"gone":1}`,
			Error{"/gone", "#/properties/gone", "false schema", map[string]any{}, "boolean schema is false"}},
		{"root false schema", `false`, `1`,
			Error{"", "#", "false schema", map[string]any{}, "boolean schema is false"}},
		{"ref to definitions", `{"type":"object","properties":{"n":{"$ref":"#/definitions/pos"}},"definitions":{"pos":{"type":"number","minimum":0}}}`, `{"n":-1}`,
			Error{"/n", "#/definitions/pos/minimum", "minimum", map[string]any{"comparison": ">=", "limit": 0.0}, "must be >= 0"}},
		{"ref to $defs", `{"type":"array","items":{"$ref":"#/$defs/s"},"$defs":{"s":{"type":"string"}}}`, `["a",2]`,
			Error{"/1", "#/$defs/s/type", "type", map[string]any{"type": "string"}, "must be string"}},
		{"nested pointer escaping", `{"type":"object","properties":{"a/b":{"type":"string"}}}`, `{"a/b":1}`,
			Error{"/a~1b", "#/properties/a~1b/type", "type", map[string]any{"type": "string"}, "must be string"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, tt.schema)
			got := s.Validate(setup(t, tt.value))
			if len(got) == 0 {
				t.Fatal("no errors")
			}
			if !reflect.DeepEqual(got[0], tt.want) {
				t.Errorf("first error\n got %#v\nwant %#v", got[0], tt.want)
			}
			if Valid(s, setup(t, tt.value)) {
				t.Error("Valid says true for an invalid value")
			}
		})
	}
}

func TestValidateOrdersErrorsAsAjv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema, value string
		want                []string // RootedText of every error, in order
	}{
		{"required before additional before properties",
			`{"type":"object","required":["a","b"],"additionalProperties":false,"properties":{"a":{"type":"string"},"b":{"type":"string"}}}`,
			`{"a":1,"z":true}`,
			[]string{"(root) must have required property 'b'", "(root) must NOT have additional properties", "/a must be string"}},
		{"properties in required order, then by name",
			`{"type":"object","required":["z","a"],"properties":{"a":{"type":"string"},"m":{"type":"string"},"z":{"type":"string"}}}`,
			`{"a":1,"m":1,"z":1}`,
			[]string{"/z must be string", "/a must be string", "/m must be string"}},
		{"items in index order",
			`{"type":"array","items":{"type":"string"}}`,
			`[1,"a",2,3]`,
			[]string{"/0 must be string", "/2 must be string", "/3 must be string"}},
		{"anyOf branches then anyOf",
			`{"type":"object","properties":{"x":{"anyOf":[{"type":"string"},{"type":"number"}]}}}`,
			`{"x":true}`,
			[]string{"/x must be string", "/x must be number", "/x must match a schema in anyOf"}},
		{"then branch then if",
			`{"type":"string","if":{"minLength":1},"then":{"maxLength":2}}`,
			`"abc"`,
			[]string{"(root) must NOT have more than 2 characters", `(root) must match "then" schema`}},
		// The validator stops at a failed enum, so only Ajv's first error is
		// reproduced here; that is the one a refusal names.
		{"untyped keywords before string keywords",
			`{"type":"string","minLength":5,"enum":["abcdef","x"]}`,
			`"abc"`,
			[]string{"(root) must be equal to one of the allowed values"}},
		{"oneOf with none passing",
			`{"oneOf":[{"type":"string"},{"type":"boolean"}]}`,
			`1`,
			[]string{"(root) must be string", "(root) must be boolean", "(root) must match exactly one schema in oneOf"}},
		{"propertyNames inner error then its own",
			`{"type":"object","propertyNames":{"maxLength":2}}`,
			`{"abc":1}`,
			[]string{"(root) must NOT have more than 2 characters", "(root) property name must be valid"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, tt.schema)
			var got []string
			for _, e := range s.Validate(setup(t, tt.value)) {
				got = append(got, e.RootedText())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestValidateAcceptsValidValues(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, `{"type":"object","required":["path"],"properties":{"path":{"type":"string","minLength":1},"n":{"$ref":"#/definitions/d"}},"definitions":{"d":{"type":"integer"}}}`)
	for _, v := range []any{setup(t, `{"path":"/a","n":3}`), map[string]any{"path": "/a", "n": 3}} {
		if errs := s.Validate(v); errs != nil {
			t.Errorf("Validate(%v) = %+v, want none", v, errs)
		}
		if !Valid(s, v) {
			t.Errorf("Valid(%v) = false", v)
		}
	}
	if !Valid(nil, "anything") {
		t.Error("a nil schema must accept everything")
	}
	if errs := mustCompile(t, `true`).Validate(setup(t, `{"x":[1]}`)); errs != nil {
		t.Errorf("true schema refused: %+v", errs)
	}
}

func TestErrorText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		err         Error
		text, roots string
	}{
		{"nested", Error{InstancePath: "/code", Message: `must match pattern "^[A-Z]+-[0-9]+$"`}, `/code must match pattern "^[A-Z]+-[0-9]+$"`, `/code must match pattern "^[A-Z]+-[0-9]+$"`},
		{"root", Error{Message: "must have required property 'path'"}, "must have required property 'path'", "(root) must have required property 'path'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.err.Text(); got != tt.text {
				t.Errorf("Text() = %q, want %q", got, tt.text)
			}
			if got := tt.err.RootedText(); got != tt.roots {
				t.Errorf("RootedText() = %q, want %q", got, tt.roots)
			}
		})
	}
}

func BenchmarkValidate(b *testing.B) {
	s := mustCompile(b, `{"type":"object","additionalProperties":false,
		"required":["category","summary","priority","tags","code","confidence"],
		"properties":{
			"category":{"type":"string","enum":["billing","bug","other"]},
			"summary":{"type":"string","minLength":10,"maxLength":500},
			"priority":{"type":"integer","minimum":1,"maximum":5},
			"tags":{"type":"array","items":{"type":"string"},"maxItems":8},
			"code":{"type":"string","pattern":"^[A-Z]+-[0-9]+$"},
			"confidence":{"type":"number","minimum":0,"maximum":1}}}`)
	good := setup(b, `{"category":"bug","summary":"The export button crashes","priority":2,"tags":["ui","export"],"code":"BUG-12","confidence":0.9}`)
	bad := setup(b, `{"category":"refund","summary":"short","priority":9,"tags":[1],"code":"x","confidence":2}`)
	b.Run("valid", func(b *testing.B) {
		for b.Loop() {
			if errs := s.Validate(good); errs != nil {
				b.Fatal(errs)
			}
		}
	})
	b.Run("invalid", func(b *testing.B) {
		for b.Loop() {
			if errs := s.Validate(bad); len(errs) == 0 {
				b.Fatal("no errors")
			}
		}
	})
}
