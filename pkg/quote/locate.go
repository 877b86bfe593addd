package quote

import (
	"strings"
	"unicode/utf8"
)

// State says how a quote was found.
type State string

// The states LocateQuote returns. Unquoted is the handler's own.
const (
	Exact               State = "exact"
	Reformatted         State = "reformatted"
	Stitched            State = "stitched"
	StitchedOutOfOrder  State = "stitched_out_of_order"
	NotFound            State = "not_found"
	Unquoted            State = "unquoted"
	DefaultMinPartChars       = 20
	// MinMinPartChars is the least min_part_chars may be.
	MinMinPartChars = 4
	// MaxSearches caps the substring searches one quote may take.
	MaxSearches = 1000
)

// Span is a stretch of the source, in UTF-16 code units, as JavaScript's
// text.slice(start, end) reads it.
type Span struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// Options tune LocateQuote.
type Options struct {
	// MinPartChars is the shortest part a stitched quote may rest on, in
	// canonical characters. 0 means DefaultMinPartChars; less than
	// MinMinPartChars reads as MinMinPartChars.
	MinPartChars int
}

// Result is how a quote was found. All offsets are UTF-16 code units.
type Result struct {
	State       State  `json:"state"`
	Parts       []Span `json:"parts"`
	Occurrences int    `json:"occurrences"`
	Nearest     *Span  `json:"nearest,omitempty"`
	CutShort    bool   `json:"cut_short,omitempty"`
	CutShortAt  []int  `json:"cut_short_at,omitempty"`
}

// Map renders the result as JSON values, as the handler records it.
func (r Result) Map() map[string]any {
	parts := make([]any, 0, len(r.Parts))
	for _, p := range r.Parts {
		parts = append(parts, map[string]any{"start": float64(p.Start), "end": float64(p.End)})
	}
	m := map[string]any{"state": string(r.State), "parts": parts, "occurrences": float64(r.Occurrences)}
	if r.Nearest != nil {
		m["nearest"] = map[string]any{"start": float64(r.Nearest.Start), "end": float64(r.Nearest.End)}
	}
	if r.CutShort {
		at := make([]any, 0, len(r.CutShortAt))
		for _, a := range r.CutShortAt {
			at = append(at, float64(a))
		}
		m["cut_short"] = true
		m["cut_short_at"] = at
	}
	return m
}

// locator holds one LocateQuote call's state.
type locator struct {
	src     *text
	q       *text
	exactE  []bool
	canonE  []bool
	sc      *canon
	minPart int
	// searches counts substring searches (capped at MaxSearches); steps
	// counts the other work that is not linear in the text: stitch states
	// tried and runes scanned back from a candidate start. Tests read both.
	searches, steps int
}

func (l *locator) spend() bool {
	l.searches++
	return l.searches <= MaxSearches
}

// LocateQuote finds quote in source and says how (seed 003, locateQuote).
func LocateQuote(quote, source string, opts Options) Result {
	res, _ := locate(quote, source, opts)
	return res
}

// locate is LocateQuote, also returning the locator for its work counters.
func locate(quote, source string, opts Options) (Result, *locator) {
	l := &locator{minPart: opts.MinPartChars}
	return l.run(quote, source), l
}

func (l *locator) run(quote, source string) Result {
	notFound := Result{State: NotFound, Parts: []Span{}}
	if source == "" {
		return notFound
	}
	l.src, l.q = newText(source), newText(quote)
	if l.minPart == 0 {
		l.minPart = DefaultMinPartChars
	}
	if l.minPart < MinMinPartChars {
		l.minPart = MinMinPartChars
	}
	qc := canonicalize(l.q, 0, len(l.q.r))
	if !qc.hasWord() {
		return notFound
	}
	l.exactE = l.src.edges(false)
	if res, ok := l.exact(); ok {
		return res
	}
	if l.searches > MaxSearches {
		return notFound
	}
	l.canonE = l.src.edges(true)
	l.sc = canonicalize(l.src, 0, len(l.src.r))
	occ, ok := l.find(qc, true)
	if !ok {
		return notFound
	}
	if len(occ) > 0 {
		res := Result{State: Reformatted, Parts: []Span{l.span(occ[0].k0, occ[0].k1)}, Occurrences: len(occ)}
		l.cutShortInside(qc, occ[0].k0, &res)
		return res
	}
	if res, ok := l.stitch(); ok {
		return res
	}
	if l.searches > MaxSearches {
		return notFound
	}
	notFound.Nearest = l.nearest(qc)
	return notFound
}

