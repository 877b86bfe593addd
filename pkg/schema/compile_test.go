package schema

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// setup decodes a JSON literal the way the loader hands blocks over.
func setup(t testing.TB, src string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(src), &v); err != nil {
		t.Fatalf("bad test JSON %s: %v", src, err)
	}
	return v
}

const inputConsequence = "Every execute_step submission to this step would be rejected with that error at run time"

func TestCompileRefusesWithPublishedMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		block  string
		schema string
		want   string
		path   []string
	}{
		{
			name:   "bad type value",
			block:  "input_schema",
			schema: `{"type":"banana"}`,
			want:   "'input_schema' is not a valid JSON Schema — 'type' must be one of array, boolean, integer, null, number, object, string ('type: banana' here). " + inputConsequence + " — write one of those types, or remove 'type'.",
			path:   []string{"type"},
		},
		{
			name:   "misspelt keyword suggests the right one",
			block:  "input_schema",
			schema: `{"type":"object","properties":{"summary":{"type":"string","minlength":10}}}`,
			want:   "'input_schema' is refused by realm's validator — 'minlength' is not a JSON-Schema keyword ('minlength: 10' here), at \"input_schema/properties/summary\". " + inputConsequence + " — remove 'minlength', or write 'minLength' if that is what you meant.",
			path:   []string{"properties", "summary", "minlength"},
		},
		{
			name:   "misspelling by edit distance",
			block:  "input_schema",
			schema: `{"type":"object","requried":["a"]}`,
			want:   "'input_schema' is refused by realm's validator — 'requried' is not a JSON-Schema keyword ('requried: [a]' here), at \"input_schema\". " + inputConsequence + " — remove 'requried', or write 'required' if that is what you meant.",
			path:   []string{"requried"},
		},
		{
			name:   "unknown keyword",
			block:  "input_schema",
			schema: `{"type":"string","colour":"red"}`,
			want:   "'input_schema' is refused by realm's validator — 'colour' is not a JSON-Schema keyword ('colour: red' here), at \"input_schema\". " + inputConsequence + " — remove 'colour', or correct its spelling.",
			path:   []string{"colour"},
		},
		{
			name:   "x- keyword",
			block:  "input_schema",
			schema: `{"type":"string","x-note":"hi"}`,
			want:   "'input_schema' is refused by realm's validator — 'x-note' is not a JSON-Schema keyword ('x-note: hi' here), at \"input_schema\". " + inputConsequence + " — remove it, or move it to the top of the workflow file, where the 'x-' extension namespace lives.",
			path:   []string{"x-note"},
		},
		{
			name:   "format whatever its value",
			block:  "input_schema",
			schema: `{"type":"object","properties":{"email":{"type":"string","format":"email"}}}`,
			want:   "'input_schema' is refused by realm's validator — the 'format' keyword is unsupported, whatever its value ('format: email' here), at \"input_schema/properties/email\". " + inputConsequence + " — remove the 'format' keyword, or replace it with a 'pattern' that expresses the string shape you need.",
			path:   []string{"properties", "email", "format"},
		},
		{
			name:   "ref to a missing definition",
			block:  "input_schema",
			schema: `{"type":"object","properties":{"a":{"$ref":"#/definitions/nope"}}}`,
			want:   "'input_schema' is refused by realm's validator — '$ref' points at a definition this block does not have ('$ref: #/definitions/nope' here), at \"input_schema/properties/a\". " + inputConsequence + " — add that definition, or remove 'properties'.",
			path:   []string{"properties", "a", "$ref"},
		},
		{
			name:   "remote ref",
			block:  "input_schema",
			schema: `{"$ref":"https://example.com/s.json"}`,
			want:   "'input_schema' is refused by realm's validator — '$ref' points outside this block, and realm fetches no remote schemas ('$ref: https://example.com/s.json' here), at \"input_schema\". " + inputConsequence + " — copy the schema you need under 'definitions' in this block and point '$ref' at '#/definitions/<name>'.",
			path:   []string{"$ref"},
		},
		{
			name:   "empty enum",
			block:  "input_schema",
			schema: `{"enum":[]}`,
			want:   "'input_schema' is not a valid JSON Schema — 'enum' must not be empty ('enum: []' here). " + inputConsequence + " — add at least one value to 'enum', or remove it.",
			path:   []string{"enum"},
		},
		{
			name:   "required not a list",
			block:  "input_schema",
			schema: `{"type":"object","required":"summary"}`,
			want:   "'input_schema' is not a valid JSON Schema — 'required' must be a list ('required: summary' here). " + inputConsequence + " — give 'required' a list.",
			path:   []string{"required"},
		},
		{
			name:   "null block",
			block:  "input_schema",
			schema: `null`,
			want:   "'input_schema' is null, not a schema (a JSON-Schema block is an object, or the boolean true/false); write a schema under 'input_schema', or remove it.",
		},
		{
			name:   "params consequence",
			block:  "params_schema",
			schema: `{"colour":"red"}`,
			want:   "'params_schema' is refused by realm's validator — 'colour' is not a JSON-Schema keyword ('colour: red' here), at \"params_schema\". Every run start would be refused with that error at run time — remove 'colour', or correct its spelling.",
			path:   []string{"colour"},
		},
		{
			name:   "output consequence",
			block:  "output_schema",
			schema: `{"colour":"red"}`,
			want:   "'output_schema' is refused by realm's validator — 'colour' is not a JSON-Schema keyword ('colour: red' here), at \"output_schema\". Every agent submission to this step would be rejected with that error at run time — remove 'colour', or correct its spelling.",
			path:   []string{"colour"},
		},
		{
			name:   "trace consequence",
			block:  "trace_schema",
			schema: `{"colour":"red"}`,
			want:   "'trace_schema' is refused by realm's validator — 'colour' is not a JSON-Schema keyword ('colour: red' here), at \"trace_schema\". Every trace submission for this step would fail with that error at run time — remove 'colour', or correct its spelling.",
			path:   []string{"colour"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, probs := Compile(tt.block, setup(t, tt.schema))
			if s != nil {
				t.Fatalf("Compile accepted a refused schema")
			}
			if len(probs) != 1 {
				t.Fatalf("got %d problems, want 1: %+v", len(probs), probs)
			}
			want := Problem{Severity: SeverityError, Message: tt.want, Path: tt.path}
			if !reflect.DeepEqual(probs[0], want) {
				t.Errorf("problem\n got %#v\nwant %#v", probs[0], want)
			}
		})
	}
}

