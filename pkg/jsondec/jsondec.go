// Package jsondec reads JSON into the values encoding/json.Unmarshal makes
// for an interface: map[string]any, []any, string, float64, bool and nil.
// It accepts exactly the documents encoding/json accepts and yields the
// same values (FuzzValue holds the two together), with fewer allocations:
// the input is copied into one string that the decoded strings and keys
// without escapes share, and the integers 0 to 255 are boxed once for the
// whole process. An answer's params are decoded on every transition; with
// encoding/json they cost nine allocations of an engine's fifty.
//
// Strings without escapes share that one string, so a value kept keeps the
// whole input alive: use it for documents whose values live as long as the
// document (an answer, kept as a step's output).
package jsondec

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is encoding/json's nesting limit: objects and arrays nested
// deeper are refused.
const maxDepth = 10000

// ErrNotObject is Object's error for a valid document that is not an
// object (null included).
var ErrNotObject = errors.New("jsondec: not a JSON object")

// SyntaxError is a document that is not JSON, and where that shows.
type SyntaxError struct {
	Msg    string
	Offset int // the byte at which the document stopped being JSON
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("jsondec: %s at offset %d", e.Msg, e.Offset)
}

// RangeError is a number too large for a float64 (encoding/json refuses it
// too).
type RangeError struct {
	Number string
	Offset int
}

func (e *RangeError) Error() string {
	return fmt.Sprintf("jsondec: number %s at offset %d does not fit a float64", e.Number, e.Offset)
}

// Object decodes b, one JSON object with optional whitespace around it.
func Object(b []byte) (map[string]any, error) {
	v, err := Value(b)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, ErrNotObject
	}
	return m, nil
}

// Value decodes b, one JSON value with optional whitespace around it.
func Value(b []byte) (any, error) {
	d := decoder{s: string(b)}
	d.space()
	v, err := d.value()
	if err != nil {
		return nil, err
	}
	d.space()
	if d.i < len(d.s) {
		return nil, d.syntax("invalid character " + quoteChar(d.s[d.i]) + " after top-level value")
	}
	return v, nil
}

// smallInts are the float64s 0 to 255, boxed once: an interface holding
// one is never changed, so every decoded document can share them.
var smallInts = func() (a [256]any) {
	for i := range a {
		a[i] = float64(i)
	}
	return a
}()

type decoder struct {
	s     string
	i     int
	depth int
}

func (d *decoder) syntax(msg string) error { return &SyntaxError{Msg: msg, Offset: d.i} }

// unexpected is the error for the byte at d.i (or the end) where context
// wanted something else.
func (d *decoder) unexpected(context string) error {
	if d.i >= len(d.s) {
		return d.syntax("unexpected end of JSON input")
	}
	return d.syntax("invalid character " + quoteChar(d.s[d.i]) + " " + context)
}

func (d *decoder) space() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) value() (any, error) {
	if d.i >= len(d.s) {
		return nil, d.unexpected("")
	}
	switch c := d.s[d.i]; {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		return s, nil
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return d.number()
	}
	return nil, d.unexpected("looking for beginning of value")
}

func (d *decoder) literal(word string) error {
	for k := 0; k < len(word); k++ {
		if d.i >= len(d.s) || d.s[d.i] != word[k] {
			return d.unexpected("in literal " + word)
		}
		d.i++
	}
	return nil
}

// open enters the object or array at d.i and reports whether it is empty
// (its close read too).
func (d *decoder) open(closer byte) (empty bool, err error) {
	d.depth++
	if d.depth > maxDepth {
		return false, d.syntax("exceeded max depth")
	}
	d.i++
	d.space()
	if d.i < len(d.s) && d.s[d.i] == closer {
		d.i++
		d.depth--
		return true, nil
	}
	return false, nil
}

// more reads what follows an element: a comma (another element comes) or
// the closer (the object or array ends).
func (d *decoder) more(closer byte, context string) (bool, error) {
	d.space()
	if d.i < len(d.s) {
		switch d.s[d.i] {
		case ',':
			d.i++
			d.space()
			return true, nil
		case closer:
			d.i++
			d.depth--
			return false, nil
		}
	}
	return false, d.unexpected(context)
}

