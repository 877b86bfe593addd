package provider

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzExtractJSON checks that no model text makes ExtractJSON panic, that
// what it finds is a JSON object, and the round trip: an object the text
// is (or holds between plain prose, or in a fence) is the object found.
// In plain `go test` only the seed corpus (testdata/fuzz/FuzzExtractJSON)
// runs.
func FuzzExtractJSON(f *testing.F) {
	f.Add("Here it is:\n```json\n{\"verdict\":\"approve\",\"notes\":[\"a\"]}\n```\nDone.", "The answer is")
	f.Add(`{"a":"}"} and then {"b":{"c":"\"{"}}`, "")
	f.Add("```\n{not json}\n```\n{\"x\":1}", "prose")
	f.Add(`{"a":1`, "see")
	f.Add("```json\n{\"t\":\"```\"}\n```", "")
	f.Add(`{"deep":[{"x":{"y":[1,2,{"z":null}]}}],"esc":"\\\"}"}`, "Result:")
	f.Fuzz(func(t *testing.T, text, prose string) {
		obj, ok := ExtractJSON(text)
		if ok != (obj != nil) {
			t.Fatalf("ok %v with object %v", ok, obj)
		}
		if ok {
			if _, err := json.Marshal(obj); err != nil {
				t.Fatalf("found an object that is not JSON: %v", err)
			}
		}
		var want map[string]any
		if json.Unmarshal([]byte(text), &want) != nil || want == nil || strings.Contains(text, "```") {
			return
		}
		// Prose has no braces, quotes or fences to take for JSON.
		if strings.ContainsAny(prose, "{}\"`\\") {
			prose = ""
		}
		for _, wrapped := range []string{text, prose + "\n" + text + "\n" + prose, prose + "\n```json\n" + text + "\n```\n" + prose} {
			got, ok := ExtractJSON(wrapped)
			if !ok || !reflect.DeepEqual(got, want) {
				t.Fatalf("ExtractJSON(%q) = %v %v, want %v", wrapped, got, ok, want)
			}
		}
	})
}