func TestCompileRefusesOtherDialectBreaches(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema, contains string
	}{
		{"later-draft keyword", `{"type":"array","prefixItems":[{"type":"string"}]}`, "'prefixItems' belongs to a later JSON-Schema draft"},
		{"later draft named by $schema", `{"$schema":"https://json-schema.org/draft/2020-12/schema"}`, "'$schema' names a later JSON-Schema draft"},
		{"unknown dialect", `{"$schema":"http://json-schema.org/draft-04/schema#"}`, "names a dialect realm's validator does not know"},
		{"a schema that is a number", `{"type":"object","properties":{"a":5}}`, "a schema must be an object or the boolean true/false ('a: 5' here)"},
		{"block that is a string", `"object"`, "a JSON-Schema block is an object, or the boolean true/false ('input_schema: object' here)"},
		{"negative minLength", `{"type":"string","minLength":-1}`, "'minLength' must be a non-negative integer ('minLength: -1' here)"},
		{"bad pattern", `{"type":"string","pattern":"(a"}`, "'pattern' must be a regular expression realm can run"},
		{"empty anyOf", `{"anyOf":[]}`, "'anyOf' must be a non-empty list of schemas"},
		{"format inside a definition", `{"definitions":{"d":{"type":"string","format":"date"}}}`, "the 'format' keyword is unsupported"},
		{"$id", `{"$id":"http://x/y"}`, "'$id' is not accepted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, probs := Compile("input_schema", setup(t, tt.schema))
			if s != nil || len(probs) == 0 {
				t.Fatalf("Compile accepted it: %v %+v", s, probs)
			}
			if probs[0].Severity != SeverityError || !strings.Contains(probs[0].Message, tt.contains) {
				t.Errorf("problem %q does not say %q", probs[0].Message, tt.contains)
			}
			if !strings.Contains(probs[0].Message, inputConsequence) {
				t.Errorf("problem %q lacks the run-time consequence", probs[0].Message)
			}
		})
	}
}

