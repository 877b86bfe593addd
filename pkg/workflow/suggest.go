package workflow

import "strings"

// suggest returns the known word closest to got, or "" when none is close
// enough to be a plausible typo. Close means a small edit distance, or got
// being a clear prefix of a known word ("timeout" → "timeout_seconds").
func suggest(got string, known []string) string {
	if got == "" {
		return ""
	}
	g := strings.ToLower(got)
	best, bestD := "", 1<<30
	limit := max(2, len([]rune(g))/3)
	for _, k := range known {
		d := editDistance(g, strings.ToLower(k))
		if d <= limit && d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" {
		return best
	}
	if len(g) >= 4 {
		for _, k := range known {
			lk := strings.ToLower(k)
			if strings.HasPrefix(lk, g) || (len(lk) >= 4 && strings.HasPrefix(g, lk)) {
				return k
			}
		}
	}
	return ""
}

// editDistance is the Levenshtein distance between a and b, in runes. Long
// inputs are capped so a hostile key cannot make it quadratic in practice.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		if a == b {
			return 0
		}
		return 1 << 20
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
