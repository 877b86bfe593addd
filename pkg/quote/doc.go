// Package quote is Realm's built-in quote check (seed 003, check_quotes and
// locateQuote): for each value a model extracted, it says whether the quote
// behind it is in the source document, and how it was found.
//
// Offsets. Every offset LocateQuote returns (parts, nearest, cut_short_at)
// counts UTF-16 code units, as the reference's JavaScript strings do, so a
// result matches text.slice(start, end) of the original document; a rune
// outside the Basic Multilingual Plane counts 2. Offsets never split a
// surrogate pair. cut_short_at is the offset just after the quote's stop,
// where the document's sentence goes on.
//
// Unicode. The project targets Unicode 15.0 — Go 1.26's unicode tables and
// golang.org/x/text's 15.0 normalisation tables — with the seed's
// Basic-Multilingual-Plane sets (capital letter, lowercase letter, initial,
// currency sign) patched to Unicode 17.0. docs/unicode.md lists the
// characters where this differs from the seed's Node 24 (Unicode 17.0).
//
// Cost. Each quote costs time linear in the document and the quote, and at
// most MaxSearches (1,000) substring searches; past that it reads not_found.
// Nothing rescans a line or a word per candidate: label, abbreviation and
// clause-number scans are bounded, and the stitcher tries each piece's places
// once, not every pair of places (cost_test.go counts the work).
package quote