func TestCompileWarnsStrictAdvisories(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		schema string
		want   []Problem
	}{
		{
			name:   "type as a list",
			schema: `{"type":"object","properties":{"amount":{"type":["string","number"]}}}`,
			want: []Problem{{Severity: SeverityWarning, Code: CodeStrictAdvisory, Path: []string{"properties", "amount", "type"},
				Message: "'input_schema' compiles, but Ajv warns: strict mode: use allowUnionTypes to allow union type keyword at \"input_schema/properties/amount\" (strictTypes). Remedy: realm does not enable union types — write anyOf: [{type: string}, {type: number}] instead. This advisory clears when the schema is fixed; nothing is printed at run time."}},
		},
		{
			name:   "minLength without type string",
			schema: `{"type":"object","properties":{"summary":{"minLength":10}}}`,
			want: []Problem{{Severity: SeverityWarning, Code: CodeStrictAdvisory, Path: []string{"properties", "summary", "minLength"},
				Message: "'input_schema' compiles, but Ajv warns: strict mode: missing type \"string\" for keyword \"minLength\" at \"input_schema/properties/summary\" (strictTypes). Remedy: add type: string beside minLength, or remove minLength. This advisory clears when the schema is fixed; nothing is printed at run time."}},
		},
		{name: "nullable pair is no union", schema: `{"type":["string","null"],"minLength":1}`},
		{name: "integer carries number keywords", schema: `{"type":"integer","minimum":0,"multipleOf":2}`},
		{name: "anyOf branches inherit the type", schema: `{"type":"string","anyOf":[{"minLength":1},{"pattern":"^a"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, probs := Compile("input_schema", setup(t, tt.schema))
			if s == nil {
				t.Fatalf("Compile refused a schema it should accept: %+v", probs)
			}
			if !reflect.DeepEqual(probs, tt.want) {
				t.Errorf("problems\n got %#v\nwant %#v", probs, tt.want)
			}
		})
	}
}

func TestCompileAcceptsTheDialect(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, schema string }{
		{"boolean true", `true`},
		{"boolean false", `false`},
		{"boolean subschemas", `{"type":"object","properties":{"a":true,"b":false}}`},
		{"ref to definitions", `{"type":"object","properties":{"a":{"$ref":"#/definitions/d"}},"definitions":{"d":{"type":"string"}}}`},
		{"ref to $defs", `{"type":"object","properties":{"a":{"$ref":"#/$defs/d"}},"$defs":{"d":{"type":"string"}}}`},
		{"recursive ref to root", `{"type":"object","properties":{"child":{"$ref":"#"}}}`},
		{"draft-07 $schema", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"string"}`},
		{"annotations", `{"type":"string","title":"t","description":"d","default":"x","examples":["y"],"$comment":"c"}`},
		{"property named like a keyword", `{"type":"object","properties":{"format":{"type":"string"},"x-y":{"type":"string"}}}`},
		{"enum and const carry any data", `{"enum":[{"format":"x"}],"const":{"colour":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, probs := Compile("output_schema", setup(t, tt.schema))
			if s == nil {
				t.Fatalf("refused: %+v", probs)
			}
			for _, p := range probs {
				if p.Severity == SeverityError {
					t.Errorf("error problem on an accepted schema: %+v", p)
				}
			}
		})
	}
}

func TestCompileAcceptsYAMLDecodedNumbers(t *testing.T) {
	t.Parallel()
	s, probs := Compile("input_schema", map[string]any{"type": "string", "minLength": 3})
	if s == nil {
		t.Fatalf("refused: %+v", probs)
	}
	errs := s.Validate("ab")
	if len(errs) != 1 || errs[0].Message != "must NOT have fewer than 3 characters" {
		t.Errorf("got %+v", errs)
	}
}

func TestCompileNeverFetches(t *testing.T) {
	t.Parallel()
	// Even past the dialect checks, the compiler's loader refuses every URL.
	if _, err := compile("input_schema", map[string]any{"$ref": "http://127.0.0.1:1/never.json"}); err == nil {
		t.Fatal("compile resolved a remote $ref")
	} else if !strings.Contains(err.Error(), "realm fetches no remote schemas") {
		t.Errorf("remote $ref failed for another reason: %v", err)
	}
}