// exact looks for the quote character for character, at word and number edges.
func (l *locator) exact() (Result, bool) {
	s, q := l.src.s, l.q.s
	if q == "" {
		return Result{}, false
	}
	var first = -1
	count := 0
	for pos := 0; pos < len(s); {
		if !l.spend() {
			return Result{}, false
		}
		i := strings.Index(s[pos:], q)
		if i < 0 {
			break
		}
		b := pos + i
		a, e := int(l.src.runeAt[b]), int(l.src.runeAt[b+len(q)])
		if l.exactE[a] && l.exactE[e] {
			if first < 0 {
				first = a
			}
			count++
		}
		_, size := utf8.DecodeRuneInString(s[b:])
		pos = b + size
	}
	if count == 0 {
		return Result{}, false
	}
	end := first + len(l.q.r)
	res := Result{State: Exact, Parts: []Span{{l.src.u16[first], l.src.u16[end]}}, Occurrences: count}
	// Marked when the quote's last character is its stop and the document's
	// sentence goes on with a lowercase letter or a digit.
	if last := l.q.r[len(l.q.r)-1]; last == '.' || last == '!' || last == '?' {
		j := end
		for j < len(l.src.r) && (isClosingMark(l.src.r[j]) || isPlainSpaceOrTab(l.src.r[j])) {
			j++
		}
		if j < len(l.src.r) && (isLowercase(l.src.r[j]) || isBMPDigit(l.src.r[j])) {
			res.CutShort, res.CutShortAt = true, []int{l.src.u16[end]}
		}
	}
	return res, true
}

// occurrence is a match in the source's canonical form, [k0, k1).
type occurrence struct{ k0, k1 int }

// find returns every valid occurrence of the canonical quote piece qc in the
// source; ok is false when the search budget ran out.
func (l *locator) find(qc *canon, all bool) ([]occurrence, bool) {
	var out []occurrence
	s, q := l.sc.str, qc.str
	if q == "" {
		return nil, true
	}
	for pos := 0; pos < len(s); {
		if !l.spend() {
			return nil, false
		}
		i := strings.Index(s[pos:], q)
		if i < 0 {
			break
		}
		b := pos + i
		k0 := int(l.sc.kAt[b])
		k1 := int(l.sc.kAt[b+len(q)])
		if l.valid(qc, k0, k1) {
			out = append(out, occurrence{k0, k1})
			if !all {
				break
			}
		}
		_, size := utf8.DecodeRuneInString(s[b:])
		pos = b + size
	}
	return out, true
}

// valid checks a canonical match's edges and the Arabic and Hebrew marks the
// quote writes.
func (l *locator) valid(qc *canon, k0, k1 int) bool {
	sc := l.sc
	if !sc.edgeAt(k0) || !sc.edgeAt(k1) {
		return false
	}
	if !l.canonE[sc.cs[k0]] || !l.canonE[sc.ce[k1-1]] {
		return false
	}
	for k, m := range qc.marks {
		if !marksWithin(m, sc.marks[int32(k0)+k]) {
			return false
		}
	}
	return true
}

