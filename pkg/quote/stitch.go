package quote

// piece is a stretch of the quote between two breaks.
type piece struct {
	c      *canon
	stop   bool // the piece ends with a stop that claims a sentence ends
	occ    []occurrence
	qFirst rune
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
		case ch == '.' && isClauseNumber(trimRunes(r[start:i+1])):
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
	for _, ordered := range []bool{true, false} {
		s := &stitcher{l: l, pieces: pieces, ordered: ordered, memo: map[stKey]bool{}}
		for oi := range pieces[0].occ {
			o := pieces[0].occ[oi]
			if s.solve(0, oi, clip(o.k1-o.k0, l.minPart)) {
				return s.result(ordered), true
			}
		}
	}
	return Result{}, false
}

type stKey struct{ j, oi, cur int }

type stitcher struct {
	l       *locator
	pieces  []*piece
	ordered bool
	memo    map[stKey]bool
	choice  []int // occurrence chosen for each piece, filled on success
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
	if v, ok := s.memo[key]; ok && !v {
		return false
	}
	ok := s.try(j, oi, cur)
	s.memo[key] = ok
	if ok {
		if s.choice == nil {
			s.choice = make([]int, len(s.pieces))
		}
		s.choice[j] = oi
	}
	return ok
}

func (s *stitcher) try(j, oi, cur int) bool {
	min := s.l.minPart
	if j == len(s.pieces)-1 {
		return cur >= min
	}
	a := s.pieces[j].occ[oi]
	for bi, b := range s.pieces[j+1].occ {
		if s.adjacent(a, b) {
			if s.solve(j+1, bi, clip(cur+b.k1-a.k1, min)) {
				return true
			}
			continue
		}
		if cur < min {
			continue
		}
		if s.ordered && b.k0 < a.k1 || !s.ordered && b.k0 < a.k1 && b.k1 > a.k0 {
			continue
		}
		if !s.l.startsHere(b) {
			continue
		}
		if s.solve(j+1, bi, clip(b.k1-b.k0, min)) {
			return true
		}
	}
	return false
}

func (s *stitcher) adjacent(a, b occurrence) bool {
	c := s.l.sc.c
	return b.k0 == a.k1 || b.k0 == a.k1+1 && c[a.k1] == ' '
}

// result gathers the chosen occurrences into parts, joining neighbours.
func (s *stitcher) result(ordered bool) Result {
	res := Result{State: Stitched, Parts: []Span{}}
	if !ordered {
		res.State = StitchedOutOfOrder
	}
	var cur occurrence
	for j, p := range s.pieces {
		o := p.occ[s.choice[j]]
		switch {
		case j == 0:
			cur = o
		case s.adjacent(cur, o):
			cur.k1 = o.k1
		default:
			res.Parts = append(res.Parts, s.l.span(cur.k0, cur.k1))
			cur = o
		}
		if p.stop {
			s.l.markIfGoesOn(int(s.l.sc.ce[o.k1-1]), &res)
		}
	}
	res.Parts = append(res.Parts, s.l.span(cur.k0, cur.k1))
	return res
}

// startsHere reports whether the document lets a piece start at b after a
// skip: a sentence, a clause (after ';' or ':') or a line that counts.
func (l *locator) startsHere(b occurrence) bool {
	r := l.src.r
	s := int(l.sc.cs[b.k0])
	first := r[s]
	capital := isCapital(first) || isOpeningMark(first) || clauseThenCapital(r[s:])
	t := s
	for t > 0 && isOpeningMark(r[t-1]) {
		t--
		capital = true // starts right after an opening mark
	}
	for t > 0 && isPlainSpaceOrTab(r[t-1]) {
		t--
	}
	if t == 0 {
		return true
	}
	// A label (list mark or clause number) is skipped only at a line start that counts.
	if ls, kind := labelBefore(r, t); kind != labelNone {
		if kind == labelClause && !capital {
			return false
		}
		return l.lineStartCounts(ls, capital || kind == labelList)
	}
	prev := r[t-1]
	switch {
	case isLineBreak(prev):
		return l.lineStartCounts(t, capital)
	case prev == ';':
		return true
	case prev == ':':
		return !(t >= 2 && isNumberDigit(r[t-2]) && isNumberDigit(first))
	}
	u := t
	for u > 0 && isClosingMark(r[u-1]) {
		u--
	}
	if u > 0 && (r[u-1] == '.' || r[u-1] == '!' || r[u-1] == '?') && isSentenceEnd(r, u-1) {
		return capital
	}
	return false
}

// lineStartCounts: t is the first position of a line (after any indent). A
// line counts after a blank line, or a line that ends a sentence (then the
// piece needs a capital or an opening mark, or a list mark), a clause or a
// table row.
func (l *locator) lineStartCounts(t int, capital bool) bool {
	r := l.src.r
	for t > 0 && isPlainSpaceOrTab(r[t-1]) {
		t--
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
	}
	if v > 0 && (r[v-1] == '.' || r[v-1] == '!' || r[v-1] == '?') && isSentenceEnd(r, v-1) {
		return capital
	}
	return false
}

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
	// Find the line's start.
	ls := e
	for ls > 0 && !isLineBreak(r[ls-1]) {
		ls--
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

// romanLabel: an upper-case Roman numeral of two or more letters, or I, V, X,
// followed by '.' (IV.). A single other capital with '.' is an initial.
func romanLabel(lab []rune) bool {
	n := len(lab)
	if n < 2 || lab[n-1] != '.' {
		return false
	}
	for _, ch := range lab[:n-1] {
		switch ch {
		case 'I', 'V', 'X', 'L', 'C', 'D', 'M':
		default:
			return false
		}
	}
	return n > 2 || lab[0] == 'I' || lab[0] == 'V' || lab[0] == 'X'
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
	for i < len(r) && !isWhitespace(r[i]) {
		i++
	}
	if i == 0 || i == len(r) || !isClauseNumber(r[:i]) {
		return false
	}
	for i < len(r) && isPlainSpaceOrTab(r[i]) {
		i++
	}
	return i < len(r) && (isCapital(r[i]) || isOpeningMark(r[i]))
}
