package quote

import "unicode"

// The character sets the seed names ("What check_quotes does not catch").
// Sets the seed lists code point by code point are written out here; sets it
// defines by Unicode category use Go's unicode tables (Unicode 15.0 under
// Go 1.26) patched to Unicode 17.0 in the Basic Multilingual Plane, where the
// seed's category sets live. See docs/unicode.md.

// isWhitespace is the seed's "whitespace" set.
func isWhitespace(r rune) bool {
	switch r {
	case 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0xA0, 0x1680,
		0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// isLineBreak is the seed's "line break" set (U+000B, U+000C, U+0085 are not).
func isLineBreak(r rune) bool {
	return r == '\n' || r == '\r' || r == 0x2028 || r == 0x2029
}

// isPlainSpaceOrTab: the only whitespace an exact quote's cut_short look-ahead
// and a same-line look-back step over.
func isPlainSpaceOrTab(r rune) bool { return r == ' ' || r == '\t' }

// isClosingMark is the seed's "closing mark" set.
func isClosingMark(r rune) bool {
	switch r {
	case '"', '\'', ')', ']', '}', 0xBB, 0x2019, 0x201D:
		return true
	}
	return false
}

// isOpeningMark is the seed's "opening mark" set.
func isOpeningMark(r rune) bool {
	switch r {
	case '"', 0x201C, 0x201E, 0xAB, '\'', 0x2018, '(', '[':
		return true
	}
	return false
}

// isListMark is the seed's "list mark" set, except the run of '#', which the
// label reader handles.
func isListMark(r rune) bool {
	switch r {
	case '-', '*', 0x2022, 0x25E6, 0x25AA, 0x2023, 0xB7, 0x2013, 0x2014, '|':
		return true
	}
	return false
}

// isDash is the seed's "dash" set. U+2053 SWUNG DASH and the hyphens outside
// the Basic Multilingual Plane (U+10D6E, U+10EAD) are not in it.
func isDash(r rune) bool {
	switch r {
	case 0x2D, 0x58A, 0x5BE, 0x1400, 0x1806, 0x2E17, 0x2E1A, 0x2E3A, 0x2E3B,
		0x2E40, 0x2E5D, 0x301C, 0x3030, 0x30A0, 0xFE31, 0xFE32, 0xFE58, 0xFE63,
		0xFF0D, 0x2212, 0x2796, 0x2D7, 0x207B, 0x208B:
		return true
	}
	return r >= 0x2010 && r <= 0x2015
}

// isDoubleQuote: a double quotation mark breaks a quote into pieces.
func isDoubleQuote(r rune) bool {
	switch r {
	case '"', 0x201C, 0x201D, 0x201E, 0x201F, 0xAB, 0xBB, 0x2E42, 0x301D, 0x301E, 0x301F, 0xFF02:
		return true
	}
	return false
}

// Letters assigned in the Basic Multilingual Plane by Unicode 16.0 and 17.0,
// which Go 1.26's Unicode 15.0 tables do not know. Upper-case ones map to their
// lower-case forms; U+0295 moved from Ll to Lo in Unicode 16.0.
var (
	upper17 = map[rune]rune{
		0x1C89: 0x1C8A, 0xA7CB: 0x0264, 0xA7CC: 0xA7CD, 0xA7CE: 0xA7CF,
		0xA7D2: 0xA7D3, 0xA7D4: 0xA7D5, 0xA7DA: 0xA7DB, 0xA7DC: 0x019B,
	}
	lower17 = map[rune]bool{0x1C8A: true, 0xA7CD: true, 0xA7CF: true, 0xA7DB: true}
)

const (
	latin17Lo = 0x0295 // LATIN LETTER PHARYNGEAL VOICED FRICATIVE: Ll in 15.0, Lo in 16.0+
	riyalSign = 0x20C1 // SAUDI RIYAL SIGN, Sc since Unicode 17.0
)

// isLetter is \p{L} with the BMP letters of Unicode 16.0 and 17.0 added.
func isLetter(r rune) bool {
	if r < 0x80 {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
	}
	return unicode.IsLetter(r) || upper17[r] != 0 || lower17[r] || r == 0xA7F1
}

// isCapital is the seed's "capital letter": one BMP character in \p{Lu} or \p{Lt}.
func isCapital(r rune) bool {
	if r > 0xFFFF {
		return false
	}
	return unicode.IsUpper(r) || unicode.IsTitle(r) || upper17[r] != 0
}

// isLowercase is the seed's "lowercase letter": one BMP character in \p{Ll}.
func isLowercase(r rune) bool {
	if r > 0xFFFF || r == latin17Lo {
		return false
	}
	return unicode.IsLower(r) || lower17[r]
}

// isDecimalDigit is \p{Nd}.
func isDecimalDigit(r rune) bool {
	if r < 0x80 {
		return r >= '0' && r <= '9'
	}
	return unicode.Is(unicode.Nd, r)
}

// isBMPDigit is the seed's "digit": one BMP character in \p{Nd}.
func isBMPDigit(r rune) bool { return r <= 0xFFFF && isDecimalDigit(r) }

// isNumberDigit: where a number's digits are read, superscripts and fractions
// (\p{No}) count too.
func isNumberDigit(r rune) bool {
	return isDecimalDigit(r) || r >= 0x80 && unicode.Is(unicode.No, r)
}

// toLower lower-cases one rune, knowing the BMP letters of Unicode 16.0 and 17.0.
func toLower(r rune) rune {
	if r < 0x80 {
		if r >= 'A' && r <= 'Z' {
			return r + 32
		}
		return r
	}
	if l, ok := upper17[r]; ok {
		return l
	}
	return unicode.ToLower(r)
}

// changesWhenLowered is used for initials: a letter that changes when lowercased.
func changesWhenLowered(r rune) bool { return toLower(r) != r }

func isMark(r rune) bool { return r >= 0x300 && unicode.In(r, unicode.Mn, unicode.Mc, unicode.Me) }

// isInvisibleMark: a combining mark with nothing to see (U+034F COMBINING
// GRAPHEME JOINER, variation selectors …). It makes no word edge, and the
// canonical form, which keeps only visible marks, drops it.
func isInvisibleMark(r rune) bool {
	return isMark(r) && (unicode.Is(unicode.Variation_Selector, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r))
}

func isFormat(r rune) bool { return r >= 0xAD && unicode.Is(unicode.Cf, r) }

func isCurrency(r rune) bool { return unicode.Is(unicode.Sc, r) || r == riyalSign }

func isMathSign(r rune) bool { return unicode.Is(unicode.Sm, r) }

// isSign: a currency or mathematical sign, or a dash, written right before a
// number belongs to it.
func isSign(r rune) bool { return isCurrency(r) || isMathSign(r) || isDash(r) }

func isPunct(r rune) bool { return unicode.IsPunct(r) }

// isKeptSymbol: signs and symbols the canonical form keeps besides letters and
// digits.
func isKeptSymbol(r rune) bool {
	switch r {
	case '%', 0x2030, 0xB0, 0x2031, 0x2032, 0x2033, 0x2034, 0x2057,
		0x2610, 0x2611, 0x2612, 0x2713, 0x2714, 0x2715, 0x2716, 0x2717, 0x2718,
		0x2BBD, 0x2BBE, 0x2BBF, 0x1F5F3:
		return true
	}
	return isCurrency(r) || isMathSign(r)
}

// isSemiticMark: an Arabic or Hebrew non-spacing mark (vowel points,
// cantillation, shadda, sukun …). A quote may leave them out.
func isSemiticMark(r rune) bool {
	if !unicode.Is(unicode.Mn, r) {
		return false
	}
	switch {
	case r >= 0x0591 && r <= 0x05C7: // Hebrew
		return true
	case r >= 0x0610 && r <= 0x061A, r >= 0x064B && r <= 0x065F, r == 0x0670,
		r >= 0x06D6 && r <= 0x06ED, r >= 0x0890 && r <= 0x08FF, r >= 0xFB1E && r <= 0xFB1E,
		r >= 0xFE70 && r <= 0xFE7F:
		return true
	}
	return false
}
