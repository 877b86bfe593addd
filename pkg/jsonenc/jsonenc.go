// Package jsonenc writes JSON exactly as encoding/json does with HTML
// escaping off and no trailing newline, without reflection for the shapes
// replies are built of (maps of string to any, []any, strings, bools,
// integers, float64, nil, json.RawMessage). Any other value is handed to
// encoding/json, so the bytes are the same whatever a value holds.
//
// The engine encodes a reply's free-form parts (instruction params, input
// schemas) with it once, and the doors that print replies embed those
// bytes as they are: one encoder on both sides keeps them byte for byte
// what encoding/json would have written from the decoded values.
package jsonenc

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Marshal is v encoded: encoding/json.Marshal with HTML escaping off.
func Marshal(v any) ([]byte, error) {
	return Append(nil, v)
}

// Append appends v's encoding to b.
func Append(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return AppendString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case int32:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case float64:
		// encoding/json writes 'f' format in [1e-6, 1e21) and 0; other
		// magnitudes (exponent form) and non-finite values go to it.
		if a := math.Abs(x); a == 0 || (a >= 1e-6 && a < 1e21) {
			return strconv.AppendFloat(b, x, 'f', -1, 64), nil
		}
	case map[string]any:
		return appendObject(b, x)
	case json.RawMessage:
		// encoding/json compacts a raw message and refuses one that is
		// not JSON; a nil one is null.
		if x == nil {
			return append(b, "null"...), nil
		}
		return appendCompact(b, x)
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
			if b, err = Append(b, e); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	}
	return appendStd(b, v)
}

// appendObject writes m's keys in sorted order, as encoding/json does.
func appendObject(b []byte, m map[string]any) ([]byte, error) {
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
		b = AppendString(b, k)
		b = append(b, ':')
		var err error
		if b, err = Append(b, m[k]); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// AppendString writes s as encoding/json does with HTML escaping off:
// quote, backslash and control characters escaped (the short forms where
// JSON has one), invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped.
func AppendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			if c >= 0x20 && c != '"' && c != '\\' {
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

// appendCompact is raw with insignificant space removed, as encoding/json
// writes a json.RawMessage; an error, as encoding/json's, when raw is not
// one JSON value.
func appendCompact(b, raw []byte) ([]byte, error) {
	if compact(raw) {
		return append(b, raw...), nil
	}
	return appendStd(b, json.RawMessage(raw))
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

// appendStd is encoding/json's own encoding of v, HTML escaping off.
func appendStd(b []byte, v any) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return b, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
