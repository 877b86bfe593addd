package quote

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Inputs that once cost time quadratic in their length (the fuzz target's
// ~40 s stalls): a stitched quote whose two pieces each occur hundreds of
// times on one long line, where every candidate start rescanned the line;
// and quotes made of one long run of "1." or "a.", where every '.' rescanned
// the run for a clause number or an abbreviation.
func costInputs(n int) []struct{ name, quote, source string } {
	return []struct{ name, quote, source string }{
		{"two pieces, many places, one line", "The tenant shall pay the rent … the landlord shall insure it",
			strings.Repeat("the tenant shall pay the rent and so the landlord shall insure it ", n/10)},
		{"two pieces, many places, out of order", "the landlord shall insure it … The tenant shall pay the rent",
			strings.Repeat("the landlord shall insure it and so the tenant shall pay the rent and so ", n/10)},
		{"a run of clause-number dots", strings.Repeat("1.", n) + " x", "nothing here"},
		{"a run of abbreviation dots", strings.Repeat("a.", n) + " x", "nothing here"},
		{"runs of closing marks", "The tenant shall pay the rent … the landlord shall insure it",
			strings.Repeat("The tenant shall pay the rent on time.)))))))))) the landlord shall insure it ", n/10)},
	}
}

func TestLocateWorkStaysLinear(t *testing.T) {
	t.Parallel()
	for i, small := range costInputs(2000) {
		big := costInputs(4000)[i]
		t.Run(small.name, func(t *testing.T) {
			t.Parallel()
			_, ls := locate(small.quote, small.source, Options{})
			_, lb := locate(big.quote, big.source, Options{})
			runes := utf8.RuneCountInString(big.quote) + utf8.RuneCountInString(big.source)
			if ls.searches > MaxSearches+1 || lb.searches > MaxSearches+1 {
				t.Fatalf("searches %d and %d, want at most the cap %d (+1, the one refused)", ls.searches, lb.searches, MaxSearches)
			}
			// Doubling the input at most doubles the work (plus slack), and
			// the work stays within a few steps per rune.
			if lb.steps > 2*ls.steps+1000 || lb.steps > 4*runes {
				t.Fatalf("steps %d at n=2000, %d at n=4000 (%d runes): not linear", ls.steps, lb.steps, runes)
			}
		})
	}
}

func TestStitchStatesStayBoundedWithManyPlaces(t *testing.T) {
	t.Parallel()
	// 400 places for each piece; every pair of places used to be tried.
	in := costInputs(4000)[0]
	res, l := locate(in.quote, in.source, Options{})
	if res.State != NotFound {
		t.Fatalf("state %s, want not_found (no piece after a skip starts a sentence)", res.State)
	}
	if pairs := 400 * 400; l.steps >= pairs {
		t.Fatalf("steps %d: the stitcher tried every pair of places (%d)", l.steps, pairs)
	}
}
