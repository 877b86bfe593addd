package command

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// replayID is a saved replay's id; anything else is never a file name
// (no path can be smuggled into the replays folder).
var replayID = regexp.MustCompile(`^rpl_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// loadReplay reads a replay saved by `realm run replay --save`.
func (a *app) loadReplay(id string) (*savedReplay, error) {
	home := a.env.Getenv("HOME")
	if !replayID.MatchString(id) || home == "" {
		return nil, refuse("Replay not found: %s", id)
	}
	b, err := os.ReadFile(filepath.Join(home, ".realm", "replays", id+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, refuse("Replay not found: %s", id)
	}
	if err != nil {
		return nil, refuse("Error: cannot read replay %s: %v", id, err)
	}
	var r savedReplay
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, refuse("Error: cannot read replay %s: %v", id, err)
	}
	return &r, nil
}

// Column widths of cli.md §3.4's replay table: step 21, each replay 37,
// Diff? 5, two spaces between.
const (
	replayDiffCellWidth = 37
	replayDiffMarkWidth = 5
)

// printReplayDiff is `realm run diff <rpl_a> <rpl_b>` (cli.md §3.4): each
// step's precondition result in both replays. A step one replay does not
// have shows "—"; a replay without overrides says "Overrides A: none"
// (cli.md is silent on both).
func printReplayDiff(w io.Writer, idA, idB string, a, b *savedReplay) {
	fmt.Fprintf(w, "Replay diff: %s  vs  %s\n", idA, idB)
	fmt.Fprintf(w, "Origin runs: %s  vs  %s\n", a.RunID, b.RunID)
	for _, side := range []struct {
		name string
		r    *savedReplay
	}{{"A", a}, {"B", b}} {
		if len(side.r.Overrides) == 0 {
			fmt.Fprintf(w, "Overrides %s: none\n", side.name)
		}
		for _, o := range side.r.Overrides {
			fmt.Fprintf(w, "Overrides %s: %s.%s=%s\n", side.name, o.Step, o.Field, o.Raw)
		}
	}
	fmt.Fprintln(w)

	cells := func(r *savedReplay) map[string]string {
		m := map[string]string{}
		for _, s := range r.Steps {
			m[s.Step] = "none"
			if len(s.Preconditions) > 0 {
				m[s.Step] = s.Original + " → " + s.Replay
			}
		}
		return m
	}
	cellA, cellB := cells(a), cells(b)
	var steps []string
	seen := map[string]bool{}
	for _, r := range []*savedReplay{a, b} {
		for _, s := range r.Steps {
			if !seen[s.Step] {
				seen[s.Step] = true
				steps = append(steps, s.Step)
			}
		}
	}
	stepWidth := replayStepWidth
	for _, s := range steps {
		stepWidth = max(stepWidth, len([]rune(s)))
	}
	pad := func(s string, n int) string {
		return s + strings.Repeat(" ", max(0, n-len([]rune(s)))+2)
	}
	rule := func(n int) string { return strings.Repeat("─", n) }
	fmt.Fprintln(w, pad("Step", stepWidth)+pad("Replay A", replayDiffCellWidth)+pad("Replay B", replayDiffCellWidth)+"Diff?")
	fmt.Fprintln(w, rule(stepWidth)+"  "+rule(replayDiffCellWidth)+"  "+rule(replayDiffCellWidth)+"  "+rule(replayDiffMarkWidth))
	for _, s := range steps {
		ca, okA := cellA[s]
		cb, okB := cellB[s]
		if !okA {
			ca = "—"
		}
		if !okB {
			cb = "—"
		}
		mark := "≠"
		if okA && okB && ca == cb {
			mark = "="
		}
		fmt.Fprintln(w, pad(s, stepWidth)+pad(ca, replayDiffCellWidth)+pad(cb, replayDiffCellWidth)+mark)
	}
}
