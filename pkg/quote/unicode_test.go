package quote

import (
	"fmt"
	"testing"
)

// The project reads Unicode 15.0 (Go 1.26) patched to 17.0 for the seed's
// BMP sets; these are the characters where the two differ (docs/unicode.md).
func TestUnicode17BoundaryCharacters(t *testing.T) {
	t.Parallel()
	for _, r := range []rune{0x1C89, 0xA7CB, 0xA7CC, 0xA7CE, 0xA7D2, 0xA7D4, 0xA7DA, 0xA7DC} {
		if !isCapital(r) || !changesWhenLowered(r) || !isLetter(r) {
			t.Errorf("U+%04X should be a capital letter", r)
		}
	}
	for _, r := range []rune{0x1C8A, 0xA7CD, 0xA7CF, 0xA7DB} {
		if !isLowercase(r) || !isLetter(r) {
			t.Errorf("U+%04X should be a lowercase letter", r)
		}
	}
	if isLowercase(0x0295) {
		t.Error("U+0295 is Lo in Unicode 16.0+, not a lowercase letter")
	}
	if !isCurrency(0x20C1) || !isKeptSymbol(0x20C1) {
		t.Error("U+20C1 SAUDI RIYAL SIGN is a currency sign in Unicode 17.0")
	}
	if isDash(0x10D6E) || isDash(0x10EAD) || isDash(0x2053) {
		t.Error("the hyphens outside the BMP and U+2053 are not dashes")
	}
	for _, r := range []rune{0x0B, 0x0C, 0x85} {
		if isLineBreak(r) {
			t.Errorf("U+%04X is not a line break", r)
		}
	}
}

func TestUnicode17LettersInTheMatcher(t *testing.T) {
	t.Parallel()
	runLocate(t, []locateCase{
		// U+A7CB lowers to U+0264, so the quote matches case-insensitively.
		{name: "a Unicode 16 capital folds", quote: "\u0264x rule", source: "The \uA7CBx rule applies.", state: Reformatted},
		// A sentence that opens with a Unicode 16 capital is a sentence start.
		{name: "a Unicode 16 capital starts a sentence", quote: "The tenant shall pay the rent … \uA7CBxa is the rule for all",
			source: "The tenant shall pay the rent on time. \uA7CBxa is the rule for all.", state: Stitched},
		{name: "an exact stop before a Unicode 16 lowercase letter is cut short", quote: "The fee is approx.",
			source: "The fee is approx. \uA7CDx more", state: Exact},
	})
	got := LocateQuote("The fee is approx.", "The fee is approx. \uA7CDx more", Options{})
	if !got.CutShort || len(got.CutShortAt) != 1 || got.CutShortAt[0] != 18 {
		t.Fatalf("cut_short %v at %v, want true at 18", got.CutShort, got.CutShortAt)
	}
}

func TestCutShort(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, quote, source string
		at                  []int
	}{
		{"exact before a digit", "The cost is approx.", "The cost is approx. 412 euro.", []int{19}},
		{"exact at a true end", "The cost is fixed.", "The cost is fixed. Next", nil},
		{"exact with a space after the stop", "The cost is approx. ", "The cost is approx. 412 euro.", nil},
		{"exact before a line break", "The cost is approx.", "The cost is approx.\n412 euro.", nil},
		{"reformatted stop inside", "THE COST IS approx. 412 euro", "The cost is approx 412 euro.", []int{18}},
		{"stitched piece ending mid-sentence", "The tenant shall pay the rent. … The landlord shall insure the building",
			"The tenant shall pay the rent on time and in full. The landlord shall insure the building.", []int{29}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := LocateQuote(tc.quote, tc.source, Options{})
			if got.State == NotFound {
				t.Fatalf("not found")
			}
			if got.CutShort != (tc.at != nil) || fmtInts(got.CutShortAt) != fmtInts(tc.at) {
				t.Fatalf("%s: cut_short %v at %v, want %v", got.State, got.CutShort, got.CutShortAt, tc.at)
			}
		})
	}
}

func fmtInts(a []int) string { return fmt.Sprint(a) }
