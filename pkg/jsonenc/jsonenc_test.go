package jsonenc

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// stdJSON is encoding/json, HTML escaping off, no trailing newline.
func stdJSON(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

func TestAppendWritesWhatEncodingJSONWrites(t *testing.T) {
	t.Parallel()
	cases := map[string]any{
		"nil":              nil,
		"html stays":       "<billing|bug|other> & more",
		"quotes":           `say "hi" \ back`,
		"controls":         "a\nb\rc\td\be\ff\x00g\x1fh\x7f",
		"invalid utf-8":    "ok\xffthen\xc3",
		"line separators":  "a\u2028b\u2029c",
		"non-ascii":        "naïve — 日本 🎉 \ufffd",
		"floats":           []any{0.0, math.Copysign(0, -1), 1.5, -2.25, 1e20, 1e21, 1e-6, 1e-7, 123456789.125, 3.0},
		"ints":             []any{int64(-7), int32(42), 0, int64(math.MaxInt64)},
		"bools":            []any{true, false},
		"empty":            []any{map[string]any{}, []any{}, map[string]any(nil), []any(nil)},
		"sorted keys":      map[string]any{"b": 1.0, "a": 2.0, "B": 3.0, "aa": nil, "é": "x", "\n": "key escaped"},
		"many keys":        manyKeys(40),
		"other types":      map[string]any{"strs": []string{"x", "<y>"}, "m": map[string]string{"k": "v"}, "u": uint8(7), "f32": float32(0.1)},
		"a reply's shape":  map[string]any{"command": "answer", "run_id": "r1", "run_version": int64(3), "status": "ok", "next_actions": []any{map[string]any{"instruction": map[string]any{"tool": "execute_step", "params": map[string]any{}}}}, "warnings": []any{}, "data": map[string]any{"n": 1.0}},
		"nested fallbacks": map[string]any{"x": []any{"a\tb", map[string]any{"y": []int{1, 2}}}},
		"raw compact":      map[string]any{"s": json.RawMessage(`{"b":[1,"<x>",{"c":null}],"a":"\\\" }"}`)},
		"raw with space":   []any{json.RawMessage(" {\"a\" : [ 1 , 2 ]}\n"), json.RawMessage(`"a b"`)},
		"raw nil":          map[string]any{"n": json.RawMessage(nil)},
	}
	cases["html escaped raw"] = []any{json.RawMessage(`{"a":"<x> & \u2028"}`), json.RawMessage("\"\u2029\"")}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			same(t, v)
		})
	}
}

// same fails t unless Append and AppendHTML write v as encoding/json
// does without and with HTML escaping.
func same(t *testing.T, v any) {
	t.Helper()
	want, wantErr := stdJSON(v)
	got, err := encode(v)
	if (err != nil) != (wantErr != nil) || wantErr == nil && got != want {
		t.Fatalf("Append = %q, %v\nencoding/json = %q, %v", got, err, want, wantErr)
	}
	wantB, wantErr := json.Marshal(v)
	gotB, err := MarshalHTML(v)
	if (err != nil) != (wantErr != nil) || wantErr == nil && string(gotB) != string(wantB) {
		t.Fatalf("MarshalHTML = %q, %v\njson.Marshal = %q, %v", gotB, err, wantB, wantErr)
	}
}

func TestAppendRefusesWhatEncodingJSONRefuses(t *testing.T) {
	t.Parallel()
	for name, v := range map[string]any{
		"NaN":      map[string]any{"x": math.NaN()},
		"infinity": []any{math.Inf(1)},
		"channel":  map[string]any{"c": make(chan int)},
		"bad raw":  map[string]any{"r": json.RawMessage(`{"a":`)},
		"two raw":  []any{json.RawMessage(`1 2`)},
		"raw tail": []any{json.RawMessage(`{}x`)},
	} {
		_, wantErr := stdJSON(v)
		if _, err := encode(v); err == nil || err.Error() != wantErr.Error() {
			t.Errorf("%s: error %v, want %v", name, err, wantErr)
		}
		_, wantErr = json.Marshal(v)
		if _, err := MarshalHTML(v); err == nil || err.Error() != wantErr.Error() {
			t.Errorf("%s: MarshalHTML error %v, want %v", name, err, wantErr)
		}
	}
}

// encode is Append into a fresh buffer, as a string.
func encode(v any) (string, error) {
	b, err := Append(nil, v)
	return string(b), err
}

func manyKeys(n int) map[string]any {
	m := make(map[string]any, n)
	for i := range n {
		m[strings.Repeat("k", i%7)+string(rune('a'+i%26))+string(rune('A'+i/26))] = float64(i)
	}
	return m
}

// FuzzAppend checks arbitrary JSON documents, decoded as the reply
// maps hold them, against encoding/json, HTML escaping off and on.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{`{"a":"<b>\n","c":[1,2.5,1e300,-0.000001,null,true]}`, `"\u2028\ud800"`, `[{"z":{},"a":[]}]`, `1e-7`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		var v any
		if json.Unmarshal([]byte(doc), &v) != nil {
			v = doc // not JSON: encode it as a string instead
		}
		same(t, v)
		// The same document as raw bytes, embedded as a reply embeds them.
		same(t, []any{json.RawMessage(doc)})
	})
}
