package quote

// Seed 003 checklist: every rule and example of "Built-in handlers"
// (check_quotes) and "Helper functions" (locateQuote), each mapped to the test
// that proves it. Tests in this file unless a file is named.
//
// locateQuote helper table (locate_test.go)
//   L1  'due in 30 days' exact {11,25} ×1 ........ TestLocateQuoteSeedTable/exact
//   L2  'PAYMENT is due' reformatted {0,14} ×1 ... TestLocateQuoteSeedTable/reformatted_by_case
//   L3  'due in 60 days' not_found nearest {11,17}  TestLocateQuoteSeedTable/not_found_with_nearest
//   L4  empty source / quote with no letter or digit: not_found, no parts
//       ...................................... TestLocateQuoteSeedTable/empty_source, /quote_with_no_letter_or_digit
//   L5  nearest absent when the piece holds no whole word; Arabic read without marks
//       ...................................... TestSeedNearest
//
// check_quotes output example (handler_test.go, locate_test.go)
//   H1  rent document, two values, by_state, all_found, candidates_found, nearest 28–42
//       ...................................... TestCheckQuotesSeedExample, TestLocateQuoteRentExample
//   H2  config keys, defaults, every fault at once, no output yet, not text, not objects
//       ...................................... TestCheckQuotesConfigFaultsNamedAtOnce
//   H3  min_part_chars (at least 4) ........... TestCheckQuotesMinPartChars, TestSeedStitchedParts/min_part_*
//   H4  unquoted / no quote / quote not text / control chars / 80-char cut / ten then "and N more"
//       ...................................... TestCheckQuotesValuesWithoutAQuote, TestCheckQuotesAllUnquotedIsAllFound,
//                                              TestCheckQuotesWarningNamesTenThenCounts
//
// States
//   E1  exact: character for character at word and number edges ... TestLocateQuoteSeedTable/exact
//   E2  a Cf inside a word (soft hyphen, ZWSP) makes no edge ..... TestSeedExactRow/soft_hyphen_*, /zero-width_space_*
//   E3  U+FEFF excepted: reads as a space ........................ TestWhatCanStillReadFound/a_quote_that_starts_at_U+FEFF_inside_a_word
//   E4  a combining mark, visible or not (accent, U+034F, VS) makes no edge
//       ...................................... TestSeedExactRow/accent_*, /grapheme_joiner_*, /variation_selector_*
//   E5  never starts or ends between a letter and its visible mark  TestSeedExactRow/quote_opening_on_a_visible_mark
//   R1  reformatted: case, punctuation, quotation marks, dashes, spacing set aside
//       ...................................... TestSeedReformattedRow/case_*, /dash_*, /quotation_marks_*, /spacing_*
//   R2  9.5≠9-5, 2,000≠2.000, $1,200≠£1,200, <5%≠>5% ............ TestNumbersAreSingleUnits (locate_test.go)
//   R3  % ‰ ° ‱ currency, math signs, primes, ballot boxes, check marks, superscripts, fractions kept
//       ...................................... TestSeedReformattedRow/kept_*
//   R4  NFKC (ligatures) ......................................... TestSeedReformattedRow/NFKC_ligature
//   S1  stitched in order, parts joined when adjacent ............. TestWhatCanStillReadFound/clause_joined_to_a_later_sentence, TestSeedStitchedParts
//   S2  a part shorter than min_part_chars: not_found ............. TestSeedStitchedParts/min_part_*
//   S3  breaks: … ... sentence end ; : (not 9:30) double quote, line break
//       ...................................... TestSeedBreaks
//   S4  a quote with no break is never stitched .................... TestSeedPageHeaders/header_crossed_without_…
//   S5  after a skip: sentence, clause (; :), line that counts ...... TestSeedBreaks, TestSeedPageHeaders, TestSeedListItems
//   S6  line counts after blank line, sentence end, clause, table row (|)
//       ...................................... TestSeedPageHeaders, TestSeedListItems/*_mid-sentence_line
//   S7  clause numbers 6.2, 12., (a), IV. skipped at a counting line start, before a capital or opening mark;
//       never bare digits ........................................ TestSeedLabels/skip_past_*
//   S8  after a stop: capital or opening mark, or right after one .. TestSeedSentenceStarts
//   S9  list marks - * • ◦ ▪ ‣ · – — | and # runs: item opens with any word
//       ...................................... TestSeedListItems/list_mark_*
//   S10 a line quoted with its own clause number (2. Send…) ......... TestSeedLabels/quoted_2._Send_*
//   S11 abbreviation list and initials are not sentence ends ....... TestSeedAbbreviations
//   O1  stitched_out_of_order ....................................... TestWhatCanStillReadFound/clause_joined_to_an_earlier_sentence
//   N1  not_found past 1,000 substring searches .................... TestSearchCapHoldsOnARepeatedWord (locate_test.go), TestLocateWorkStaysLinear, TestStitchStatesStayBoundedWithManyPlaces (cost_test.go)
//   U1  unquoted ...................................................... TestCheckQuotesValuesWithoutAQuote (handler_test.go)
//
// cut_short
//   C1  exact: last char its stop; past closing marks, spaces, tabs a lowercase letter or digit (approx. 412)
//       ...................................... TestCutShort (unicode_test.go), TestSeedCutShort/exact_*
//   C2  exact: other whitespace, non-BMP Ll/Nd, whitespace the quote carries: unmarked
//       ...................................... TestSeedCutShort/exact_*, TestCutShort/exact_with_a_space_after_the_stop
//   C3  other states: each stop inside; not ... dots, not '.' after …, not abbreviations or initials;
//       the document has no stop and does not end its line or text there; a carried break changes nothing
//       ...................................... TestSeedCutShort/inside_*, TestCutShort
//
// Numbers (a number written in digits is one unit)
//   D1  clause 9 / 9a, 9,20 / 9,200, €48 / €48,000, 18 and 18. / 18.5, 1 200 / 1 200 000, 75% / .75%
//   D2  48,000 not in €48,000, 5 not in -5; words matched as words
//       ...................................... TestNumbersAreSingleUnits (locate_test.go)
//   D3  the separators between two digits are kept (9:30 is not 9.30) TestSeedReformattedRow/kept_separator_*
//   D4  unvowelled Arabic matches every vowelling ................... TestArabicAndHebrewVowelMarksAreOptional (locate_test.go)
//   D5  a vowel mark the quote leaves out is optional, one it writes must match (per mark)
//       ...................................... TestSeedArabicHebrewMarks
//
// Word sets (What check_quotes does not catch)
//   W1  whitespace, line break (not U+000B U+000C U+0085), closing/opening marks, list marks, dashes
//       (not U+2053), capital/lowercase letter, digit, initial ... chars.go; TestUnicode17BoundaryCharacters,
//       TestSeedListItems, TestSeedSentenceStarts, TestSeedSentenceEndsNotHonoured/form_feed_*
//
// Still reads found
//   F1  clause joined to a later / earlier sentence ................ TestWhatCanStillReadFound/clause_joined_*
//   F2  number in words .............................................. TestNumbersAreSingleUnits/words_match_as_words
//   F3  true quote stopping early is found ........................... TestWhatCanStillReadFound/a_quote_that_stops_before_its_sentence_ends
//   F4  abbreviations off the list read as sentence ends: a.m. Monday, excl. VAT, U.S. The, U.K. The, U.S.A. The, U.S. (the
//       ...................................... TestSeedAbbreviations/off_the_list_*, TestWhatCanStillReadFound/abbreviation_*
//   F5  EUR2 500 euro; middle-dot decimal ............................ TestWhatCanStillReadFound/a_grouped_amount_*, /a_middle-dot_decimal
//   F6  combining mark on a digit or sign set aside; circled, squared, parenthesised letters read as letters
//       ...................................... TestWhatCanStillReadFound/combining_mark_*, /circled_*, TestSeedSymbolLetters
//   F7  negative squared, negative circled, regional indicators set aside either way  TestSeedSymbolLetters
//   F8  combining mark on no letter: quote start, after a space, after a Cf
//       ...................................... TestWhatCanStillReadFound/a_combining_mark_*, /a_mark_*, TestSeedExactRow/mark_after_a_space
//   F9  other symbols (bullets, emoji) set aside ..................... TestWhatCanStillReadFound/emoji_are_set_aside
//   F10 U+FEFF inside a word reads reformatted ....................... TestWhatCanStillReadFound/a_quote_that_starts_at_U+FEFF_inside_a_word
//   F11 blank line inside a sentence, header between blank lines ..... TestWhatCanStillReadFound/a_header_between_blank_lines*, TestSeedPageHeaders/blank_line_*
//   F12 dotted decimal before a capital at a counting line start (2.5 Million) TestSeedLabels/dotted_decimal_*
//   F13 Cf inside a number / after a leading point / after a dash; U+FEFF as a space
//       ...................................... TestWhatCanStillReadFound/a_number_split_*, /a_leading_point_*, /a_dash_split_*, /U+FEFF_*, /a_sign_across_U+FEFF
//   F14 hyphens outside the BMP do not belong to the number ......... TestWhatCanStillReadFound/a_hyphen_outside_the_BMP_*, /the_Garay_hyphen_*
//   F15 a sign set apart by a space .................................. TestWhatCanStillReadFound/a_sign_set_apart_by_a_space
//   F16 contractions: CAN/CAN'T, can´t, can' t, did'nt, t make; lowercase can not in can't / can’t
//       ...................................... TestWhatCanStillReadFound/CAN_*, /can_*, /did_*, /t_make_*, TestSeedContractions
//   F17 line-end hyphen: paid in un-/paid ............................ TestWhatCanStillReadFound/paid_across_a_line-end_hyphen
//   F18 group of thousands with another space (U+2007, U+2002, U+3000) TestWhatCanStillReadFound/a_group_spaced_*, TestSeedThousands
//   F19 ':' at a line's end before a digit ........................... TestWhatCanStillReadFound/a_colon_at_a_line's_end_before_a_digit
//
// Reads not found although honest
//   X1  skip into the middle of a sentence, with or without … ....... TestWhatReadsNotFound/a_skip_into_*, TestSeedBreaks/no_break_mid-sentence
//   X2  skip onto a digit, currency sign, lowercase word, script without capitals
//       ...................................... TestWhatReadsNotFound/a_skip_onto_*, TestSeedSentenceStarts/onto_*
//   X3  skip onto a clause number mid-line after a sentence end ...... TestSeedLabels/mid-line_clause_number_*
//   X4  ZWSP as the only separator; whole word across U+FEFF ......... TestWhatReadsNotFound/a_zero-width_*, /a_whole_word_across_U+FEFF
//   X5  new line after a mid-sentence line, list item included; line under a heading with no stop
//       ...................................... TestWhatReadsNotFound/a_skip_onto_a_line_*, TestSeedListItems/*_mid-sentence_line, /under_a_heading_*
//   X6  items opening with + ○ ● ■ > U+F0B7 at any line start; a kept sign quoted with the item reads stitched
//       after ; : or a blank line .................................. TestSeedListItems/other_mark_*, /kept_sign_*
//   X7  skip past a clause number onto lowercase; quoting the label: (b) A) IV. after a sentence, 2. Send;
//       b. and a) are not labels .................................... TestSeedLabels, TestWhatReadsNotFound/a_skip_past_(b)_*
//   X8  page header crossed without …; with the break or …: blank line after, ; : | ending, sentence end then
//       capital / opening mark / list mark / #; a line opening with ; or : after any header  TestSeedPageHeaders
//   X9  whole word across a line-end hyphen .......................... TestWhatReadsNotFound/a_whole_word_across_a_line-end_hyphen
//   X10 no-break space, form feed, footnote marker, tab-separated row, labels a) A) A., Ltd. Inc. etc.,
//       Schedule A., bullet mid-line ................................ TestSeedSentenceEndsNotHonoured, TestSeedLabels/skip_past_a)_*,
//                                                                      TestWhatReadsNotFound/a_sentence_after_a_no-break_space, /Ltd._*, /Schedule_A.*
//   X11 a visible mark left out (за́мок), pointed Syriac .............. TestWhatReadsNotFound/a_stress_mark_left_out,
//                                                                      TestArabicAndHebrewVowelMarksAreOptional/unpointed_Syriac_*
//   X12 CJK/Thai whole runs; joined by set-aside punctuation reads not_found TestWhatReadsNotFound/*Chinese*, TestSeedRuns

