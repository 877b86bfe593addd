package quote

import (
	"regexp"
	"sort"
)

// piece is a stretch of the quote between two breaks.
type piece struct {
	c    *canon
	stop bool // the piece ends with a stop that claims a sentence ends
	occ  []occurrence
}

// splitQuote breaks the quote at "…" or "...", a sentence end, ';', a ':' not
// between two digits, a double quotation mark or a line break.
func (l *locator) splitQuote() []*piece {
	r := l.q.r
	n := len(r)
	stops := map[int]bool{}
	for _, i := range quoteStops(r) {
		stops[i] = true
	}
	var out []*piece
	start := 0
	flush := func(end int, stop bool) {
		c := canonicalize(l.q, start, end)
		if c.hasWord() {
			out = append(out, &piece{c: c, stop: stop})
		}
	}
	for i := 0; i < n; i++ {
		l.steps++
		ch := r[i]
		brk, skip, stop := false, 1, false
		switch {
		case ch == '…' || isDoubleQuote(ch) || isLineBreak(ch) || ch == ';':
			brk = true
		case ch == ':':
			brk = !(i > 0 && i+1 < n && isNumberDigit(r[i-1]) && isNumberDigit(r[i+1]))
		case ch == '.' && i+2 < n && r[i+1] == '.' && r[i+2] == '.':
			brk = true
			for i+skip < n && r[i+skip] == '.' {
				skip++
			}
		case ch == '.' && l.scanned(i+1-start) <= maxLabel && isClauseNumber(trimRunes(r[start:i+1])):
			// a clause number the quote carries ("2. Send") is not a sentence end
		case (ch == '.' || ch == '!' || ch == '?') && isSentenceEnd(r, i):
			j := i + 1
			for j < n && isClosingMark(r[j]) {
				j++
			}
			if j == n || isWhitespace(r[j]) {
				brk, stop = true, stops[i]
			}
		}
		if !brk {
			continue
		}
		flush(i, stop)
		i += skip - 1
		start = i + 1
	}
	flush(n, false)
	return out
}

// scanned counts n runes about to be scanned as steps, and returns n.
func (l *locator) scanned(n int) int {
	if n <= maxLabel {
		l.steps += n
	}
	return n
}

// stitch tries the quote as pieces of the document, in order and then in
// another order.
func (l *locator) stitch() (Result, bool) {
	pieces := l.splitQuote()
	if len(pieces) < 2 {
		return Result{}, false
	}
	for _, p := range pieces {
		occ, ok := l.find(p.c, true)
		if !ok || len(occ) == 0 {
			return Result{}, false
		}
		p.occ = occ
	}
	starts := map[int]bool{} // startsHere by canonical start, shared by both passes
	for _, ordered := range []bool{true, false} {
		s := &stitcher{l: l, pieces: pieces, ordered: ordered, memo: map[stKey]stVal{},
			starts: starts, next: make([][]int32, len(pieces)), prev: make([][]int32, len(pieces))}
		for oi := range pieces[0].occ {
			o := pieces[0].occ[oi]
			if cur := clip(o.k1-o.k0, l.minPart); s.solve(0, oi, cur) {
				return s.result(oi, cur), true
			}
		}
	}
	return Result{}, false
}

// stKey is a stitch state: piece j placed at its occurrence oi, the part it
// ends being cur canonical characters long (clipped at minPart).
type stKey struct{ j, oi, cur int }

// stVal is a solved state and, when it holds, the next piece's placement.
type stVal struct {
	ok      bool
	next    int
	nextCur int
}

// stitcher places the pieces by dynamic programming over stKey. A piece
// placed after a skip opens a fresh part, whose outcome does not depend on
// where the previous piece lies; so for each piece the occurrences that can
// open a fresh part are found once, and a state looks up the first of them
// after (or, out of order, before) its own occurrence. Every state then costs
// O(log n), and the whole search O(pieces × occurrences × minPart × log n) —
// bounded, since occurrences cost substring searches (MaxSearches).
type stitcher struct {
	l       *locator
	pieces  []*piece
	ordered bool
	memo    map[stKey]stVal
	starts  map[int]bool
	// next[j][x]: the first occurrence >= x of piece j that opens a fresh
	// part which solves, or -1; prev[j][x]: the last one <= x. Built lazily.
	next, prev [][]int32
}

