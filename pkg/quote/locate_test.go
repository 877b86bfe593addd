package quote

import (
	"strings"
	"testing"
)

const seedFetch = "Payment is due in 30 days."

type locateCase struct {
	name   string
	quote  string
	source string
	state  State
	parts  []Span // checked when not nil, with occ
	occ    int
	near   *Span // checked when checkN
	checkN bool
	min    int // Options.MinPartChars
}

func runLocate(t *testing.T, cases []locateCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := LocateQuote(tc.quote, tc.source, Options{MinPartChars: tc.min})
			if got.State != tc.state {
				t.Fatalf("LocateQuote(%q, %q) state = %s, want %s (%+v)", tc.quote, tc.source, got.State, tc.state, got)
			}
			if tc.parts != nil {
				if !equalSpans(got.Parts, tc.parts) || got.Occurrences != tc.occ {
					t.Fatalf("parts = %v occurrences %d, want %v occurrences %d", got.Parts, got.Occurrences, tc.parts, tc.occ)
				}
			}
			if tc.checkN {
				switch {
				case tc.near == nil && got.Nearest != nil:
					t.Fatalf("nearest = %v, want none", *got.Nearest)
				case tc.near != nil && (got.Nearest == nil || *got.Nearest != *tc.near):
					t.Fatalf("nearest = %v, want %v", got.Nearest, *tc.near)
				}
			}
		})
	}
}

func equalSpans(a, b []Span) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLocateQuoteSeedTable(t *testing.T) {
	t.Parallel()
	runLocate(t, []locateCase{
		{name: "exact", quote: "due in 30 days", source: seedFetch, state: Exact, parts: []Span{{11, 25}}, occ: 1},
		{name: "reformatted by case", quote: "PAYMENT is due", source: seedFetch, state: Reformatted, parts: []Span{{0, 14}}, occ: 1},
		{name: "not found with nearest", quote: "due in 60 days", source: seedFetch, state: NotFound, parts: []Span{}, occ: 0, near: &Span{11, 17}, checkN: true},
		{name: "empty source", quote: "due", source: "", state: NotFound, parts: []Span{}, occ: 0, checkN: true},
		{name: "quote with no letter or digit", quote: "…, !", source: "…, ! and more", state: NotFound, parts: []Span{}, occ: 0, checkN: true},
	})
}

const rentDoc = "The rent is €48,000 a year, paid quarterly in advance on the usual quarter days."

func TestLocateQuoteRentExample(t *testing.T) {
	t.Parallel()
	runLocate(t, []locateCase{
		{name: "annual rent is exact", quote: "The rent is €48,000 a year", source: rentDoc, state: Exact, parts: []Span{{0, 26}}, occ: 1},
		{name: "payment is not found, nearest the longest piece", quote: "the rent is paid quarterly", source: rentDoc, state: NotFound, parts: []Span{}, near: &Span{28, 42}, checkN: true},
	})
}

func TestNumbersAreSingleUnits(t *testing.T) {
	t.Parallel()
	runLocate(t, []locateCase{
		{name: "clause 9 not in clause 9a", quote: "clause 9", source: "See clause 9a of the lease.", state: NotFound},
		{name: "clause 9 in clause 9", quote: "clause 9", source: "See clause 9 of the lease.", state: Exact},
		{name: "9,20 not in 9,200", quote: "9,20", source: "a fee of 9,200 is due", state: NotFound},
		{name: "€48 not in €48,000", quote: "€48", source: "rent of €48,000 a year", state: NotFound},
		{name: "18 not in 18.5", quote: "18", source: "clause 18.5 applies", state: NotFound},
		{name: "18. not in 18.5", quote: "clause 18.", source: "clause 18.5 applies", state: NotFound},
		{name: "1 200 not in 1 200 000", quote: "1 200", source: "a sum of 1 200 000 euro", state: NotFound},
		{name: "75% not in .75%", quote: "75%", source: "interest of .75% a month", state: NotFound},
		{name: "48,000 not in €48,000", quote: "48,000", source: "rent of €48,000 a year", state: NotFound},
		{name: "5 not in -5", quote: "5 degrees", source: "at -5 degrees", state: NotFound},
		{name: "9.5 is not 9-5", quote: "rate 9-5", source: "the rate 9.5 applies", state: NotFound},
		{name: "2,000 is not 2.000", quote: "fee 2.000", source: "a fee 2,000 applies", state: NotFound},
		{name: "$1,200 is not £1,200", quote: "pay £1,200", source: "they pay $1,200 now", state: NotFound},
		{name: "<5% is not >5%", quote: "growth >5%", source: "growth <5% expected", state: NotFound},
		{name: "9:30 is not a break", quote: "at 9:30 sharp", source: "Meet at 9:30 sharp.", state: Exact},
		{name: "words match as words", quote: "five hundred thousand euro", source: "six million five hundred thousand euro", state: Exact},
	})
}