import (
	"strings"
	"testing"
	"unicode/utf16"
)

// spanOf is where sub first lies in doc, in UTF-16 code units.
func spanOf(doc, sub string) Span {
	i := strings.Index(doc, sub)
	if i < 0 {
		panic("spanOf: " + sub + " not in " + doc)
	}
	u := func(s string) int { return len(utf16.Encode([]rune(s))) }
	return Span{u(doc[:i]), u(doc[:i+len(sub)])}
}

const (
	pay  = "The tenant shall pay the rent" // 29 characters
	rest = "on time and in full to the landlord"
	cov  = "The tenant covenants as follows" // 31 characters
	covd = cov + " with the landlord"
	item = "keep the Premises in good repair"
)

func TestSeedPageHeaders(t *testing.T) {
	t.Parallel()
	skip := pay + " … " + rest
	kept := pay + "\n" + rest
	doc := func(header, next string) string { return pay + "\n" + header + "\n" + next + "." }
	runLocate(t, []locateCase{
		{name: "header crossed without …, joined with a space", quote: pay + " " + rest, source: doc("Lease of 4 High Street", rest), state: NotFound},
		{name: "header with no stop, skipped with …", quote: skip, source: doc("Lease of 4 High Street", rest), state: NotFound},
		{name: "header with no stop, line break kept", quote: kept, source: doc("Lease of 4 High Street", rest), state: NotFound},
		{name: "blank line after the header, skipped with …", quote: skip, source: doc("Lease of 4 High Street\n", rest), state: Stitched,
			parts: []Span{{0, 29}, spanOf(doc("Lease of 4 High Street\n", rest), rest)}},
		{name: "blank line after the header, line break kept", quote: kept, source: doc("Lease of 4 High Street\n", rest), state: Stitched},
		{name: "header ending with ;", quote: skip, source: doc("Lease of 4 High Street;", rest), state: Stitched},
		{name: "header ending with :, line break kept", quote: kept, source: doc("Lease of 4 High Street:", rest), state: Stitched},
		{name: "header ending with |", quote: skip, source: doc("| Lease | Page 4 |", rest), state: Stitched,
			parts: []Span{{0, 29}, spanOf(doc("| Lease | Page 4 |", rest), rest)}},
		{name: "header ending a sentence, next line a capital", quote: pay + " … On time and in full to the landlord",
			source: doc("Lease of 4 High Street.", "On time and in full to the landlord"), state: Stitched},
		{name: "header ending a sentence, next line an opening mark", quote: skip,
			source: doc("Lease of 4 High Street.", "("+rest+")"), state: Stitched},
		{name: "header ending a sentence, next line a list mark", quote: skip,
			source: doc("Lease of 4 High Street.", "- "+rest), state: Stitched},
		{name: "header ending a sentence, next line a run of #", quote: skip,
			source: doc("Lease of 4 High Street.", "### "+rest), state: Stitched},
		{name: "header ending a sentence, next line lowercase", quote: skip, source: doc("Lease of 4 High Street.", rest), state: NotFound},
		{name: "a line opening with ; after any header", quote: pay + " … and " + rest,
			source: doc("Lease of 4 High Street", "; and "+rest), state: Stitched},
		{name: "a line opening with : after any header", quote: pay + " … and " + rest,
			source: doc("Lease of 4 High Street", ": and "+rest), state: Stitched},
		{name: "blank line inside a sentence", quote: skip, source: pay + " now\n\n" + rest + ".", state: Stitched},
	})
}

