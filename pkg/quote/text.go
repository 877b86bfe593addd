package quote

import (
	"strings"
	"unicode/utf8"
)

// class is how a rune takes part in word and number edges.
type class uint8

const (
	clOther  class = iota // punctuation, symbols, marks on no letter
	clLetter              // a letter, or a mark on one
	clDigit               // \p{Nd} or \p{No}
	clFormat              // an invisible format character (Cf) other than U+FEFF
	clBOM                 // U+FEFF: a format character to exact, a space to the canonical form
	clSpace               // whitespace
)

// text is a decoded string with what the matcher needs to know about it.
type text struct {
	s      string
	r      []rune
	u16    []int   // UTF-16 offset of each rune; u16[len(r)] is the length
	byteAt []int   // byte offset of each rune; byteAt[len(r)] = len(s)
	runeAt []int32 // rune index of each byte offset that starts a rune
	cls    []class
}

func newText(s string) *text {
	s = strings.ToValidUTF8(s, "\uFFFD")
	t := &text{s: s}
	n := utf8.RuneCountInString(s)
	t.r = make([]rune, 0, n)
	t.u16 = make([]int, 0, n+1)
	t.byteAt = make([]int, 0, n+1)
	t.runeAt = make([]int32, len(s)+1)
	u := 0
	for b, ch := range s {
		t.runeAt[b] = int32(len(t.r))
		t.r = append(t.r, ch)
		t.u16 = append(t.u16, u)
		t.byteAt = append(t.byteAt, b)
		if ch > 0xFFFF {
			u += 2
		} else {
			u++
		}
	}
	t.runeAt[len(s)] = int32(len(t.r))
	t.u16 = append(t.u16, u)
	t.byteAt = append(t.byteAt, len(s))
	t.cls = make([]class, len(t.r))
	for i, ch := range t.r {
		t.cls[i] = classify(ch, t.cls, i)
	}
	return t
}

func classify(ch rune, prev []class, i int) class {
	switch {
	case ch == 0xFEFF:
		return clBOM
	case isWhitespace(ch):
		return clSpace
	case isLetter(ch):
		return clLetter
	case isNumberDigit(ch):
		return clDigit
	case isMark(ch):
		// A mark is part of its letter; on anything else it is set aside.
		if i > 0 && prev[i-1] == clLetter {
			return clLetter
		}
		return clOther
	case isFormat(ch):
		return clFormat
	}
	return clOther
}

func isThousandsSpace(r rune) bool {
	return r == ' ' || r == 0xA0 || r == 0x2009 || r == 0x202F || r == 0xFEFF
}