func TestWhatCanStillReadFound(t *testing.T) {
	t.Parallel()
	shy, zwsp, bom := "\u00ad", "\u200b", "\ufeff"
	runLocate(t, []locateCase{
		{name: "clause joined to a later sentence", quote: "The tenant shall pay the rent … The landlord shall insure the building",
			source: "The tenant shall pay the rent on time and in full. The landlord shall insure the building.", state: Stitched,
			parts: []Span{{0, 29}, {51, 89}}},
		{name: "clause joined to an earlier sentence", quote: "The landlord shall insure the building … The tenant shall pay the rent",
			source: "The tenant shall pay the rent on time and in full. The landlord shall insure the building.", state: StitchedOutOfOrder},
		{name: "a quote that stops before its sentence ends", quote: "The tenant shall pay the rent", source: "The tenant shall pay the rent on time.", state: Exact},
		{name: "abbreviation not on the list is a sentence end", quote: "The shop opens at 9 a.m. … Monday to Friday it stays open late",
			source: "The shop opens at 9 a.m. on weekdays. Monday to Friday it stays open late.", state: Stitched},
		{name: "a skip may land after U.S.", quote: "The company is based in the U.S. … The board meets every year",
			source: "The company is based in the U.S. and Canada. The board meets every year in spring.", state: Stitched},
		{name: "a grouped amount with a letter prefix", quote: "500 euro", source: "a payment of EUR2 500 euro", state: Exact},
		{name: "combining mark on a sign is set aside", quote: "5 degrees", source: "at -\u03015 degrees", state: Exact},
		{name: "circled letters read as letters", quote: "do not", source: "do ⓃⓄⓉ enter", state: Reformatted},
		{name: "a combining mark on no letter at the quote's start", quote: "\u0301lawful use of the Premises", source: "the lawful use of the Premises", state: Reformatted},
		{name: "a mark after a format character", quote: "cafe", source: "the cafe" + zwsp + "\u0301 opens", state: Exact},
		{name: "emoji are set aside", quote: "the rent 🏠 is due", source: "the rent is due", state: Reformatted},
		{name: "a quote that starts at U+FEFF inside a word", quote: "lawful use", source: "un" + bom + "lawful use", state: Reformatted},
		{name: "a number split by a soft hyphen", quote: "12", source: "pay 12" + shy + "500 now", state: Exact},
		{name: "a leading point split by a zero-width space", quote: "75%", source: "rate ." + zwsp + "75% a month", state: Exact},
		{name: "a dash split by a zero-width space", quote: "5 degrees", source: "at -" + zwsp + "5 degrees", state: Exact},
		{name: "U+FEFF reads as a space before a group of thousands", quote: "12", source: "pay 12" + bom + "500 now", state: NotFound},
		{name: "a sign across U+FEFF", quote: "48,000", source: "rent €" + bom + "48,000 a year", state: Exact},
		{name: "a hyphen outside the BMP does not belong to its number", quote: "5 units", source: "take \U00010EAD5 units", state: Exact},
		{name: "the Garay hyphen does not belong to its number", quote: "5 units", source: "take \U00010D6E5 units", state: Exact},
		{name: "a sign set apart by a space", quote: "48,000", source: "rent € 48,000 a year", state: Exact},
		{name: "CAN in CAN'T", quote: "CAN", source: "YOU CAN'T GO", state: Exact},
		{name: "can in can´t", quote: "can", source: "you can´t go", state: Exact},
		{name: "can in can' t", quote: "can", source: "you can' t go", state: Exact},
		{name: "did in did'nt", quote: "did", source: "he did'nt go", state: Exact},
		{name: "t make in won't make", quote: "t make", source: "it won't make sense", state: Exact},
		{name: "paid across a line-end hyphen", quote: "paid", source: "the sum un-\npaid at the end", state: Exact},
		{name: "a group spaced with a figure space", quote: "1\u2007200", source: "a sum of 1\u2007200\u2007000 euro", state: Exact},
		{name: "a colon at a line's end before a digit", quote: "The meeting of the board starts at … 30 guests will attend the meeting",
			source: "The meeting of the board starts at 9:\n30 guests will attend the meeting.", state: Stitched},
		{name: "a header between blank lines, as at a page break", quote: "The tenant shall pay the rent … on time and in full to the landlord",
			source: "The tenant shall pay the rent\n\nPage 4\n\non time and in full to the landlord.", state: Stitched},
		{name: "a middle-dot decimal", quote: "5 units", source: "take ·5 units", state: Exact},
		{name: "a mark on no letter, the other way round", quote: "cafe\u200b\u0301", source: "the cafe opens", state: Reformatted},
	})
}

