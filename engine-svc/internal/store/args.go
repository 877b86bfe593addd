package store

// commandArgs builds a command's arguments so that putting each into the
// []any the client takes costs no allocation of its own. A string or a
// []byte in an interface is a header boxed on the heap; a pointer is
// stored as it is, and go-redis writes a *string as the string it points
// at (its cluster routing reads one the same way) and an
// encoding.BinaryMarshaler as its bytes. The commit script's arguments
// are a few dozen per commit, so this was most of CommitRun's allocations.
type commandArgs struct {
	v    []any
	strs []string
	raws []rawArg
	i64s []int64
	f64s []float64
	// A commit's arguments live in the struct, but for a large one's.
	vA   [48]any
	strA [24]string
	rawA [4]rawArg
	i64a [2]int64
	f64a [4]float64
	// commitID is a commit's generated id.
	commitID [commitIDLen]byte
}

// rawArg is a []byte argument that boxes as a pointer.
type rawArg []byte

// MarshalBinary is the argument's bytes, as they are.
func (b *rawArg) MarshalBinary() ([]byte, error) { return *b, nil }

// newCommandArgs has room for n arguments: strs strings, raws byte
// slices, i64s integers and f64s floats. Growing past any is correct (a
// pointer taken before keeps the old array alive), only slower.
func newCommandArgs(n, strs, raws, i64s, f64s int) *commandArgs {
	a := &commandArgs{}
	a.v = a.vA[:0]
	if n > len(a.vA) {
		a.v = make([]any, 0, n)
	}
	a.strs, a.raws, a.i64s, a.f64s = a.strA[:0], a.rawA[:0], a.i64a[:0], a.f64a[:0]
	if strs > len(a.strA) {
		a.strs = make([]string, 0, strs)
	}
	if raws > len(a.rawA) {
		a.raws = make([]rawArg, 0, raws)
	}
	if i64s > len(a.i64a) {
		a.i64s = make([]int64, 0, i64s)
	}
	if f64s > len(a.f64a) {
		a.f64s = make([]float64, 0, f64s)
	}
	return a
}

// lit adds a value boxed as usual, for those that box without an
// allocation: constants, and integers below 256.
func (a *commandArgs) lit(v any) { a.v = append(a.v, v) }

func (a *commandArgs) str(s string) {
	a.strs = append(a.strs, s)
	a.v = append(a.v, &a.strs[len(a.strs)-1])
}

func (a *commandArgs) raw(b []byte) {
	a.raws = append(a.raws, b)
	a.v = append(a.v, &a.raws[len(a.raws)-1])
}

func (a *commandArgs) int64(n int64) {
	a.i64s = append(a.i64s, n)
	a.v = append(a.v, &a.i64s[len(a.i64s)-1])
}

// float64 is written as strconv.FormatFloat(f, 'f', -1, 64).
func (a *commandArgs) float64(f float64) {
	a.f64s = append(a.f64s, f)
	a.v = append(a.v, &a.f64s[len(a.f64s)-1])
}
