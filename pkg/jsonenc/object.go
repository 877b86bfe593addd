package jsonenc

import (
	"slices"
	"strconv"
)

// Object writes a JSON object field by field, as encoding/json.Marshal
// writes a struct: fields in the order they are added, strings HTML
// escaped. A type's hand-written encoder is a list of its fields in
// declaration order, the Omit variants standing for `json:",omitempty"`;
// its test holds it to json.Marshal of the same value.
//
// The first error (a value encoding/json refuses) is kept in Err and the
// fields after it are not written.
type Object struct {
	B   []byte
	Err error
	n   int
}

// Open starts an object at the end of b.
func Open(b []byte) Object {
	return Object{B: append(b, '{')}
}

// Close ends the object: its bytes, or the first error.
func (o *Object) Close() ([]byte, error) {
	o.B = append(o.B, '}')
	return o.B, o.Err
}

// Key writes a field's name; the value is the caller's to append to B.
// Names are the struct's json tags: plain ASCII, never escaped.
func (o *Object) Key(name string) {
	if o.n > 0 {
		o.B = append(o.B, ',')
	}
	o.n++
	o.B = append(o.B, '"')
	o.B = append(o.B, name...)
	o.B = append(o.B, '"', ':')
}

// String is a string field.
func (o *Object) String(name, s string) {
	o.Key(name)
	o.B = appendString(o.B, s, true)
}

// OmitString is an omitempty string field.
func (o *Object) OmitString(name, s string) {
	if s != "" {
		o.String(name, s)
	}
}

// StringPtr is a *string field: null when nil.
func (o *Object) StringPtr(name string, s *string) {
	if s == nil {
		o.Key(name)
		o.B = append(o.B, "null"...)
		return
	}
	o.String(name, *s)
}

// Bool is a bool field.
func (o *Object) Bool(name string, v bool) {
	o.Key(name)
	o.B = strconv.AppendBool(o.B, v)
}

// OmitBool is an omitempty bool field.
func (o *Object) OmitBool(name string, v bool) {
	if v {
		o.Bool(name, v)
	}
}

// Int is an integer field.
func (o *Object) Int(name string, n int64) {
	o.Key(name)
	o.B = strconv.AppendInt(o.B, n, 10)
}

// OmitInt is an omitempty integer field.
func (o *Object) OmitInt(name string, n int64) {
	if n != 0 {
		o.Int(name, n)
	}
}

// Float is a float64 field; NaN and infinities are refused.
func (o *Object) Float(name string, f float64) {
	if o.Err != nil {
		return
	}
	o.Key(name)
	o.B, o.Err = appendFloat(o.B, f, true)
}

// Strings is a []string field: null when nil.
func (o *Object) Strings(name string, s []string) {
	o.Key(name)
	if s == nil {
		o.B = append(o.B, "null"...)
		return
	}
	o.B = append(o.B, '[')
	for i, x := range s {
		if i > 0 {
			o.B = append(o.B, ',')
		}
		o.B = appendString(o.B, x, true)
	}
	o.B = append(o.B, ']')
}

// OmitStrings is an omitempty []string field.
func (o *Object) OmitStrings(name string, s []string) {
	if len(s) > 0 {
		o.Strings(name, s)
	}
}

// Value is a field of any type, written as AppendHTML writes it.
func (o *Object) Value(name string, v any) {
	if o.Err != nil {
		return
	}
	o.Key(name)
	o.B, o.Err = appendValue(o.B, v, true)
}

// Raw is a field whose value is encoded already: b is written as it is,
// so it must be what this package (or json.Marshal) wrote.
func (o *Object) Raw(name string, b []byte) {
	o.Key(name)
	o.B = append(o.B, b...)
}

// OmitValue is an omitempty field of interface type: left out when nil.
func (o *Object) OmitValue(name string, v any) {
	if v != nil {
		o.Value(name, v)
	}
}

// OmitMap is an omitempty map[string]any field: left out when empty.
func (o *Object) OmitMap(name string, m map[string]any) {
	if len(m) > 0 {
		o.Value(name, m)
	}
}

// Map writes a map field with string keys in sorted order, each value by
// enc; a nil map is null. Use OmitMap's rule (len > 0) for omitempty.
func Map[V any](o *Object, name string, m map[string]V, enc func([]byte, V) ([]byte, error)) {
	if o.Err != nil {
		return
	}
	o.Key(name)
	if m == nil {
		o.B = append(o.B, "null"...)
		return
	}
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	o.B = append(o.B, '{')
	for i, k := range keys {
		if i > 0 {
			o.B = append(o.B, ',')
		}
		o.B = appendString(o.B, k, true)
		o.B = append(o.B, ':')
		if o.B, o.Err = enc(o.B, m[k]); o.Err != nil {
			return
		}
	}
	o.B = append(o.B, '}')
}

// IntValue writes an int map value.
func IntValue(b []byte, n int) ([]byte, error) { return strconv.AppendInt(b, int64(n), 10), nil }

// StringValue writes a string map value.
func StringValue(b []byte, s string) ([]byte, error) { return appendString(b, s, true), nil }