func TestSeedListItems(t *testing.T) {
	t.Parallel()
	q := cov + " … " + item
	var cases []locateCase
	for _, m := range []string{"-", "*", "•", "◦", "▪", "‣", "·", "–", "—", "|", "#", "###"} {
		cases = append(cases,
			locateCase{name: "list mark " + m + " after a sentence end", quote: q, source: covd + ".\n" + m + " " + item + ".", state: Stitched,
				parts: []Span{{0, 31}, spanOf(covd+".\n"+m+" "+item+".", item)}},
			locateCase{name: "list mark " + m + " after a mid-sentence line", quote: q, source: covd + "\n" + m + " " + item + ".", state: NotFound},
		)
	}
	for _, m := range []string{"+", "○", "●", "■", ">", "\uF0B7"} {
		for ctx, sep := range map[string]string{"colon": ":\n", "semicolon": ";\n", "blank line": "\n\n", "sentence end": ".\n"} {
			cases = append(cases, locateCase{name: "other mark " + m + " after a " + ctx, quote: q, source: covd + sep + m + " " + item + ".", state: NotFound})
		}
	}
	for _, m := range []string{"+", ">", "="} {
		withSign := cov + " … " + m + " " + item
		cases = append(cases,
			locateCase{name: "kept sign " + m + " quoted after a colon", quote: withSign, source: covd + ":\n" + m + " " + item + ".", state: Stitched,
				parts: []Span{{0, 31}, spanOf(covd+":\n"+m+" "+item+".", m+" "+item)}},
			locateCase{name: "kept sign " + m + " quoted after a semicolon", quote: withSign, source: covd + ";\n" + m + " " + item + ".", state: Stitched},
			locateCase{name: "kept sign " + m + " quoted after a blank line", quote: withSign, source: covd + "\n\n" + m + " " + item + ".", state: Stitched},
			locateCase{name: "kept sign " + m + " quoted after a sentence end", quote: withSign, source: covd + ".\n" + m + " " + item + ".", state: NotFound},
		)
	}
	cases = append(cases,
		locateCase{name: "minus sign quoted with the item", quote: cov + " … − " + item, source: covd + ":\n− " + item + ".", state: NotFound},
		locateCase{name: "set-aside mark ○ quoted with the item", quote: cov + " … ○ " + item, source: covd + ":\n○ " + item + ".", state: NotFound},
		locateCase{name: "an item under a heading with no stop", quote: q, source: covd + ".\n\nRepairs\n- " + item + ".", state: NotFound},
		locateCase{name: "a line under a heading with no stop", quote: cov + " … The Premises are kept in repair",
			source: covd + ".\n\nRepairs\nThe Premises are kept in repair.", state: NotFound},
	)
	runLocate(t, cases)
}