func clip(n, max int) int {
	if n > max {
		return max
	}
	return n
}

// solve reports whether pieces j.. can be placed with piece j at occurrence
// oi and the current part cur canonical characters long (clipped).
func (s *stitcher) solve(j, oi, cur int) bool {
	key := stKey{j, oi, cur}
	if v, ok := s.memo[key]; ok {
		return v.ok
	}
	v := s.try(j, oi, cur)
	s.memo[key] = v
	return v.ok
}

func (s *stitcher) try(j, oi, cur int) stVal {
	s.l.steps++
	min := s.l.minPart
	if j == len(s.pieces)-1 {
		return stVal{ok: cur >= min}
	}
	a := s.pieces[j].occ[oi]
	occ := s.pieces[j+1].occ // in document order: k0 and k1 both increase
	after := sort.Search(len(occ), func(x int) bool { return occ[x].k0 >= a.k1 })
	// A piece right next to this one continues the part.
	for x := after; x < len(occ) && occ[x].k0 <= a.k1+1; x++ {
		s.l.steps++
		if b := occ[x]; s.adjacent(a, b) {
			nc := clip(cur+b.k1-a.k1, min)
			if s.solve(j+1, x, nc) {
				return stVal{ok: true, next: x, nextCur: nc}
			}
		}
	}
	if cur < min {
		return stVal{}
	}
	// Otherwise a skip: the next piece opens a fresh part.
	s.fresh(j + 1)
	fresh := func(x int) stVal {
		b := occ[x]
		return stVal{ok: true, next: x, nextCur: clip(b.k1-b.k0, min)}
	}
	if after < len(occ) {
		if x := s.next[j+1][after]; x >= 0 {
			return fresh(int(x))
		}
	}
	if !s.ordered {
		before := sort.Search(len(occ), func(x int) bool { return occ[x].k1 > a.k0 }) - 1
		if before >= 0 {
			if x := s.prev[j+1][before]; x >= 0 {
				return fresh(int(x))
			}
		}
	}
	return stVal{}
}

// fresh works out which occurrences of piece j can open a fresh part after a
// skip and have the rest of the quote solve from there.
func (s *stitcher) fresh(j int) {
	if s.next[j] != nil {
		return
	}
	occ := s.pieces[j].occ
	good := make([]bool, len(occ))
	for x, b := range occ {
		s.l.steps++
		st, seen := s.starts[b.k0]
		if !seen {
			st = s.l.startsHere(b)
			s.starts[b.k0] = st
		}
		good[x] = st && s.solve(j, x, clip(b.k1-b.k0, s.l.minPart))
	}
	next, prev := make([]int32, len(occ)), make([]int32, len(occ))
	last := int32(-1)
	for x := range occ {
		if good[x] {
			last = int32(x)
		}
		prev[x] = last
	}
	last = -1
	for x := len(occ) - 1; x >= 0; x-- {
		if good[x] {
			last = int32(x)
		}
		next[x] = last
	}
	s.next[j], s.prev[j] = next, prev
}

func (s *stitcher) adjacent(a, b occurrence) bool {
	c := s.l.sc.c
	return b.k0 == a.k1 || b.k0 == a.k1+1 && c[a.k1] == ' '
}

