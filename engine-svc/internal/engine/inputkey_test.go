package engine

import (
	"fmt"
	"testing"

	"github.com/realm-go/realm/pkg/schema"
)

// The key a schema error refuses decides whether a new run's params are a
// way out for an input_map step, so every error shape the refusal can name
// leads to the property it is about.
func TestRefusedKeyNamesThePropertyTheErrorIsAbout(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  schema.Error
		want string
	}{
		{"a value of the wrong type", schema.Error{InstancePath: "/order_id", Keyword: "type"}, "[order_id]"},
		{"a nested value", schema.Error{InstancePath: "/meta/received_by", Keyword: "type"}, "[meta received_by]"},
		{"a required property missing", schema.Error{Keyword: "required", Params: map[string]any{"missingProperty": "order"}}, "[order]"},
		{"a required property missing below the root", schema.Error{InstancePath: "/meta", Keyword: "required", Params: map[string]any{"missingProperty": "source"}}, "[meta source]"},
		{"a property not allowed", schema.Error{Keyword: "additionalProperties", Params: map[string]any{"additionalProperty": "extra"}}, "[extra]"},
		{"JSON pointer escapes", schema.Error{InstancePath: "/a~1b/c~0d", Keyword: "type"}, "[a/b c~d]"},
		{"the whole input", schema.Error{Keyword: "minProperties"}, "[]"},
	}
	for _, c := range cases {
		if got := fmt.Sprint(refusedKey(c.err)); got != c.want {
			t.Errorf("%s: refusedKey = %s, want %s", c.name, got, c.want)
		}
	}
}