func TestSeedLabels(t *testing.T) {
	t.Parallel()
	capd := "The Premises are kept in repair"
	onto := cov + " … " + capd
	var cases []locateCase
	// Skipping past a label onto a capital, after a line that ends a sentence.
	for lab, want := range map[string]State{
		"6.2": Stitched, "12.": Stitched, "(a)": Stitched, "(iv)": Stitched, "IV.": Stitched, "XII.": Stitched,
		"12": NotFound, "a)": NotFound, "A)": NotFound, "A.": NotFound, "I.": NotFound,
		// Not labels, but their '.' ends a sentence (no initial: a lowercase
		// letter, or a letter before it), so a capital after it starts one.
		"b.": Stitched, "IIII.": Stitched,
	} {
		cases = append(cases, locateCase{name: "skip past " + lab + " onto a capital", quote: onto, source: covd + ".\n" + lab + " " + capd + ".", state: want})
	}
	for _, lab := range []string{"12.", "(b)", "IV."} {
		cases = append(cases,
			locateCase{name: "skip past " + lab + " onto an opening mark", quote: cov + " … \"" + capd, source: covd + ".\n" + lab + " \"" + capd + "\".", state: Stitched},
			locateCase{name: "skip past " + lab + " onto a lowercase word", quote: cov + " … " + item, source: covd + ".\n" + lab + " " + item + ".", state: NotFound},
			locateCase{name: "skip past " + lab + " after a mid-sentence line", quote: onto, source: covd + "\n" + lab + " " + capd + ".", state: NotFound},
		)
	}
	// Quoting the label as well.
	for lab, want := range map[string]State{"(b)": Stitched, "A)": Stitched, "IV.": Stitched, "a)": NotFound, "b.": NotFound} {
		cases = append(cases, locateCase{name: "quoted " + lab + " after a sentence end", quote: cov + " … " + lab + " " + item,
			source: covd + ".\n" + lab + " " + item + ".", state: want})
		for ctx, sep := range map[string]string{"colon": ":\n", "semicolon": ";\n", "blank line": "\n\n"} {
			cases = append(cases, locateCase{name: "quoted " + lab + " after a " + ctx, quote: cov + " … " + lab + " " + item,
				source: covd + sep + lab + " " + item + ".", state: Stitched})
		}
	}
	cases = append(cases,
		locateCase{name: "quoted 2. Send after a sentence end", quote: cov + " … 2. Send the notice to the landlord",
			source: covd + ".\n2. Send the notice to the landlord.", state: Stitched},
		locateCase{name: "quoted 2. send after a sentence end", quote: cov + " … 2. send the notice to the landlord",
			source: covd + ".\n2. send the notice to the landlord.", state: NotFound},
		locateCase{name: "quoted 2. send after a colon", quote: cov + " … 2. send the notice to the landlord",
			source: covd + ":\n2. send the notice to the landlord.", state: Stitched},
		locateCase{name: "mid-line clause number quoted after a sentence end", quote: pay + " … 12. The landlord shall insure the building",
			source: pay + " on time. 12. The landlord shall insure the building.", state: NotFound},
		locateCase{name: "mid-line clause number skipped after a sentence end", quote: pay + " … The landlord shall insure the building",
			source: pay + " on time. 12. The landlord shall insure the building.", state: NotFound},
		locateCase{name: "a sentence ending with a number still ends", quote: pay + " … The landlord shall insure the building",
			source: pay + " since 1912. The landlord shall insure the building.", state: Stitched},
		locateCase{name: "dotted decimal before a capital at a counting line start", quote: cov + " … Million euro are set aside for repairs",
			source: covd + ".\n2.5 Million euro are set aside for repairs.", state: Stitched},
	)
	runLocate(t, cases)
}