// marksWithin reports whether every Arabic or Hebrew mark the quote writes on
// a letter is on the document's letter: one the quote leaves out is optional,
// one it writes must match.
func marksWithin(q, s string) bool {
	if q == s {
		return true
	}
	left := []rune(s)
	for _, m := range q {
		found := false
		for i, d := range left {
			if d == m {
				left[i], found = -1, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (l *locator) span(k0, k1 int) Span {
	return Span{l.src.u16[l.sc.cs[k0]], l.src.u16[l.sc.ce[k1-1]]}
}

// cutShortInside marks, for a quote matched whole at canonical k0, each stop
// inside the quote where the document's sentence goes on.
func (l *locator) cutShortInside(qc *canon, k0 int, res *Result) {
	for _, qi := range quoteStops(l.q.r) {
		count := 0
		for count < len(qc.c) && int(qc.ce[count]) <= qi {
			count++
		}
		for count > 0 && qc.c[count-1] == ' ' {
			count--
		}
		if count == 0 {
			continue
		}
		l.markIfGoesOn(int(l.sc.ce[k0+count-1]), res)
	}
}

// quoteStops lists the '.', '!' and '?' of a quote that claim a sentence ends
// there: not the dots of "...", nor a '.' right after '…'; followed by
// whitespace or the quote's end; not ending a listed abbreviation or initial.
func quoteStops(r []rune) []int {
	var out []int
	for i, ch := range r {
		if ch != '.' && ch != '!' && ch != '?' {
			continue
		}
		if ch == '.' {
			if i+1 < len(r) && r[i+1] == '.' || i > 0 && (r[i-1] == '.' || r[i-1] == '…') {
				continue
			}
			if endsAbbreviation(r, i) {
				continue
			}
		}
		j := i + 1
		for j < len(r) && isClosingMark(r[j]) {
			j++
		}
		if j == len(r) || isWhitespace(r[j]) {
			out = append(out, i)
		}
	}
	return out
}

// markIfGoesOn marks the document position e (a rune index) when the
// document has no stop there and does not end its line or its text.
func (l *locator) markIfGoesOn(e int, res *Result) {
	r := l.src.r
	j := e
	for j < len(r) && isClosingMark(r[j]) {
		j++
	}
	if j < len(r) && (r[j] == '.' || r[j] == '!' || r[j] == '?' || r[j] == '…') {
		return
	}
	for j < len(r) && isPlainSpaceOrTab(r[j]) {
		j++
	}
	if j == len(r) || isLineBreak(r[j]) {
		return
	}
	at := l.src.u16[e]
	for _, a := range res.CutShortAt {
		if a == at {
			return
		}
	}
	res.CutShort = true
	res.CutShortAt = append(res.CutShortAt, at)
}

// nearest finds where the longest piece of the canonical quote that is in the
// source lies; nil when that piece holds no whole word.
func (l *locator) nearest(qc *canon) *Span {
	sc := l.sc
	best, bestK := 0, -1
	q := qc.c
	for i := 0; i < len(q); i++ {
		if q[i] == ' ' {
			continue
		}
		L := best + 1
		for i+L <= len(q) {
			if !l.spend() {
				break
			}
			idx := strings.Index(sc.str, string(q[i:i+L]))
			if idx < 0 {
				break
			}
			k := int(sc.kAt[idx])
			for k+L < len(sc.c) && i+L < len(q) && sc.c[k+L] == q[i+L] {
				L++
			}
			best, bestK = L, k
			L++
		}
		if l.searches > MaxSearches {
			break
		}
	}
	if bestK < 0 {
		return nil
	}
	a, b := bestK, bestK+best
	for a < b && sc.c[a] == ' ' {
		a++
	}
	for b > a && sc.c[b-1] == ' ' {
		b--
	}
	// It must hold a whole word of the source.
	for i := a; i < b; {
		if !isWordC(sc.c[i]) {
			i++
			continue
		}
		j := i
		for j < b && isWordC(sc.c[j]) {
			j++
		}
		if (i == 0 || !isWordC(sc.c[i-1])) && (j == len(sc.c) || !isWordC(sc.c[j])) {
			s := l.span(a, b)
			return &s
		}
		i = j
	}
	return nil
}