// edges reports, for each position 0..n, whether a match may start or end
// there. bomIsSpace selects the canonical reading of U+FEFF (a space) over the
// exact one (an invisible format character).
func (t *text) edges(bomIsSpace bool) []bool {
	n := len(t.r)
	e := make([]bool, n+1)
	invisible := func(i int) bool {
		return t.cls[i] == clFormat || t.cls[i] == clBOM && !bomIsSpace
	}
	// nextVis[i]: first index >= i that is not invisible.
	nextVis := make([]int32, n+1)
	nextVis[n] = int32(n)
	for i := n - 1; i >= 0; i-- {
		if invisible(i) {
			nextVis[i] = nextVis[i+1]
		} else {
			nextVis[i] = int32(i)
		}
	}
	lastVis := -1
	for i := 0; i <= n; i++ {
		if i > 0 && !invisible(i-1) {
			lastVis = i - 1
		}
		r := int(nextVis[i])
		if i == 0 || i == n || lastVis < 0 || r >= n {
			e[i] = true
			continue
		}
		lc, rc := t.cls[lastVis], t.cls[r]
		word := (lc == clLetter || lc == clDigit) && (rc == clLetter || rc == clDigit)
		split := lc == clDigit && rc == clDigit && (lastVis != i-1 || r != i)
		e[i] = !word || split
	}
	// A lowercase contraction in 't ("can't", "can’t") is one word: a quote
	// never ends before its apostrophe. "CAN'T", "did'nt" and "can' t" are
	// not such contractions; a quote may still start after the apostrophe.
	for i := 1; i+1 < n; i++ {
		if (t.r[i] == '\'' || t.r[i] == 0x2019) && t.r[i+1] == 't' && isLowercase(t.r[i-1]) &&
			(i+2 == n || t.cls[i+2] != clLetter) {
			e[i] = false
		}
	}
	// Numbers are single units.
	for i := 0; i < n; i++ {
		ch := t.r[i]
		prevDigit := i > 0 && isNumberDigit(t.r[i-1])
		nextDigit := i+1 < n && isNumberDigit(t.r[i+1])
		switch {
		case prevDigit && nextDigit && (isPunct(ch) || isDash(ch)):
			// A separator between two digits: never start or end on it.
			e[i], e[i+1] = false, false
		case prevDigit && isThousandsSpace(ch) && !afterLetter(t, i-1) && i+4 <= n && isDecimalDigit(t.r[i+1]) &&
			isDecimalDigit(t.r[i+2]) && isDecimalDigit(t.r[i+3]) && (i+4 == n || !isNumberDigit(t.r[i+4])):
			// A group of thousands belongs to the number before it.
			e[i], e[i+1] = false, false
		}
		if isNumberDigit(ch) && i > 0 && t.r[i-1] <= 0xFFFF && isSign(t.r[i-1]) {
			e[i] = false // a sign written right before a number belongs to it
		}
		if (ch == '.' || ch == ',') && nextDigit && (i == 0 || t.cls[i-1] != clLetter && t.cls[i-1] != clDigit) {
			e[i+1] = false // a leading decimal point belongs to its number
			if i > 0 && t.r[i-1] <= 0xFFFF && isSign(t.r[i-1]) {
				e[i] = false
			}
		}
	}
	return e
}

var abbreviations = map[string]bool{
	"e.g": true, "i.e": true, "etc": true, "No": true, "Nos": true, "cl": true,
	"para": true, "Sch": true, "Ltd": true, "Co": true, "Inc": true, "St": true,
	"Mr": true, "Mrs": true, "Ms": true, "Dr": true,
}

const maxAbbrev = 4

// endsAbbreviation reports whether the '.' at i ends a listed abbreviation or
// an initial, which is not a sentence end.
func endsAbbreviation(r []rune, i int) bool {
	// The longest listed abbreviation is 4 runes: a longer run of letters and
	// dots is none, and the scan stops there (no rescans of long runs).
	j := i
	for j > 0 && i-j <= maxAbbrev && (isLetter(r[j-1]) || r[j-1] == '.') {
		j--
	}
	if i-j <= maxAbbrev && abbreviations[string(r[j:i])] {
		return true
	}
	// An initial: one BMP letter that changes when lowercased, with neither a
	// letter nor '.' right before it.
	if i >= 1 && r[i-1] <= 0xFFFF && isLetter(r[i-1]) && changesWhenLowered(r[i-1]) {
		return i == 1 || !isLetter(r[i-2]) && r[i-2] != '.'
	}
	return false
}

// isSentenceEnd reports whether the stop at i ends a sentence.
func isSentenceEnd(r []rune, i int) bool {
	switch r[i] {
	case '!', '?':
		return true
	case '.':
	default:
		return false
	}
	n := len(r)
	if i > 0 && i+1 < n && isNumberDigit(r[i-1]) && isNumberDigit(r[i+1]) {
		return false // a decimal point
	}
	if i+1 < n && r[i+1] == '.' {
		return false // only the last dot of a run counts
	}
	return !endsAbbreviation(r, i)
}

// afterLetter reports whether the digit run ending at i has a letter right
// before it (EUR2 500: a letter prefix, not a number of its own).
func afterLetter(t *text, i int) bool {
	for i > 0 && isNumberDigit(t.r[i-1]) {
		i--
	}
	return i > 0 && t.cls[i-1] == clLetter
}