// result gathers the placements, from piece 0 at oi, into parts, joining
// neighbours.
func (s *stitcher) result(oi, cur int) Result {
	res := Result{State: Stitched, Parts: []Span{}}
	if !s.ordered {
		res.State = StitchedOutOfOrder
	}
	var part occurrence
	for j, p := range s.pieces {
		o := p.occ[oi]
		switch {
		case j == 0:
			part = o
		case s.adjacent(part, o):
			part.k1 = o.k1
		default:
			res.Parts = append(res.Parts, s.l.span(part.k0, part.k1))
			part = o
		}
		if p.stop {
			s.l.markIfGoesOn(int(s.l.sc.ce[o.k1-1]), &res)
		}
		v := s.memo[stKey{j, oi, cur}]
		oi, cur = v.next, v.nextCur
	}
	res.Parts = append(res.Parts, s.l.span(part.k0, part.k1))
	return res
}

// startsHere reports whether the document lets a piece start at b after a
// skip: a sentence, a clause (after ';' or ':') or a line that counts.
func (l *locator) startsHere(b occurrence) bool {
	r := l.src.r
	s := int(l.sc.cs[b.k0])
	first := r[s]
	capital := isCapital(first) || isOpeningMark(first)
	t := s
	for t > 0 && isOpeningMark(r[t-1]) {
		t--
		capital = true // starts right after an opening mark
	}
	// A label (list mark or clause number) is skipped only at a line start
	// that counts, a clause number only before a capital or an opening mark.
	if ls, kind := labelBefore(r, t); kind != labelNone {
		if kind == labelClause && !capital {
			return false
		}
		return l.lineStartCounts(ls, capital || kind == labelList)
	}
	for t > 0 && isPlainSpaceOrTab(r[t-1]) {
		t--
		l.steps++
	}
	if t == 0 {
		return true
	}
	prev := r[t-1]
	switch {
	case isLineBreak(prev):
		// A line quoted with its own clause number before a capital ("2. Send…").
		return l.lineStartCounts(t, capital || clauseThenCapital(r[s:]))
	case prev == ';':
		return true
	case prev == ':':
		return !(t >= 2 && isNumberDigit(r[t-2]) && isNumberDigit(first))
	}
	u := t
	for u > 0 && isClosingMark(r[u-1]) {
		u--
		l.steps++
	}
	if u > 0 && (r[u-1] == '.' || r[u-1] == '!' || r[u-1] == '?') && isSentenceEnd(r, u-1) {
		return capital && !clauseMidLine(r, u-1)
	}
	return false
}

// clauseMidLine reports whether the '.' at i ends a clause number standing
// after a sentence end on the same line ("on time. 12. The"): a clause number
// is skipped only at a line start, so its '.' is not a sentence end there.
func clauseMidLine(r []rune, i int) bool {
	a := i
	for a > 0 && !isWhitespace(r[a-1]) && i-a <= maxLabel {
		a--
	}
	if a > 0 && !isWhitespace(r[a-1]) || !isClauseNumber(r[a:i+1]) {
		return false
	}
	for a > 0 && isPlainSpaceOrTab(r[a-1]) {
		a--
	}
	for a > 0 && isClosingMark(r[a-1]) {
		a--
	}
	return a > 0 && (r[a-1] == '.' || r[a-1] == '!' || r[a-1] == '?') && isSentenceEnd(r, a-1)
}

// lineStartCounts: t is the first position of a line (after any indent). A
// line counts after a blank line, or a line that ends a sentence (then the
// piece needs a capital or an opening mark, or a list mark), a clause or a
// table row.
func (l *locator) lineStartCounts(t int, capital bool) bool {
	r := l.src.r
	for t > 0 && isPlainSpaceOrTab(r[t-1]) {
		t--
		l.steps++
	}
	if t == 0 {
		return true
	}
	if !isLineBreak(r[t-1]) {
		return false
	}
	u := t - 1
	if r[u] == '\n' && u > 0 && r[u-1] == '\r' {
		u--
	}
	for u > 0 && isPlainSpaceOrTab(r[u-1]) {
		u--
		l.steps++
	}
	if u == 0 || isLineBreak(r[u-1]) {
		return true // a blank line, or the text's start
	}
	prev := r[u-1]
	switch prev {
	case ';', ':', '|':
		return true
	}
	v := u
	for v > 0 && isClosingMark(r[v-1]) {
		v--
		l.steps++
	}
	if v > 0 && (r[v-1] == '.' || r[v-1] == '!' || r[v-1] == '?') && isSentenceEnd(r, v-1) {
		return capital
	}
	return false
}

