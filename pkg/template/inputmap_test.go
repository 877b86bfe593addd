package template

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func inputScope() Scope {
	return Scope{
		Params: map[string]any{"mailbox": "ap@example.com", "order_name": "X"},
		Resources: map[string]any{
			"parse": map[string]any{
				"number": "INV-7",
				"lines":  []any{map[string]any{"sku": "A"}, map[string]any{"sku": "B"}},
			},
			"po":          map[string]any{"lines": []any{map[string]any{"sku": "P1"}}},
			"$settlement": map[string]map[string]any{"parse": {"failed": false, "validation_rejections": 0}},
		},
		WorkflowContext: map[string]string{"style": "text"},
	}
}

func yamlMap(t *testing.T, src string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(src), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBuildInputMapSpecExample builds the §8.1 example.
func TestBuildInputMapSpecExample(t *testing.T) {
	t.Parallel()
	m := yamlMap(t, `
number: context.resources.parse.number
lines: context.resources.parse.lines          # whole list copied
meta:
  source: { $literal: email }
  received_by: run.params.mailbox
currency: { $literal: EUR }
note: context.resources.parse.comment         # omitted if absent
`)
	got, err := BuildInputMap(m, inputScope())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"number":   "INV-7",
		"lines":    []any{map[string]any{"sku": "A"}, map[string]any{"sku": "B"}},
		"meta":     map[string]any{"source": "email", "received_by": "ap@example.com"},
		"currency": "EUR",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v\nwant %#v", got, want)
	}
}

func TestBuildInputMapValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		want map[string]any
	}{
		{"list index path", "sku: context.resources.po.lines.0.sku", map[string]any{"sku": "P1"}},
		{"settlement path", "f: context.resources.$settlement.parse.failed", map[string]any{"f": false}},
		{"whole params subtree", "p: run.params", map[string]any{"p": map[string]any{"mailbox": "ap@example.com", "order_name": "X"}}},
		{"path without root omitted", "id: po.id", map[string]any{}},
		{"workflow context not available", "s: workflow.context.style", map[string]any{}},
		{"template string is a path that finds nothing", "name: 'name:#{{ run.params.order_name }}'", map[string]any{}},
		{"literal that looks like a path", "p: { $literal: run.params.mailbox }", map[string]any{"p": "run.params.mailbox"}},
		{"literal number", "n: { $literal: 3 }", map[string]any{"n": 3}},
		{"literal list", "l: { $literal: [1, true] }", map[string]any{"l": []any{1, true}}},
		{"literal map with $-keys", "m: { $literal: { $ref: x } }", map[string]any{"m": map[string]any{"$ref": "x"}}},
		{"literal null", "z: { $literal: null }", map[string]any{"z": nil}},
		{"nested map keeps key when all children absent", "meta: { a: run.params.none }", map[string]any{"meta": map[string]any{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := BuildInputMap(yamlMap(t, tt.src), inputScope())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v want %#v", got, tt.want)
			}
		})
	}
}

func TestBuildInputMapRefusals(t *testing.T) {
	t.Parallel()
	deep := "a:\n"
	indent := "  "
	for i := 0; i < 10; i++ {
		deep += strings.Repeat(indent, i+1) + "b:\n"
	}
	deep += strings.Repeat(indent, 11) + "c: run.params.mailbox\n"
	okDeep := "a:\n"
	for i := 0; i < 8; i++ {
		okDeep += strings.Repeat(indent, i+1) + "b:\n"
	}
	okDeep += strings.Repeat(indent, 9) + "c: run.params.mailbox\n"
	tests := []struct {
		name string
		src  string
		want string // "" means accepted
	}{
		{"list refused", "lines: [a, b]", `input_map path "lines": expected a string or object, got array`},
		{"number refused", "n: 3", `input_map path "n": expected a string or object, got number`},
		{"boolean refused", "b: true", `input_map path "b": expected a string or object, got boolean`},
		{"nested key named in message", "meta: { n: 1.5 }", `input_map path "meta.n": expected a string or object, got number`},
		{"unknown directive", "x: { $lit: 1 }", `input_map path "x": unknown directive '$lit' — supported directives: $literal. Did you mean '$literal'? To pass literal data containing $-keys, wrap the subtree in $literal. input_map values are context paths, nested maps, or $literal — templated strings are not supported.`},
		{"unknown directive at top level", "$env: HOME", `input_map path "$env": unknown directive '$env' — supported directives: $literal. Did you mean '$literal'? To pass literal data containing $-keys, wrap the subtree in $literal. input_map values are context paths, nested maps, or $literal — templated strings are not supported.`},
		{"literal with siblings", "x: { $literal: 1, other: run.params.mailbox }", `input_map path "x": $literal node must have exactly one key ($literal); found sibling keys`},
		{"too deep", deep, "exceeded maximum nesting depth of 10"},
		{"ten levels accepted", okDeep, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := yamlMap(t, tt.src)
			for _, check := range []func() error{
				func() error { _, err := BuildInputMap(m, inputScope()); return err },
				func() error { return ValidateInputMap(m) },
			} {
				err := check()
				if tt.want == "" {
					if err != nil {
						t.Errorf("unexpected error %v", err)
					}
					continue
				}
				var ie *InputMapError
				if !errors.As(err, &ie) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("err %v want %q", err, tt.want)
				}
				if !strings.HasSuffix(tt.want, "10") && err != nil && err.Error() != tt.want {
					t.Errorf("err %q want exactly %q", err.Error(), tt.want)
				}
			}
		})
	}
}

func TestBuildInputMapNil(t *testing.T) {
	t.Parallel()
	got, err := BuildInputMap(nil, Scope{})
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("got %v, %v; want empty map", got, err)
	}
}

func TestBuiltFromParamsFollowsTheEntryThatBuildsTheKey(t *testing.T) {
	t.Parallel()
	m := yamlMap(t, `
email: run.params.email
all: run.params
number: context.resources.parse.number
meta:
  received_by: run.params.mailbox
  source: { $literal: email }
currency: { $literal: { code: EUR } }
odd: run.paramsx.y
`)
	cases := []struct {
		key  []string
		want bool
	}{
		{[]string{"email"}, true},
		{[]string{"all", "nested", "deeper"}, true}, // a value that holds the key
		{[]string{"number"}, false},
		{[]string{"meta", "received_by"}, true},
		{[]string{"meta", "source"}, false},
		{[]string{"meta"}, false}, // built by the map itself
		{[]string{"currency", "code"}, false},
		{[]string{"missing"}, false}, // the map does not build it
		{[]string{"odd"}, false},
		{nil, false}, // the whole input
	}
	for _, c := range cases {
		if got := BuiltFromParams(m, c.key); got != c.want {
			t.Errorf("BuiltFromParams(%v) = %v, want %v", c.key, got, c.want)
		}
	}
}
