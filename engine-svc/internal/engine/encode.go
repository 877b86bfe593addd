package engine

import (
	"reflect"
	"unsafe"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/jsonenc"
)

// encodedMap is a map the transaction has encoded, kept alive with its
// bytes so its address cannot be reused while the memo holds it.
type encodedMap struct {
	p unsafe.Pointer
	m map[string]any
	b []byte
}

// encodeJSON encodes a value the transaction writes (as json.Marshal
// does, without its reflection), once per map: an
// agent's answer is the step's output, the evidence hash's input and the
// evidence's input and output summary, and was encoded four times. Maps
// are memoised by identity; a recorded output or summary is never changed
// in place (the run cache relies on the same rule).
func (t *txn) encodeJSON(v any) ([]byte, error) {
	m, ok := v.(map[string]any)
	if !ok || m == nil {
		return jsonenc.MarshalHTML(v)
	}
	if b, ok := t.encodedOf(v); ok {
		return b, nil
	}
	b, err := jsonenc.MarshalHTML(m)
	if err != nil {
		return nil, err
	}
	if t.encoded == nil {
		t.encoded = t.encodedA[:0]
	}
	t.encoded = append(t.encoded, encodedMap{p: reflect.ValueOf(m).UnsafePointer(), m: m, b: b})
	return b, nil
}

// encodedOf is a map's bytes if the transaction has encoded it.
func (t *txn) encodedOf(v any) ([]byte, bool) {
	m, ok := v.(map[string]any)
	if !ok || m == nil || len(t.encoded) == 0 {
		return nil, false
	}
	p := reflect.ValueOf(m).UnsafePointer()
	for _, x := range t.encoded { // a write stores a handful of maps
		if x.p == p {
			return x.b, true
		}
	}
	return nil, false
}

// encodeEntry encodes an evidence entry, reusing its summaries' bytes when
// they were encoded already: the entry's bytes are json.Marshal(e).
func (t *txn) encodeEntry(e *record.Entry) ([]byte, error) {
	in, _ := t.encodedOf(e.InputSummary)
	out, _ := t.encodedOf(e.OutputSummary)
	return e.AppendJSONWith(make([]byte, 0, 512), in, out)
}
