// Package jsonenc writes JSON exactly as encoding/json does, without
// reflection for the shapes replies and records are built of (maps of
// string to any, []any, strings, bools, integers, float64, nil,
// json.RawMessage). Any other value is handed to encoding/json, so the
// bytes are the same whatever a value holds.
//
// Append and Marshal are encoding/json with HTML escaping off and no
// trailing newline: the engine encodes a reply's free-form parts
// (instruction params, input schemas) with them once, and the doors that
// print replies embed those bytes as they are, so one encoder on both
// sides keeps them byte for byte what encoding/json would have written
// from the decoded values. AppendHTML and MarshalHTML are
// encoding/json.Marshal itself, HTML escaped: what the engine stores
// (outputs, evidence, whose hashes are over those bytes).
package jsonenc

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Marshal is v encoded: encoding/json.Marshal with HTML escaping off.
func Marshal(v any) ([]byte, error) {
	return marshal(v, false)
}

// Append appends v's encoding to b, HTML escaping off.
func Append(b []byte, v any) ([]byte, error) {
	return appendValue(b, v, false)
}

// MarshalHTML is encoding/json.Marshal(v), byte for byte.
func MarshalHTML(v any) ([]byte, error) {
	return marshal(v, true)
}

// marshal encodes v in a pooled buffer and copies it out once: appending
// to nil would grow (and allocate) several times on the way.
func marshal(v any, html bool) ([]byte, error) {
	bp := scratch.Get().(*[]byte)
	b, err := appendValue((*bp)[:0], v, html)
	var out []byte
	if err == nil {
		out = bytes.Clone(b)
	}
	if cap(b) <= 64<<10 { // a rare huge value is not kept
		*bp = b
		scratch.Put(bp)
	}
	return out, err
}

var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// AppendHTML appends encoding/json.Marshal(v) to b.
func AppendHTML(b []byte, v any) ([]byte, error) {
	return appendValue(b, v, true)
}

// AppendStringHTML writes s as encoding/json.Marshal does: as
// AppendString, with <, > and & escaped too.
func AppendStringHTML(b []byte, s string) []byte {
	return appendString(b, s, true)
}

// appendValue is v's encoding, HTML escaped when html is set.
func appendValue(b []byte, v any, html bool) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, x, html), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case int32:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case float64:
		return appendFloat(b, x, html)
	case map[string]any:
		return appendObject(b, x, html)
	case json.RawMessage:
		// encoding/json compacts a raw message and refuses one that is
		// not JSON; a nil one is null.
		if x == nil {
			return append(b, "null"...), nil
		}
		return appendCompact(b, x, html)
	case []any:
		if x == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, e, html); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	}
	return appendStd(b, v, html)
}

// appendFloat writes f as encoding/json does.
func appendFloat(b []byte, f float64, html bool) ([]byte, error) {
	// encoding/json writes 'f' format in [1e-6, 1e21) and 0; other
	// magnitudes (exponent form) and non-finite values go to it.
	if a := math.Abs(f); a == 0 || (a >= 1e-6 && a < 1e21) {
		return strconv.AppendFloat(b, f, 'f', -1, 64), nil
	}
	return appendStd(b, f, html)
}

// appendObject writes m's keys in sorted order, as encoding/json does.
func appendObject(b []byte, m map[string]any, html bool) ([]byte, error) {
	if m == nil {
		return append(b, "null"...), nil
	}
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k, html)
		b = append(b, ':')
		var err error
		if b, err = appendValue(b, m[k], html); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// AppendString writes s as encoding/json does with HTML escaping off:
// quote, backslash and control characters escaped (the short forms where
// JSON has one), invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped.
func AppendString(b []byte, s string) []byte {
	return appendString(b, s, false)
}

func appendString(b []byte, s string, html bool) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			if c >= 0x20 && c != '"' && c != '\\' && (!html || c != '<' && c != '>' && c != '&') {
				continue
			}
			b = append(b, s[start:i-1]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendCompact is raw with insignificant space removed (and, HTML
// escaped, <, >, &, U+2028 and U+2029 escaped), as encoding/json writes a
// json.RawMessage; an error, as encoding/json's, when raw is not one JSON
// value.
func appendCompact(b, raw []byte, html bool) ([]byte, error) {
	if compact(raw) && (!html || !bytes.ContainsAny(raw, "<>&\u2028\u2029")) {
		return append(b, raw...), nil
	}
	return appendStd(b, json.RawMessage(raw), html)
}

// compact reports whether raw is one valid JSON value with no space
// outside its strings, so it can be copied as it is.
func compact(raw []byte) bool {
	inString := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return json.Valid(raw)
}

// appendStd is encoding/json's own encoding of v.
func appendStd(b []byte, v any, html bool) ([]byte, error) {
	if html {
		x, err := json.Marshal(v)
		return append(b, x...), err
	}
	buf := bytes.NewBuffer(b)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return b, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