func (d *decoder) object() (any, error) {
	m := map[string]any{}
	if empty, err := d.open('}'); empty || err != nil {
		return m, err
	}
	for {
		if d.i >= len(d.s) || d.s[d.i] != '"' {
			return nil, d.unexpected("looking for beginning of object key string")
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		d.space()
		if d.i >= len(d.s) || d.s[d.i] != ':' {
			return nil, d.unexpected("after object key")
		}
		d.i++
		d.space()
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		m[k] = v // a repeated key: the last one wins, as in encoding/json
		if more, err := d.more('}', "after object key:value pair"); !more {
			return m, err
		}
	}
}

func (d *decoder) array() (any, error) {
	a := []any{}
	if empty, err := d.open(']'); empty || err != nil {
		return a, err
	}
	for {
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		if more, err := d.more(']', "after array element"); !more {
			return a, err
		}
	}
}

// number reads a number as the JSON grammar has it and parses it as
// encoding/json does (strconv.ParseFloat, 64 bits).
func (d *decoder) number() (any, error) {
	start := d.i
	if d.s[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.s) && d.s[d.i] == '0':
		d.i++
	case d.i < len(d.s) && '1' <= d.s[d.i] && d.s[d.i] <= '9':
		d.digits()
	default:
		return nil, d.unexpected("in numeric literal")
	}
	if d.i < len(d.s) && d.s[d.i] == '.' {
		d.i++
		if !d.digits() {
			return nil, d.unexpected("after decimal point in numeric literal")
		}
	}
	if d.i < len(d.s) && (d.s[d.i] == 'e' || d.s[d.i] == 'E') {
		d.i++
		if d.i < len(d.s) && (d.s[d.i] == '+' || d.s[d.i] == '-') {
			d.i++
		}
		if !d.digits() {
			return nil, d.unexpected("in exponent of numeric literal")
		}
	}
	text := d.s[start:d.i]
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return nil, &RangeError{Number: text, Offset: start}
	}
	if f >= 0 && f < float64(len(smallInts)) && f == math.Trunc(f) && !math.Signbit(f) {
		return smallInts[int(f)], nil
	}
	return f, nil
}

// digits skips a run of digits and reports whether there was one.
func (d *decoder) digits() bool {
	start := d.i
	for d.i < len(d.s) && '0' <= d.s[d.i] && d.s[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}

// str reads a string at d.i (its opening quote). Without escapes and with
// valid UTF-8 it is a piece of the input; otherwise it is built as
// encoding/json builds it (invalid UTF-8 and lone surrogates become
// U+FFFD).
func (d *decoder) str() (string, error) {
	d.i++ // "
	start := d.i
	ascii := true
	for d.i < len(d.s) {
		switch c := d.s[d.i]; {
		case c == '"':
			s := d.s[start:d.i]
			d.i++
			if !ascii && !utf8.ValidString(s) {
				return string(appendUnquoted(make([]byte, 0, len(s)+8), s)), nil
			}
			return s, nil
		case c == '\\':
			return d.escaped(start)
		case c < ' ':
			return "", d.syntax("invalid character " + quoteChar(c) + " in string literal")
		case c >= utf8.RuneSelf:
			ascii = false
		}
		d.i++
	}
	return "", d.unexpected("")
}

// escaped finishes a string from start whose first escape is at d.i: it
// checks the rest of the string's grammar, then unquotes the whole.
func (d *decoder) escaped(start int) (string, error) {
	for d.i < len(d.s) {
		switch c := d.s[d.i]; {
		case c == '"':
			s := d.s[start:d.i]
			d.i++
			return string(appendUnquoted(make([]byte, 0, len(s)), s)), nil
		case c == '\\':
			d.i++
			if d.i >= len(d.s) {
				return "", d.unexpected("")
			}
			switch d.s[d.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for range 4 {
					d.i++
					if d.i >= len(d.s) {
						return "", d.unexpected("")
					}
					if !isHex(d.s[d.i]) {
						return "", d.unexpected("in \\u hexadecimal character escape")
					}
				}
			default:
				return "", d.unexpected("in string escape code")
			}
		case c < ' ':
			return "", d.syntax("invalid character " + quoteChar(c) + " in string literal")
		}
		d.i++
	}
	return "", d.unexpected("")
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// appendUnquoted appends the text of a string's body whose grammar is
// checked: escapes resolved, invalid UTF-8 and lone surrogates as U+FFFD.
func appendUnquoted(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			switch s[i+1] {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r := hex4(s[i+2 : i+6])
				i += 6
				if utf16.IsSurrogate(r) {
					// A pair when the next escape completes it; if not,
					// U+FFFD, and the next escape is read on its own.
					if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
						if dec := utf16.DecodeRune(r, hex4(s[i+2:i+6])); dec != utf8.RuneError {
							b = utf8.AppendRune(b, dec)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				b = utf8.AppendRune(b, r)
				continue
			default: // " \ /
				b = append(b, s[i+1])
			}
			i += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
		}
	}
	return b
}

// hex4 is four checked hex digits' value.
func hex4(h string) rune {
	var r rune
	for k := 0; k < 4; k++ {
		c := h[k]
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// quoteChar is how encoding/json names a character in its errors.
func quoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	return "'" + s[1:len(s)-1] + "'"
}
