package schema

import (
	"encoding/json"
	"testing"
)

// FuzzCompile checks that no schema block makes Compile or Validate panic,
// that a schema comes back exactly when no problem is an error, that
// Compile leaves the block as it was, and that Validate and Valid agree on
// every instance. In plain `go test` only the seed corpus
// (testdata/fuzz/FuzzCompile) runs.
func FuzzCompile(f *testing.F) {
	f.Add(`{"type":"object","required":["total"],"properties":{"total":{"type":"number","minimum":0}},"additionalProperties":false}`, `{"total":-1}`)
	f.Add(`{"type":"array","items":{"enum":["a","b"]},"uniqueItems":true}`, `["a","a"]`)
	f.Add(`{"oneOf":[{"type":"string","pattern":"^x"},{"type":"integer"}]}`, `1.5`)
	f.Add(`{"$ref":"https://example.com/s.json"}`, `{}`)
	f.Add(`{"type":"banana"}`, `null`)
	f.Add(`true`, `{}`)
	f.Add(`{"type":"object","required":["n"],"properties":{"n":{"type":"integer"},"note":{"type":"string","description":"d"},"ok":{"type":"boolean"},"x":{"type":"number"}},"additionalProperties":false}`, `{"n":1.0,"note":"x","ok":true,"x":-0.5}`)
	f.Add(`{"type":"object","properties":{"n":{"type":"integer"}}}`, `{"n":1.5,"other":[1]}`)
	f.Fuzz(func(t *testing.T, block, instance string) {
		var doc any
		if json.Unmarshal([]byte(block), &doc) != nil {
			return
		}
		before, _ := json.Marshal(doc)
		s, problems := Compile("output_schema", doc)
		if after, _ := json.Marshal(doc); string(after) != string(before) {
			t.Fatalf("Compile changed the block:\n%s\n%s", before, after)
		}
		hasError := false
		for _, p := range problems {
			if p.Message == "" {
				t.Fatalf("a problem without a message: %+v", p)
			}
			switch p.Severity {
			case SeverityError:
				hasError = true
			case SeverityWarning:
			default:
				t.Fatalf("problem severity %q", p.Severity)
			}
		}
		if (s == nil) != hasError {
			t.Fatalf("schema %v with error problems %v: %+v", s != nil, hasError, problems)
		}
		if s == nil {
			return
		}
		var inst any
		if json.Unmarshal([]byte(instance), &inst) != nil {
			return
		}
		if s.flat != nil {
			inst := s.instance(inst)
			if fast, lib := s.flat.valid(inst), s.compiled.Validate(inst) == nil; fast != lib {
				t.Fatalf("flat check %v, validator %v, for %s against %s", fast, lib, instance, block)
			}
		}
		errs := s.Validate(inst)
		if (len(errs) == 0) != Valid(s, inst) {
			t.Fatalf("Validate %v but Valid %v for %s against %s", errs, Valid(s, inst), instance, block)
		}
		for _, e := range errs {
			if e.Message == "" || e.Keyword == "" {
				t.Fatalf("an error without message or keyword: %+v", e)
			}
			if _, err := json.Marshal(e); err != nil {
				t.Fatalf("error not JSON: %v", err)
			}
		}
	})
}