func TestSeedAbbreviations(t *testing.T) {
	t.Parallel()
	ins := "The landlord shall insure the building"
	q := "The lease is signed with Acme … " + ins
	var cases []locateCase
	for _, a := range []string{"e.g.", "i.e.", "etc.", "No.", "Nos.", "cl.", "para.", "Sch.", "Ltd.", "Co.", "Inc.", "St.", "Mr.", "Mrs.", "Ms.", "Dr.", "J."} {
		cases = append(cases, locateCase{name: "listed " + a + " is not a sentence end", quote: q,
			source: "The lease is signed with Acme " + a + " " + ins + ".", state: NotFound})
	}
	for _, a := range []string{"Corp.", "a.m.", "excl.", "U.S.", "U.K.", "U.S.A."} {
		cases = append(cases, locateCase{name: "off the list " + a + " reads as a sentence end", quote: q,
			source: "The lease is signed with Acme " + a + " " + ins + ".", state: Stitched})
	}
	cases = append(cases,
		locateCase{name: "off the list U.S. before an opening mark", quote: "The lease is signed with Acme … (the landlord shall insure the building",
			source: "The lease is signed with Acme U.S. (the landlord shall insure the building).", state: Stitched},
		locateCase{name: "an initial inside the quote does not split it", quote: "The lease was signed by A. Smith", source: "The lease was signed by A. Smith.", state: Exact},
	)
	runLocate(t, cases)
}

