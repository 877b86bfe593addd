package template

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzBuildInputMap checks that no input_map makes BuildInputMap panic,
// that it refuses exactly what ValidateInputMap refuses (the loader's
// check and the run's agree), that it leaves the input_map and the run as
// they were, builds only keys the input_map names, and hands a $literal
// over verbatim. In plain `go test` only the seed corpus
// (testdata/fuzz/FuzzBuildInputMap) runs.
func FuzzBuildInputMap(f *testing.F) {
	f.Add(`{"email":"run.params.email","order":{"id":"context.resources.lookup.id","raw":{"$literal":{"$x":"run.params.email"}}}}`, `{"email":"a@b.c"}`, `{"lookup":{"id":7}}`)
	f.Add(`{"$literal":1}`, `{}`, `{}`)
	f.Add(`{"a":{"$x":1}}`, `{}`, `{}`)
	f.Add(`{"a":{"$literal":1,"b":2}}`, `{}`, `{}`)
	f.Add(`{"a":3}`, `{}`, `{}`)
	f.Add(`{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"i":{"j":{"k":"run.params.x"}}}}}}}}}}}`, `{"x":1}`, `{}`)
	f.Add(`{"list":"run.params.items.1","deep":"context.resources.s.a.b"}`, `{"items":[1,2]}`, `{"s":{"a":{"b":null}}}`)
	f.Fuzz(func(t *testing.T, inputMap, params, resources string) {
		var m, p, r map[string]any
		if json.Unmarshal([]byte(inputMap), &m) != nil || json.Unmarshal([]byte(params), &p) != nil || json.Unmarshal([]byte(resources), &r) != nil {
			return
		}
		before, _ := json.Marshal([]any{m, p, r})
		scope := Scope{Params: p, Resources: r}
		out, err := BuildInputMap(m, scope)
		if after, _ := json.Marshal([]any{m, p, r}); string(after) != string(before) {
			t.Fatalf("BuildInputMap changed its input:\n%s\n%s", before, after)
		}
		verr := ValidateInputMap(m)
		if (err == nil) != (verr == nil) || err != nil && err.Error() != verr.Error() {
			t.Fatalf("BuildInputMap: %v; ValidateInputMap: %v", err, verr)
		}
		if err != nil {
			if _, ok := err.(*InputMapError); !ok || !strings.HasPrefix(err.Error(), "input_map path ") {
				t.Fatalf("refusal %T %q", err, err)
			}
			return
		}
		if _, jerr := json.Marshal(out); jerr != nil {
			t.Fatalf("output not JSON: %v", jerr)
		}
		again, _ := BuildInputMap(m, scope)
		if !reflect.DeepEqual(out, again) {
			t.Fatalf("two builds differ: %v, %v", out, again)
		}
		checkBuilt(t, m, out)
	})
}

// checkBuilt walks an input_map and what it built: every built key is one
// the map names, and a $literal comes out as written.
func checkBuilt(t *testing.T, m, out map[string]any) {
	t.Helper()
	for k, v := range out {
		src, named := m[k]
		if !named {
			t.Fatalf("built key %q the input_map does not name", k)
		}
		sub, isMap := src.(map[string]any)
		if !isMap {
			continue
		}
		if lit, ok := sub["$literal"]; ok {
			if !reflect.DeepEqual(v, lit) {
				t.Fatalf("$literal under %q came out as %v, want %v", k, v, lit)
			}
			continue
		}
		built, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("the object under %q built %T", k, v)
		}
		checkBuilt(t, sub, built)
	}
}
