package quote

import (
	"fmt"
	"strings"
	"testing"
)

// filler builds about size bytes of sentences that do not hold the quotes.
func filler(size int) string {
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "Paragraph %d sets out how record %d of the register is kept by the office. ", i, i*7)
	}
	return b.String()
}

var (
	benchA = "The Tenant shall keep the interior of the Premises in good and substantial repair and condition throughout the Term, " +
		"including all fixtures and fittings, and shall make good any damage caused by the Tenant or its visitors"
	benchB = "The Landlord shall insure the Building against loss or damage by fire, storm, flood and such other risks as the Landlord " +
		"reasonably decides, and shall use all insurance money received to rebuild or reinstate the Building"
)

// words cuts s at the last word edge before n bytes.
func words(s string, n int) string { return s[:strings.LastIndex(s[:n], " ")] }

func benchDoc(size int) string {
	f := filler(size)
	h := len(f)/2 + strings.Index(f[len(f)/2:], ". ") + 2
	return f[:h] + benchA + ". " + f[h:] + benchB + ". Nothing else applies."
}

func BenchmarkLocateQuote(b *testing.B) {
	quotes := []struct {
		state State
		quote string
	}{
		{Exact, benchA + "."},
		{Reformatted, strings.ToUpper(benchA[:150]) + strings.ReplaceAll(benchA[150:], ",", "")},
		{Stitched, words(benchA, 150) + " … " + words(benchB, 150)},
		{StitchedOutOfOrder, words(benchB, 150) + " … " + words(benchA, 150)},
		{NotFound, strings.ReplaceAll(benchA+" "+benchB[:100], "shall", "must")},
	}
	for _, size := range []int{10_000, 100_000, 1_000_000} {
		doc := benchDoc(size)
		for _, q := range quotes {
			if got := LocateQuote(q.quote, doc, Options{}); got.State != q.state {
				b.Fatalf("%d bytes: %s quote reads %s", size, q.state, got.State)
			}
			b.Run(fmt.Sprintf("%s/%dKB", q.state, size/1000), func(b *testing.B) {
				b.SetBytes(int64(len(doc)))
				for b.Loop() {
					LocateQuote(q.quote, doc, Options{})
				}
			})
		}
	}
	b.Run("repeated_word/1000KB", func(b *testing.B) {
		doc := strings.Repeat("word ", 200_000)
		for b.Loop() {
			LocateQuote(strings.Repeat("word ", 60), doc, Options{})
		}
	})
}
