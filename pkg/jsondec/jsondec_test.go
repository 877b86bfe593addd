package jsondec

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// same fails unless Value(in) and encoding/json.Unmarshal agree: both
// refuse it, or both give values that are deeply equal and encode to the
// same bytes (which also tells -0 from 0).
func same(t *testing.T, in []byte) {
	t.Helper()
	var want any
	wantErr := json.Unmarshal(in, &want)
	got, err := Value(in)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%q: jsondec error %v, encoding/json error %v", in, err, wantErr)
	}
	if err != nil {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: jsondec %#v, encoding/json %#v", in, got, want)
	}
	gb, err1 := json.Marshal(got)
	wb, err2 := json.Marshal(want)
	if err1 != nil || err2 != nil || !bytes.Equal(gb, wb) {
		t.Fatalf("%q: encodes as %s (%v), encoding/json's as %s (%v)", in, gb, err1, wb, err2)
	}
}

func TestValueIsWhatEncodingJSONDecodes(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{"n":1,"note":"fine"}`,
		` { "a" : [ 1 , 2.5 , -0 , 0 , -3e2 , 1E+2 , 255 , 256 , 1e400 ] } `,
		`{"a":1,"a":2}`,
		`{"s":"tab\tnew\nline \"q\" \\ \/ \b\f\r \u00e9 \u2028 \ud83d\ude00"}`,
		`{"lone":"\ud83d x", "pair-half":"\ude00", "high-high":"\ud83d\ud83d", "high-then-letter":"\ud83d\u0041"}`,
		"{\"bad\":\"\xff\xfe ok \xed\xa0\x80\"}",
		"{\"esc-and-bad\":\"\\n\xff\"}",
		"{\"k\xff\":1}",
		`{"deep":{"a":[{"b":[[]]},{}]},"t":true,"f":false,"z":null}`,
		`[]`, `null`, `"x"`, `12`, `-0`, `0.0`, `1.5e-400`, `123456789012345678901234567890`,
		``, ` `, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `{"a":1 "b":2}`, `{a:1}`,
		`01`, `1.`, `.5`, `-`, `+1`, `1e`, `1e+`, `--1`, `tru`, `nul`, `falsey`, `{} {}`, `{}x`,
		"{\"a\":\"\x01\"}", `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12g4"}`, `{"a":"unterminated`,
		`{"a":"\`, "\t\r\n{}\t\r\n", "\v{}", `{"é":"ü"}`, `{"":""}`, "{\"a\":\"\x7f\"}",
	} {
		same(t, []byte(in))
	}
}

func TestObjectRefusesWhatIsNotAnObject(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`null`, `[]`, `"x"`, `1`, `true`} {
		if _, err := Object([]byte(in)); !errors.Is(err, ErrNotObject) {
			t.Errorf("%s: error %v, want ErrNotObject", in, err)
		}
	}
	m, err := Object([]byte(`{"n":1}`))
	if err != nil || m["n"] != float64(1) {
		t.Fatalf("got %v, %v", m, err)
	}
}

func TestNestingIsLimitedAsInEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, depth := range []int{maxDepth, maxDepth + 1} {
		in := []byte(strings.Repeat("[", depth) + strings.Repeat("]", depth))
		same(t, in)
		obj := []byte(strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth))
		same(t, obj)
	}
	if _, err := Value([]byte(strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1))); err == nil || !strings.Contains(err.Error(), "exceeded max depth") {
		t.Fatalf("error %v, want the depth named", err)
	}
}

func TestErrorsSayWhereTheDocumentBroke(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`{"a":1,}`: `jsondec: invalid character '}' looking for beginning of object key string at offset 7`,
		`{"a" 1}`:  `jsondec: invalid character '1' after object key at offset 5`,
		`[1 2]`:    `jsondec: invalid character '2' after array element at offset 3`,
		`{"a":tx}`: `jsondec: invalid character 'x' in literal true at offset 6`,
		`{"a":`:    `jsondec: unexpected end of JSON input at offset 5`,
		`{} x`:     `jsondec: invalid character 'x' after top-level value at offset 3`,
		`[1e999]`:  `jsondec: number 1e999 at offset 1 does not fit a float64`,
	}
	for in, want := range cases {
		if _, err := Value([]byte(in)); err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %s", in, err, want)
		}
	}
}

// The strings of a document without escapes are pieces of one copy of the
// input: changing the input afterwards changes nothing decoded.
func TestDecodedValuesDoNotAliasTheInput(t *testing.T) {
	t.Parallel()
	in := []byte(`{"key":"value","list":["a"]}`)
	m, err := Object(in)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i] = 'x'
	}
	if m["key"] != "value" || m["list"].([]any)[0] != "a" {
		t.Fatalf("decoded values changed with the input: %v", m)
	}
}

func FuzzValue(f *testing.F) {
	for _, s := range []string{
		`{"n":1,"note":"fine"}`, `{"a":[1,2.5,-0,1e400]}`, `{"s":"\ud83d\ude00 \ud83d x \u00e9"}`,
		"{\"b\":\"\xff\"}", `[{"a":{"b":null}},true,false]`, `{"a":1,"a":2}`, `01`, `{"a":"\u12g4"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		same(t, in)
	})
}

func BenchmarkObject(b *testing.B) {
	in := []byte(`{"n":1,"note":"fine"}`)
	b.Run("jsondec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Object(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]any
			if err := json.Unmarshal(in, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