func TestSeedSentenceStarts(t *testing.T) {
	t.Parallel()
	ins := "The landlord shall insure the building"
	runLocate(t, []locateCase{
		{name: "after ! a capital", quote: pay + " … " + ins, source: pay + " on time! " + ins + ".", state: Stitched},
		{name: "after ? a capital", quote: pay + " … " + ins, source: pay + " on time? " + ins + ".", state: Stitched},
		{name: "after a stop and a closing mark", quote: pay + " … " + ins, source: pay + " on time.\") " + ins + ".", state: Stitched},
		{name: "right after an opening mark", quote: pay + " … the landlord shall insure the building", source: pay + " on time. “the landlord shall insure the building”.", state: Stitched},
		{name: "a stop at the end of the line before", quote: pay + " … " + ins, source: pay + " on time.\n" + ins + ".", state: Stitched},
		{name: "onto a currency sign", quote: pay + " … €48,000 is payable by the tenant", source: pay + " on time. €48,000 is payable by the tenant.", state: NotFound},
		{name: "onto a script with no capitals", quote: pay + " … המשכיר יבטח את הבניין מפני אש", source: pay + " on time. המשכיר יבטח את הבניין מפני אש.", state: NotFound},
		{name: "onto a lowercase word after a stop", quote: pay + " … the landlord shall insure the building", source: pay + " on time. the landlord shall insure the building.", state: NotFound},
		{name: "after a clause ;", quote: pay + " … the landlord shall insure the building", source: pay + " on time; the landlord shall insure the building.", state: Stitched},
		{name: "after a clause :", quote: pay + " … the landlord shall insure the building", source: pay + " on time: the landlord shall insure the building.", state: Stitched},
	})
}

func TestSeedSentenceEndsNotHonoured(t *testing.T) {
	t.Parallel()
	ins := "The landlord shall insure the building"
	q := pay + " … " + ins
	runLocate(t, []locateCase{
		{name: "control: a plain space", quote: q, source: pay + " on time. " + ins + ".", state: Stitched},
		{name: "form feed after the stop", quote: q, source: pay + " on time.\f" + ins + ".", state: NotFound},
		{name: "form feed is not a line break", quote: q, source: pay + " on time\n\f" + ins + ".", state: NotFound},
		{name: "footnote marker ¹ after the stop", quote: q, source: pay + " on time.¹ " + ins + ".", state: NotFound},
		{name: "footnote marker [1] after the stop", quote: q, source: pay + " on time.[1] " + ins + ".", state: NotFound},
		{name: "bullet in the middle of a line after a sentence end", quote: q, source: pay + " on time. • " + ins + ".", state: NotFound},
		{name: "tab-separated row with no stop", quote: "Annual rent payable by the tenant … Service charge payable by the tenant",
			source: "Annual rent payable by the tenant\t48,000 euro\nService charge payable by the tenant\t2,000 euro\n", state: NotFound},
		{name: "control: tab-separated row ending a sentence", quote: "Annual rent payable by the tenant … Service charge payable by the tenant",
			source: "Annual rent payable by the tenant\t48,000 euro.\nService charge payable by the tenant\t2,000 euro.\n", state: Stitched},
		{name: "Inc. ending a sentence", quote: "The lease is signed with Acme … " + ins, source: "The lease is signed with Acme Inc. " + ins + ".", state: NotFound},
		{name: "etc. ending a sentence", quote: "The lease covers the rent, the fees … " + ins, source: "The lease covers the rent, the fees etc. " + ins + ".", state: NotFound},
	})
}

func TestSeedBreaks(t *testing.T) {
	t.Parallel()
	ins := "the landlord shall insure the building"
	src := pay + " on time; " + ins + "."
	runLocate(t, []locateCase{
		{name: "three dots", quote: pay + "... " + ins, source: src, state: Stitched},
		{name: "ellipsis without spaces", quote: pay + "…" + ins, source: src, state: Stitched},
		{name: "semicolon", quote: pay + "; " + ins, source: src, state: Stitched},
		{name: "double quotation mark", quote: pay + " \"" + ins, source: src, state: Stitched},
		{name: "line break", quote: pay + "\n" + ins, source: src, state: Stitched},
		{name: "no break mid-sentence", quote: pay + " " + ins, source: src, state: NotFound},
		{name: "a colon between digits is no break", quote: "The meeting starts at … 30 guests will attend the meeting",
			source: "The meeting starts at 9:30 guests will attend the meeting.", state: NotFound},
	})
}

func TestSeedStitchedParts(t *testing.T) {
	t.Parallel()
	src := "The tenant pays rent. The landlord insures it."
	runLocate(t, []locateCase{
		{name: "min_part default 20 rejects a short part", quote: "The tenant pays … The landlord insures", source: src, state: NotFound},
		{name: "min_part 4 accepts it", quote: "The tenant pays … The landlord insures", source: src, state: Stitched, min: 4,
			parts: []Span{{0, 15}, spanOf(src, "The landlord insures")}},
		{name: "min_part below 4 reads as 4", quote: "The … The landlord insures", source: src, state: NotFound, min: 1},
		{name: "neighbouring pieces count as one part", quote: "The tenant pays rent. The landlord … The landlord insures it",
			source: "The tenant pays rent. The landlord is kind. The landlord insures it.", state: Stitched, min: 21,
			parts: []Span{{0, 34}, {44, 67}}},
	})
}

