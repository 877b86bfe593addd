package health

import (
	"fmt"
	"strings"
	"time"

	"github.com/realm-go/realm/pkg/workflow"
)

// Age writes a duration as the CLI writes ages: `0m`, `17m`, `1h 29m`,
// `2d 0h` (cli spec §3.1). Negative durations read as `0m`.
func Age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd %dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

// trustValues are the values `trust` accepts, in the order the finding
// lists them.
var trustValues = []string{workflow.TrustAuto, workflow.TrustHumanConfirmed, workflow.TrustHumanReviewed}

// suggestTrust names the accepted value a mistyped one most likely meant:
// the one within two edits (case aside), else the only one containing it.
// "" when there is no single good guess.
func suggestTrust(v string) string {
	low := strings.ToLower(strings.TrimSpace(v))
	if low == "" {
		return ""
	}
	best, bestD, tie := "", 3, false
	for _, k := range trustValues {
		switch d := editDistance(low, k); {
		case d < bestD:
			best, bestD, tie = k, d, false
		case d == bestD:
			tie = true
		}
	}
	if best != "" && !tie {
		return best
	}
	var hits []string
	for _, k := range trustValues {
		if strings.Contains(k, low) {
			hits = append(hits, k)
		}
	}
	if len(hits) == 1 {
		return hits[0]
	}
	return ""
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
