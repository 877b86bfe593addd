package command

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// diffEvidence is the part of an evidence entry (run-record.md §3) the
// diff compares.
type diffEvidence struct {
	StepID        string          `json:"step_id"`
	Kind          string          `json:"kind"`
	Status        string          `json:"status"`
	DurationMS    int64           `json:"duration_ms"`
	EvidenceHash  string          `json:"evidence_hash"`
	OutputSummary json.RawMessage `json:"output_summary"`
}

type diffRun struct {
	WorkflowID string         `json:"workflow_id"`
	Evidence   []diffEvidence `json:"evidence"`
}

// runDiffCommand is `realm run diff <a> <b>` (cli.md §3.4): step by step,
// what two runs recorded. The records come from ExportRun (the whole run
// with its evidence); nothing is written.
func (a *app) runDiffCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "diff <run-a> <run-b> | <rpl_a> <rpl_b>",
		Short: "Compare two runs step by step (status, output hash, duration), or two saved replays",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			idA, idB := args[0], args[1]
			replayA, replayB := strings.HasPrefix(idA, "rpl_"), strings.HasPrefix(idB, "rpl_")
			if replayA != replayB {
				return refuse("Error: cannot diff a run against a replay. Provide two run IDs or two replay IDs.")
			}
			if replayA {
				// Replays are files `realm run replay --save` wrote; no
				// engine call is needed.
				ra, err := a.loadReplay(idA)
				if err != nil {
					return err
				}
				rb, err := a.loadReplay(idB)
				if err != nil {
					return err
				}
				printReplayDiff(a.env.Stdout, idA, idB, ra, rb)
				return nil
			}
			engine, ctx, done, err := a.session(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			load := func(id string) (*diffRun, error) {
				resp, err := engine.ExportRun(ctx, &realmv1.ExportRunRequest{RunId: id})
				if runNotFound(err) {
					return nil, refuse("Run not found: %s", id)
				}
				if err != nil {
					return nil, a.rpcError(err)
				}
				var b struct {
					Run diffRun `json:"run"`
				}
				if err := json.Unmarshal(resp.GetBundle(), &b); err != nil {
					return nil, refuse("Error: cannot read the export of run %s: %v", id, err)
				}
				return &b.Run, nil
			}
			runA, err := load(idA)
			if err != nil {
				return err
			}
			runB, err := load(idB)
			if err != nil {
				return err
			}
			printDiff(a.env.Stdout, idA, idB, runA, runB)
			return nil
		},
	}
}

// Column widths of cli.md §3.4's table: the step column is 21 wide, the
// others 9, each followed by two spaces; the B status cell is preceded by
// its two-character marker ("= ", "≠ " or blank).
const (
	diffStepWidth = 21
	diffCellWidth = 9
)

func printDiff(w io.Writer, idA, idB string, runA, runB *diffRun) {
	workflow := runA.WorkflowID
	if runA.WorkflowID != runB.WorkflowID {
		// cli.md: the warning comes first and the diff goes on. It is
		// printed on stdout so it stays first in the report. The Workflow
		// line then names both (cli.md is silent on it).
		fmt.Fprintf(w, "Warning: runs are from different workflows (%s vs %s)\n", runA.WorkflowID, runB.WorkflowID)
		workflow = runA.WorkflowID + "  vs  " + runB.WorkflowID
	}
	fmt.Fprintf(w, "Diff: %s  vs  %s\n", idA, idB)
	fmt.Fprintf(w, "Workflow: %s\n\n", workflow)

	lastA, lastB := diffLastAttempts(runA), diffLastAttempts(runB)
	// Rows in first-run order: A's steps as A first ran them, then the
	// steps only B ran, in B's order.
	var steps []string
	seen := map[string]bool{}
	for _, r := range []*diffRun{runA, runB} {
		for _, e := range r.Evidence {
			if e.Kind == "gate_response" || seen[e.StepID] {
				continue
			}
			seen[e.StepID] = true
			steps = append(steps, e.StepID)
		}
	}
	// A step name longer than the documented column widens it (and the
	// rule) for every row, so the table stays aligned (cli.md is silent).
	stepWidth := diffStepWidth
	for _, s := range steps {
		stepWidth = max(stepWidth, len([]rune(s)))
	}
	pad := func(s string, n int) string {
		return s + strings.Repeat(" ", max(0, n-len([]rune(s)))+2)
	}
	fmt.Fprintln(w, pad("Step", stepWidth)+pad("A status", diffCellWidth)+"  "+pad("B status", diffCellWidth)+
		pad("A hash", diffCellWidth)+pad("B hash", diffCellWidth)+"Δ ms")
	rule := strings.Repeat("─", diffCellWidth)
	fmt.Fprintln(w, strings.Repeat("─", stepWidth)+strings.Repeat("  "+rule, 5))
	for _, s := range steps {
		ea, okA := lastA[s]
		eb, okB := lastB[s]
		statusA, statusB, hashA, hashB, delta := "missing", "missing", "—", "—", "—"
		if okA {
			statusA, hashA = ea.Status, diffShortHash(ea.EvidenceHash)
		}
		if okB {
			statusB, hashB = eb.Status, diffShortHash(eb.EvidenceHash)
		}
		marker := "  "
		if okA && okB {
			marker = "≠ "
			if ea.Status == eb.Status && diffSameOutput(ea, eb) {
				marker = "= "
			}
			delta = fmt.Sprintf("%d", eb.DurationMS-ea.DurationMS)
		}
		fmt.Fprintln(w, pad(s, stepWidth)+pad(statusA, diffCellWidth)+marker+pad(statusB, diffCellWidth)+
			pad(hashA, diffCellWidth)+pad(hashB, diffCellWidth)+delta)
	}
}

// diffLastAttempts keeps each step's last execution entry: a retried step
// compares its final attempt; a gate answer (kind gate_response) is folded
// into its step, as inspect does, and not compared on its own.
func diffLastAttempts(r *diffRun) map[string]diffEvidence {
	m := map[string]diffEvidence{}
	for _, e := range r.Evidence {
		if e.Kind == "gate_response" {
			continue
		}
		m[e.StepID] = e
	}
	return m
}

// diffSameOutput compares outputs by evidence_hash (a plain hash of the
// output, run-record.md §3), falling back to the outputs themselves when a
// hash is missing.
func diffSameOutput(a, b diffEvidence) bool {
	if a.EvidenceHash != "" && b.EvidenceHash != "" {
		return a.EvidenceHash == b.EvidenceHash
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a.OutputSummary) != nil || json.Compact(&cb, b.OutputSummary) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

func diffShortHash(h string) string {
	if h == "" {
		return "—"
	}
	if len(h) > 8 {
		return h[:8]
	}
	return h
}