func TestSeedExactRow(t *testing.T) {
	t.Parallel()
	runLocate(t, []locateCase{
		{name: "soft hyphen makes no edge", quote: "lawful", source: "an un\u00adlawful act", state: NotFound},
		{name: "soft hyphen is set aside across the word", quote: "unlawful", source: "an un\u00adlawful act", state: Reformatted, parts: []Span{{3, 12}}, occ: 1},
		{name: "zero-width space inside a word makes no edge", quote: "lawful", source: "an un\u200blawful act", state: NotFound},
		{name: "accent makes no edge", quote: "cafe", source: "the cafe\u0301 opens", state: NotFound},
		{name: "grapheme joiner makes no edge, set aside when canonical", quote: "cafe", source: "the cafe\u034f opens", state: Reformatted},
		{name: "variation selector makes no edge, set aside when canonical", quote: "cafe", source: "the cafe\ufe0f opens", state: Reformatted},
		{name: "quote opening on a visible mark", quote: "\u0301 opens", source: "the cafe\u0301 opens", state: Reformatted},
		{name: "mark after a space is set aside", quote: "the \u0301cafe opens", source: "the cafe opens", state: Reformatted},
		{name: "exact with its marks", quote: "cafe\u0301 opens", source: "the cafe\u0301 opens", state: Exact, parts: []Span{{4, 15}}, occ: 1},
	})
}

func TestSeedReformattedRow(t *testing.T) {
	t.Parallel()
	runLocate(t, []locateCase{
		{name: "case set aside", quote: "THE RENT IS DUE", source: "the rent is due", state: Reformatted},
		{name: "dash variants read as -", quote: "well-known tenant", source: "a well–known tenant", state: Reformatted},
		{name: "dash minus sign before a digit", quote: "at -5 degrees", source: "at −5 degrees", state: Reformatted},
		{name: "quotation marks and punctuation dropped", quote: "the rent, due", source: "the “rent” due", state: Reformatted},
		{name: "spacing collapsed", quote: "the  rent\tis due", source: "the rent is due", state: Reformatted},
		{name: "NFKC ligature", quote: "the office is open", source: "the oﬃce is open", state: Reformatted},
		{name: "kept per mille", quote: "rate 5%", source: "rate 5‰ a year", state: NotFound},
		{name: "kept per ten thousand", quote: "rate 5‰", source: "rate 5‱ a year", state: NotFound},
		{name: "kept degree", quote: "20°C inside", source: "20 C inside", state: NotFound},
		{name: "kept primes", quote: "5′ wide", source: "5″ wide", state: NotFound},
		{name: "kept ballot box", quote: "☐ approved", source: "☒ approved", state: NotFound},
		{name: "kept check mark", quote: "✓ approved", source: "✗ approved", state: NotFound},
		{name: "kept superscript", quote: "x2 units", source: "x² units", state: NotFound},
		{name: "kept fraction", quote: "1/2 share", source: "½ share", state: NotFound},
		{name: "kept separator between digits", quote: "at 9.30 sharp", source: "at 9:30 sharp", state: NotFound},
		{name: "kept equals", quote: "a b", source: "a = b", state: NotFound},
	})
}

func TestSeedSymbolLetters(t *testing.T) {
	t.Parallel()
	runLocate(t, []locateCase{
		{name: "squared letters read as letters", quote: "do not", source: "do 🄽🄾🅃 enter", state: Reformatted},
		{name: "parenthesised letters read as letters", quote: "do not", source: "do ⒩⒪⒯ enter", state: Reformatted},
		{name: "negative squared letters left out", quote: "do enter", source: "do 🅽🅾🆃 enter", state: Reformatted},
		{name: "negative squared letters carried", quote: "do 🅽🅾🆃 enter", source: "do enter", state: Reformatted},
		{name: "negative squared letters are not letters", quote: "do not enter", source: "do 🅽🅾🆃 enter", state: NotFound},
		{name: "negative circled letters left out", quote: "do enter", source: "do 🅝🅞🅣 enter", state: Reformatted},
		{name: "negative circled letters carried", quote: "do 🅝🅞🅣 enter", source: "do enter", state: Reformatted},
		{name: "regional indicators left out", quote: "do enter", source: "do 🇳🇴 enter", state: Reformatted},
		{name: "regional indicators carried", quote: "do 🇳🇴 enter", source: "do enter", state: Reformatted},
	})
}