// maxLabel bounds how far a label (list mark, clause number) is looked for,
// so that no scan for one crosses a long line or word again and again.
const maxLabel = 32

type labelKind int

const (
	labelNone labelKind = iota
	labelList
	labelClause
)

// labelBefore reads a list mark or clause number that ends (with its spaces)
// at t, at the start of a line; it returns where the label starts.
func labelBefore(r []rune, t int) (int, labelKind) {
	e := t
	for e > 0 && isPlainSpaceOrTab(r[e-1]) {
		e--
	}
	if e == t {
		return 0, labelNone
	}
	// Find the line's start, within maxLabel runes.
	ls := e
	for ls > 0 && !isLineBreak(r[ls-1]) && e-ls <= maxLabel {
		ls--
	}
	if ls > 0 && !isLineBreak(r[ls-1]) {
		return 0, labelNone
	}
	for ls < e && isPlainSpaceOrTab(r[ls]) {
		ls++
	}
	lab := r[ls:e]
	if len(lab) == 0 {
		return 0, labelNone
	}
	if len(lab) == 1 && isListMark(lab[0]) {
		return ls, labelList
	}
	allHash := true
	for _, ch := range lab {
		allHash = allHash && ch == '#'
	}
	if allHash {
		return ls, labelList
	}
	if isClauseNumber(lab) {
		return ls, labelClause
	}
	return 0, labelNone
}

// isClauseNumber: 6.2, 12., 6.2., (a), (iv), (12), IV. — never bare digits,
// and not b., a), A) or A.
func isClauseNumber(lab []rune) bool {
	n := len(lab)
	if n >= 3 && lab[0] == '(' && lab[n-1] == ')' {
		for _, ch := range lab[1 : n-1] {
			if !isLetter(ch) && !isDecimalDigit(ch) {
				return false
			}
		}
		return true
	}
	digits, dots := 0, 0
	for i, ch := range lab {
		switch {
		case isDecimalDigit(ch):
			digits++
		case ch == '.' && i > 0 && isDecimalDigit(lab[i-1]):
			dots++
		default:
			return romanLabel(lab)
		}
	}
	return digits > 0 && dots > 0
}

// romaNumeral is a well-formed upper-case Roman numeral (1–3999).
var romanNumeral = regexp.MustCompile(`^M{0,3}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})$`)

// romanLabel: a well-formed upper-case Roman numeral of two or more letters
// followed by '.' (IV., XII.). The seed names IV. as a label; it is silent on
// other numerals, so this is a heuristic. A single capital with '.' (I., V.,
// X.) is an initial, as A. is, and is not a label.
func romanLabel(lab []rune) bool {
	n := len(lab)
	if n < 3 || lab[n-1] != '.' {
		return false
	}
	return romanNumeral.MatchString(string(lab[:n-1]))
}

func trimRunes(r []rune) []rune {
	for len(r) > 0 && isWhitespace(r[0]) {
		r = r[1:]
	}
	for len(r) > 0 && isWhitespace(r[len(r)-1]) {
		r = r[:len(r)-1]
	}
	return r
}

// clauseThenCapital: the piece opens with its own clause number before a
// capital letter or an opening mark ("2. Send…").
func clauseThenCapital(r []rune) bool {
	i := 0
	for i < len(r) && !isWhitespace(r[i]) && i <= maxLabel {
		i++
	}
	if i == 0 || i == len(r) || !isWhitespace(r[i]) || !isClauseNumber(r[:i]) {
		return false
	}
	for i < len(r) && isPlainSpaceOrTab(r[i]) {
		i++
	}
	return i < len(r) && (isCapital(r[i]) || isOpeningMark(r[i]))
}
