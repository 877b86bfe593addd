package quote

import (
	"strings"
	"testing"
	"unicode/utf16"
)

// sliceU16 is JavaScript's text.slice(start, end).
func sliceU16(s string, start, end int) string {
	u := utf16.Encode([]rune(s))
	return string(utf16.Decode(u[start:end]))
}

// onBoundary: the offset does not split a surrogate pair.
func onBoundary(s string, off int) bool {
	u := utf16.Encode([]rune(s))
	return off == 0 || off == len(u) || !utf16.IsSurrogate(rune(u[off])) || !utf16.IsSurrogate(rune(u[off-1])) || u[off] < 0xDC00
}

func FuzzLocateQuote(f *testing.F) {
	seeds := [][2]string{
		{"due in 30 days", seedFetch}, {"PAYMENT is due", seedFetch}, {"due in 60 days", seedFetch},
		{"The rent is €48,000 a year", rentDoc}, {"the rent is paid quarterly", rentDoc},
		{"كتب", "قرأت كُتُب كثيرة"}, {"a … b", "a. B"}, {"1 200", "1 200 000"}, {"𝒜 x", "𝒜 x 𝒜 x."},
		{"The tenant shall pay the rent … The landlord shall insure the building", "The tenant shall pay the rent on time and in full. The landlord shall insure the building."},
		{"\u0301", "\ufeff\u00ad"}, {"x.", "x. y"}, {"", "abc"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], 0)
	}
	f.Fuzz(func(t *testing.T, q, src string, min int) {
		if !utf8Valid(q) || !utf8Valid(src) {
			return // JSON strings are valid text
		}
		res := LocateQuote(q, src, Options{MinPartChars: min % 40})
		n := len(utf16.Encode([]rune(src)))
		spans := append([]Span{}, res.Parts...)
		if res.Nearest != nil {
			spans = append(spans, *res.Nearest)
		}
		for _, p := range spans {
			if p.Start < 0 || p.End > n || p.Start > p.End || !onBoundary(src, p.Start) || !onBoundary(src, p.End) {
				t.Fatalf("span %v outside %d or off a character boundary", p, n)
			}
		}
		for _, a := range res.CutShortAt {
			if a < 0 || a > n || !onBoundary(src, a) {
				t.Fatalf("cut_short_at %d outside %d", a, n)
			}
		}
		if res.State == Exact {
			if len(res.Parts) != 1 || sliceU16(src, res.Parts[0].Start, res.Parts[0].End) != q {
				t.Fatalf("exact part %v slices to %q, not the quote %q", res.Parts, sliceU16(src, res.Parts[0].Start, res.Parts[0].End), q)
			}
		}
		if res.State == NotFound && (len(res.Parts) != 0 || res.Occurrences != 0) {
			t.Fatalf("not_found with parts %v", res.Parts)
		}
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