func TestSeedArabicHebrewMarks(t *testing.T) {
	t.Parallel()
	// شدَّة: dal carries shadda and fatha.
	runLocate(t, []locateCase{
		{name: "one of two marks written", quote: "شدّة", source: "هي شدَّة كبيرة", state: Reformatted, parts: []Span{{3, 8}}, occ: 1},
		{name: "the other of two marks written", quote: "شدَة", source: "هي شدَّة كبيرة", state: Reformatted},
		{name: "a written mark the document lacks", quote: "شدِّة", source: "هي شدَّة كبيرة", state: NotFound},
		{name: "Hebrew qamats without the shin dot", quote: "שָלום", source: "אמר שָׁלוֹם לכולם", state: Reformatted},
		{name: "Hebrew with a wrong vowel", quote: "שִלום", source: "אמר שָׁלוֹם לכולם", state: NotFound},
	})
}

func TestSeedNearest(t *testing.T) {
	t.Parallel()
	runLocate(t, []locateCase{
		{name: "no whole word in the longest piece", quote: "xq", source: "the rent is due", state: NotFound, checkN: true},
		{name: "Arabic read without marks", quote: "كتب الرسالة الطويلة جدا", source: "هو كَتَبَ الرسالة", state: NotFound,
			near: &Span{3, 17}, checkN: true},
	})
}

func TestSeedContractions(t *testing.T) {
	t.Parallel()
	runLocate(t, []locateCase{
		{name: "lowercase can not in can't", quote: "can", source: "you can't go", state: NotFound},
		{name: "lowercase can not in can’t", quote: "can", source: "you can’t go", state: NotFound},
		{name: "can't quoted whole", quote: "can't", source: "you can't go", state: Exact},
		{name: "don't make: t make still found", quote: "t make", source: "it won’t make sense", state: Exact},
		{name: "Can not in Can't either", quote: "Can", source: "Can't go", state: NotFound},
	})
}

func TestSeedThousands(t *testing.T) {
	t.Parallel()
	runLocate(t, []locateCase{
		{name: "en space group", quote: "1\u2002200", source: "a sum of 1\u2002200\u2002000 euro", state: Exact},
		{name: "ideographic space group", quote: "1\u3000200", source: "a sum of 1\u3000200\u3000000 euro", state: Exact},
		{name: "thin space group", quote: "1\u2009200", source: "a sum of 1\u2009200\u2009000 euro", state: NotFound},
		{name: "no-break space group", quote: "1\u00a0200", source: "a sum of 1\u00a0200\u00a0000 euro", state: NotFound},
		{name: "narrow no-break space group", quote: "1\u202f200", source: "a sum of 1\u202f200\u202f000 euro", state: NotFound},
	})
}

func TestSeedRuns(t *testing.T) {
	t.Parallel()
	runLocate(t, []locateCase{
		{name: "Thai part of a run", quote: "ค่าเช่า", source: "ค่าเช่ารายปี", state: NotFound},
		{name: "Thai whole run", quote: "ค่าเช่ารายปี", source: "สัญญา ค่าเช่ารายปี ทุกปี", state: Exact},
		{name: "Japanese run after a set-aside star, quoted exactly", quote: "家賃", source: "契約★家賃", state: Exact},
		{name: "Japanese run joined by a set-aside star, reformatted", quote: "「家賃」", source: "契約★家賃", state: NotFound},
		{name: "a run joined by a format character is one run", quote: "租金", source: "每年\u200b租金", state: NotFound},
	})
}

func TestSeedCutShort(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, quote, source string
		at                  []int
	}{
		{"exact past a closing mark", "The cost is (approx.", "The cost is (approx.) 412 euro.", []int{20}},
		{"exact past a tab", "The cost is approx.", "The cost is approx.\t412 euro.", []int{19}},
		{"exact before a capital", "The cost is fixed.", "The cost is fixed. The rest", nil},
		{"exact before a no-break space", "The cost is approx.", "The cost is approx.\u00a0412 euro.", nil},
		{"exact before a non-BMP lowercase letter", "The cost is approx.", "The cost is approx. \U0001D41A euro.", nil},
		{"exact before a non-BMP digit", "The cost is approx.", "The cost is approx. \U0001D7CE euro.", nil},
		{"inside at an abbreviation on the list", "THE COST INCLUDES FEES etc. and tax", "The cost includes fees etc and tax.", nil},
		{"inside at three dots", "The tenant shall pay the rent... The landlord shall insure the building",
			"The tenant shall pay the rent on time. The landlord shall insure the building.", nil},
		{"inside after …", "The tenant shall pay the rent…. The landlord shall insure the building",
			"The tenant shall pay the rent on time. The landlord shall insure the building.", nil},
		{"inside where the document stops too", "The tenant shall pay the rent. … The landlord shall insure the building",
			"The tenant shall pay the rent. Then more. The landlord shall insure the building.", nil},
		{"inside where the document ends its line", "The tenant shall pay the rent. … The landlord shall insure the building",
			"The tenant shall pay the rent\nThe landlord shall insure the building.", nil},
		{"inside with a carried line break", "The tenant shall pay the rent.\nThe landlord shall insure the building",
			"The tenant shall pay the rent on time. The landlord shall insure the building.", []int{29}},
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