func TestWhatReadsNotFound(t *testing.T) {
	t.Parallel()
	zwsp, bom := "\u200b", "\ufeff"
	doc := "The tenant shall pay the rent on time and in full. The landlord shall insure the building against fire."
	runLocate(t, []locateCase{
		{name: "a skip into the middle of a sentence", quote: "The tenant shall pay the rent … insure the building against fire", source: doc, state: NotFound},
		{name: "a skip onto a sentence opening with a digit", quote: "The tenant shall pay the rent in full … 30 days notice is required here",
			source: "The tenant shall pay the rent in full. Also 30 days notice is required here.", state: NotFound},
		{name: "a skip onto a lowercase word", quote: "The shop sells many phones today … iPhones are the most popular",
			source: "The shop sells many phones today in town. iPhones are the most popular.", state: NotFound},
		{name: "a zero-width space as the only separator", quote: "rent due", source: "the rent" + zwsp + "due now", state: NotFound},
		{name: "a whole word across U+FEFF", quote: "unlawful", source: "an un" + bom + "lawful act", state: NotFound},
		{name: "a skip onto a line after a line that ends mid-sentence", quote: "The tenant shall pay the rent … The landlord shall insure",
			source: "The tenant shall pay the rent on time and\nThe landlord shall insure the building.", state: NotFound},
		{name: "a skip past (b) onto a lowercase word", quote: "The tenant covenants as follows … keep the Premises in good repair",
			source: "The tenant covenants as follows with the landlord:\n(b) keep the Premises in good repair.", state: NotFound},
		{name: "quoting the label after a clause", quote: "The tenant covenants as follows … (b) keep the Premises in good repair",
			source: "The tenant covenants as follows with the landlord:\n(b) keep the Premises in good repair.", state: Stitched},
		{name: "a whole word across a line-end hyphen", quote: "substantial", source: "a sub-\nstantial sum", state: NotFound},
		{name: "a sentence after a no-break space", quote: "The tenant shall pay the rent … The landlord shall insure the building",
			source: "The tenant shall pay the rent on time.\u00a0The landlord shall insure the building.", state: NotFound},
		{name: "Ltd. ending a sentence", quote: "The lease is signed with Acme … The landlord shall insure the building",
			source: "The lease is signed with Acme Ltd. The landlord shall insure the building.", state: NotFound},
		{name: "Schedule A. read as an initial", quote: "The fees are set out in … They are paid every single month",
			source: "The fees are set out in Schedule A. They are paid every single month.", state: NotFound},
		{name: "a stress mark left out", quote: "замок", source: "старый за\u0301мок стоит", state: NotFound},
		{name: "part of a Chinese run", quote: "租金", source: "每年租金为四万八千欧元", state: NotFound},
		{name: "a whole Chinese run", quote: "每年租金为四万八千欧元", source: "合同规定：每年租金为四万八千欧元。", state: Exact},
		{name: "a Chinese run joined by punctuation, reformatted", quote: "每年租金 ", source: "合同规定。每年租金，四万", state: NotFound},
		{name: "a Chinese run after a space", quote: "每年租金", source: "合同规定 每年租金 四万", state: Exact},
	})
}

func TestArabicAndHebrewVowelMarksAreOptional(t *testing.T) {
	t.Parallel()
	runLocate(t, []locateCase{
		{name: "unvowelled kutub", quote: "كتب", source: "قرأت كُتُب كثيرة", state: Reformatted, parts: []Span{{5, 10}}, occ: 1},
		{name: "unvowelled kataba", quote: "كتب", source: "هو كَتَبَ الرسالة", state: Reformatted, parts: []Span{{3, 9}}, occ: 1},
		{name: "a written vowel must match", quote: "كَتَبَ", source: "قرأت كُتُب كثيرة", state: NotFound},
		{name: "a written vowel that matches", quote: "كُتُب", source: "قرأت كُتُب كثيرة", state: Exact},
		{name: "unpointed Hebrew", quote: "שלום", source: "אמר שָׁלוֹם לכולם", state: Reformatted},
		{name: "unpointed Syriac is not found in pointed text", quote: "ܟܬܒܐ", source: "ܟܬ\u0732ܒܐ", state: NotFound},
	})
}

func TestSearchCapHoldsOnARepeatedWord(t *testing.T) {
	t.Parallel()
	doc := strings.Repeat("word ", 200000)
	got := LocateQuote("word word word", doc, Options{})
	if got.State != NotFound || len(got.Parts) != 0 {
		t.Fatalf("state %s parts %v, want not_found past the search cap", got.State, got.Parts)
	}
	got = LocateQuote("word word word", strings.Repeat("word ", 300), Options{})
	if got.State != Exact || got.Occurrences != 298 {
		t.Fatalf("state %s occurrences %d, want exact 298", got.State, got.Occurrences)
	}
}
