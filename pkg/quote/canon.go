package quote

import (
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// canon is the canonical form of a stretch of text: each canonical rune knows
// the raw runes [cs, ce) it came from.
type canon struct {
	c      []rune
	cs, ce []int32
	// marks holds the Arabic and Hebrew marks written on a canonical rune,
	// which the canonical form itself leaves out.
	marks map[int32]string
	str   string  // c as UTF-8, for substring search
	kAt   []int32 // canonical index of each byte offset of str that starts a rune
}

// canonicalize builds the canonical form of t.r[from:to]: NFKC, lower case,
// dashes read as '-', punctuation and quotation marks dropped, spaces
// collapsed, kept signs and symbols kept.
func canonicalize(t *text, from, to int) *canon {
	cf := &canon{c: make([]rune, 0, to-from)}
	r := t.r
	lastSpace := true // no leading space
	emit := func(ch rune, s, e int) {
		if ch == ' ' {
			if lastSpace {
				return
			}
			lastSpace = true
		} else {
			lastSpace = false
		}
		cf.c = append(cf.c, ch)
		cf.cs = append(cf.cs, int32(s))
		cf.ce = append(cf.ce, int32(e))
	}
	attachMark := func(m rune) {
		if cf.marks == nil {
			cf.marks = map[int32]string{}
		}
		k := int32(len(cf.c) - 1)
		cf.marks[k] += string(m)
	}
	lastIsLetter := func() bool {
		return len(cf.c) > 0 && (isLetter(cf.c[len(cf.c)-1]) || isMark(cf.c[len(cf.c)-1]))
	}
	digitAt := func(i int) bool { return i >= from && i < to && isNumberDigit(r[i]) }
	wordAt := func(i int) bool { return i >= from && i < to && (t.cls[i] == clLetter || t.cls[i] == clDigit) }
	var buf []byte
	for i := from; i < to; {
		ch := r[i]
		switch {
		case ch == 0xFEFF || isWhitespace(ch):
			emit(' ', i, i+1)
			i++
			continue
		case t.cls[i] == clFormat:
			i++
			continue
		case isMark(ch) && t.cls[i] != clLetter:
			i++ // a mark on no letter is set aside
			continue
		case isDash(ch):
			if digitAt(i + 1) {
				emit('-', i, i+1)
			}
			i++
			continue
		case isNumberDigit(ch):
			if isDecimalDigit(ch) {
				for _, o := range norm.NFKC.String(string(ch)) {
					emit(o, i, i+1)
				}
			} else {
				emit(ch, i, i+1) // superscripts and fractions are never folded into digits
			}
			i++
			continue
		case isKeptSymbol(ch):
			out := norm.NFKC.String(string(ch))
			if utf8.RuneCountInString(out) != 1 {
				out = string(ch)
			}
			for _, o := range out {
				emit(o, i, i+1)
			}
			i++
			continue
		case isPunct(ch):
			between := digitAt(i-1) && digitAt(i+1)
			decimal := (ch == '.' || ch == ',') && digitAt(i+1) && !wordAt(i-1)
			if between || decimal {
				emit(ch, i, i+1)
			}
			i++
			continue
		}
		// A letter or symbol with the marks on it, as one segment.
		if ch < 0x80 && (i+1 >= to || !isMark(r[i+1])) {
			if isLetter(ch) {
				emit(toLower(ch), i, i+1)
			}
			i++ // other ASCII symbols (^ ` ~ handled above as kept or dropped) are set aside
			continue
		}
		j := i + 1
		for j < to && isMark(r[j]) && t.cls[j] == clLetter {
			j++
		}
		buf = norm.NFKC.AppendString(buf[:0], string(r[i:j]))
		for _, o := range string(buf) {
			o = toLower(o)
			switch {
			case isInvisibleMark(o):
				// only visible marks are kept
			case isSemiticMark(o) && lastIsLetter():
				attachMark(o)
			case isLetter(o):
				emit(o, i, j)
			case isMark(o):
				if lastIsLetter() {
					emit(o, i, j)
				}
			case isWhitespace(o):
				emit(' ', i, j)
			case isNumberDigit(o), isKeptSymbol(o):
				emit(o, i, j)
			}
		}
		i = j
	}
	if n := len(cf.c); n > 0 && cf.c[n-1] == ' ' {
		cf.c, cf.cs, cf.ce = cf.c[:n-1], cf.cs[:n-1], cf.ce[:n-1]
		delete(cf.marks, int32(n-1))
	}
	var sb strings.Builder
	sb.Grow(len(cf.c))
	for _, ch := range cf.c {
		sb.WriteRune(ch)
	}
	cf.str = sb.String()
	cf.kAt = make([]int32, len(cf.str)+1)
	k := int32(0)
	for b := range cf.str {
		cf.kAt[b] = k
		k++
	}
	cf.kAt[len(cf.str)] = k
	return cf
}

// hasWord reports whether the canonical form holds a letter or a digit.
func (cf *canon) hasWord() bool {
	for _, ch := range cf.c {
		if isLetter(ch) || isNumberDigit(ch) {
			return true
		}
	}
	return false
}

func isWordC(ch rune) bool { return isLetter(ch) || isNumberDigit(ch) || isMark(ch) }

// edgeAt reports whether canonical position k is a word edge. Digit next to
// digit is left to the raw text's number rule.
func (cf *canon) edgeAt(k int) bool {
	if k <= 0 || k >= len(cf.c) {
		return true
	}
	a, b := cf.c[k-1], cf.c[k]
	if !isWordC(a) || !isWordC(b) {
		return true
	}
	return isNumberDigit(a) && isNumberDigit(b)
}
