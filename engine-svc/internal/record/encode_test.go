package record

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestAppendJSONIsWhatJSONMarshalWrites fills every field of a run and an
// entry by reflection, a field added later included, and compares the
// hand-written encoders with encoding/json: a field one leaves out, or
// writes differently, fails here.
func TestAppendJSONIsWhatJSONMarshalWrites(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		var r Run
		fill(reflect.ValueOf(&r).Elem(), rng, 0)
		same(t, i, &r, r.AppendJSON)
		var e Entry
		fill(reflect.ValueOf(&e).Elem(), rng, 0)
		same(t, i, &e, e.AppendJSON)
		in, err1 := json.Marshal(e.InputSummary)
		out, err2 := json.Marshal(e.OutputSummary)
		if err1 == nil && err2 == nil {
			same(t, i, &e, func(b []byte) ([]byte, error) { return e.AppendJSONWith(b, in, out) })
		}
	}
	var zero Run
	same(t, -1, &zero, zero.AppendJSON)
	var zeroEntry Entry
	same(t, -1, &zeroEntry, zeroEntry.AppendJSON)
}

func TestAppendJSONRefusesWhatJSONMarshalRefuses(t *testing.T) {
	t.Parallel()
	r := &Run{Params: map[string]any{"x": func() {}}}
	if _, err := r.AppendJSON(nil); err == nil {
		t.Error("a run whose params hold a func encoded without an error")
	}
	e := &Entry{OutputSummary: map[string]any{"c": make(chan int)}}
	if _, err := e.AppendJSON(nil); err == nil {
		t.Error("an entry whose output holds a channel encoded without an error")
	}
}

// FuzzRunJSON decodes arbitrary documents as a stored run and entry are
// read, and holds the encoders to encoding/json on what they hold.
func FuzzRunJSON(f *testing.F) {
	for _, s := range []string{
		`{"id":"r1","params":{"a":"<b>"},"completed_steps":["x"],"claims":{"s":{"token":"t","deadline":null,"holder":{"by":"me"}}},"settled":{"g":{"token":null,"outcome":"approved"}},"validation_rejections":{"s":2},"step_errors":{"s":"bad & worse"}}`,
		`{"step_id":"s","input_summary":{"k":[1,2.5,null]},"output_summary":"\u2028","trace":[{}],"definition_version":1e21,"driven_by":{}}`,
		`{"workflow_version":1e-7,"pending_gate":{"gate_id":"g","preview":{"x":1}},"sealed_by":{"arm":"x"}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		var r Run
		if json.Unmarshal([]byte(doc), &r) == nil {
			same(t, 0, &r, r.AppendJSON)
		}
		var e Entry
		if json.Unmarshal([]byte(doc), &e) == nil {
			same(t, 0, &e, e.AppendJSON)
		}
	})
}

func same(t *testing.T, i int, v any, appendJSON func([]byte) ([]byte, error)) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	got, err := appendJSON([]byte("prefix"))
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("#%d %T: AppendJSON error %v, json.Marshal error %v", i, v, err, wantErr)
	}
	if wantErr == nil && string(got) != "prefix"+string(want) {
		t.Fatalf("#%d %T:\nAppendJSON   %s\njson.Marshal prefix%s", i, v, got, want)
	}
}

// fill sets v to a random value of its type: strings that need escaping,
// numbers in both of encoding/json's float forms, nil, empty and full
// slices, maps and pointers, and free-form values of every JSON shape.
func fill(v reflect.Value, rng *rand.Rand, depth int) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(pick(rng, "", "a", "x<y>&z", "naïve \u2028 \xff", `q"\`, "step_1"))
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(pick(rng, int64(0), 1, -5, 300, 1<<40))
	case reflect.Float64:
		v.SetFloat(pick(rng, 0, 1, 1.5, -3, 1e21, 1e-7, 123456.789))
	case reflect.Pointer:
		if rng.IntN(3) == 0 || depth > 4 {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), rng, depth+1)
		v.Set(p)
	case reflect.Slice:
		switch n := rng.IntN(5); {
		case n == 0 || depth > 4:
			v.SetZero()
		default:
			s := reflect.MakeSlice(v.Type(), n-1, n-1)
			for i := range n - 1 {
				fill(s.Index(i), rng, depth+1)
			}
			v.Set(s)
		}
	case reflect.Map:
		switch n := rng.IntN(5); {
		case n == 0 || depth > 4:
			v.SetZero()
		default:
			m := reflect.MakeMapWithSize(v.Type(), n-1)
			for i := range n - 1 {
				k := reflect.New(v.Type().Key()).Elem()
				k.SetString(pick(rng, "b", "a", "<k>", "é", "z_"+string(rune('a'+i))))
				e := reflect.New(v.Type().Elem()).Elem()
				fill(e, rng, depth+1)
				m.SetMapIndex(k, e)
			}
			v.Set(m)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), rng, depth+1)
			}
		}
	case reflect.Interface:
		if depth > 4 {
			return
		}
		var x any
		switch rng.IntN(7) {
		case 1:
			x = pick(rng, "s", "<&>", "\u2029")
		case 2:
			x = pick(rng, 0.0, 2.5, 1e300)
		case 3:
			x = rng.IntN(2) == 0
		case 4:
			m := map[string]any{}
			fill(reflect.ValueOf(&m).Elem(), rng, depth+1)
			x = m
		case 5:
			x = []any{"a", nil, 1.0, map[string]any{"k": "<v>"}}
		case 6:
			x = json.RawMessage(`{"raw": ["<x>", 1e2]}`)
		}
		if x != nil {
			v.Set(reflect.ValueOf(x))
		}
	default:
		panic("fill: no filler for " + v.Type().String())
	}
}

func pick[T any](rng *rand.Rand, choices ...T) T { return choices[rng.IntN(len(choices))] }
