package command

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/realm-go/realm/pkg/condition"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/workflow"
)

// replayRun is the part of an exported run (run-record.md §2, §9) a replay
// reads: the recorded outputs and what conditions can read of settlement.
type replayRun struct {
	WorkflowID           string             `json:"workflow_id"`
	TerminalState        bool               `json:"terminal_state"`
	RunPhase             string             `json:"run_phase"`
	Params               map[string]any     `json:"params"`
	Outputs              map[string]any     `json:"outputs"`
	CompletedSteps       []string           `json:"completed_steps"`
	FailedSteps          []string           `json:"failed_steps"`
	DefaultedSteps       []string           `json:"defaulted_steps"`
	ValidationRejections map[string]float64 `json:"validation_rejections"`
}

// replayStep is one row of a replay, and one element of a saved replay's
// "steps".
type replayStep struct {
	Step          string   `json:"step"`
	Preconditions []string `json:"preconditions"`
	// Original and Replay are "PASS", "BLOCKED", or "none" for a step
	// without preconditions.
	Original string `json:"original"`
	Replay   string `json:"replay"`
	Changed  bool   `json:"changed"`
}

// savedReplay is the file `--save` writes (cli.md §3.5 leaves the format
// open; the command's help documents it).
type savedReplay struct {
	ReplayID   string       `json:"replay_id"`
	Version    int          `json:"realm_replay_version"`
	RunID      string       `json:"run_id"`
	WorkflowID string       `json:"workflow_id"`
	RunPhase   string       `json:"run_phase"`
	Partial    bool         `json:"partial"`
	CreatedAt  string       `json:"created_at"`
	Overrides  []override   `json:"overrides"`
	Steps      []replayStep `json:"steps"`
}

const replayHelp = `Takes the outputs the run's steps recorded, changes the fields named with
--with, and checks every step's preconditions against the result, as the
engine would before the step's claim. It runs no step and changes no run.

A --with value of true or false is read as a boolean, a number as a
number, a quoted value ('…' or "…") as the text inside the quotes, and
anything else as text. <field> can be a dotted path (result.score).

Preconditions shows "none" for a step without preconditions, otherwise
PASS or BLOCKED with the recorded outputs, then with the changed ones;
Changed? is "YES ⚠" when the two differ. The workflow's definition is the
one registered now (read from engine-svc).

--save writes $HOME/.realm/replays/rpl_<uuid>.json, a JSON object:
  replay_id             "rpl_<uuid>"
  realm_replay_version  1
  run_id, workflow_id   the replayed run and its workflow
  run_phase             the run's phase when replayed
  partial               true when the run had not ended
  created_at            when the replay was made (UTC)
  overrides             [{step, field, raw, value}]: field is the dotted
                        path, raw the value as typed, value as it was read
  steps                 [{step, preconditions, original, replay, changed}]
                        in workflow order; original/replay are PASS,
                        BLOCKED or none
Compare two saved replays with: realm run diff <rpl_a> <rpl_b>`

// runReplayCommand is `realm run replay <run> [--with …] [--save]`
// (cli.md §3.5). The run comes from ExportRun and the definition from
// GetWorkflowProtocol; conditions are evaluated here by pkg/condition,
// the evaluator the engine uses.
func (a *app) runReplayCommand() *cobra.Command {
	var with []string
	var save bool
	cmd := &cobra.Command{
		Use:   "replay <run>",
		Short: "Check a run's preconditions again with changed step outputs (runs nothing)",
		Long:  replayHelp,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			runID := args[0]
			overrides := make([]override, 0, len(with))
			for _, w := range with {
				o, err := parseOverride(w)
				if err != nil {
					return err
				}
				overrides = append(overrides, o)
			}
			engine, ctx, done, err := a.session(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := engine.ExportRun(ctx, &realmv1.ExportRunRequest{RunId: runID})
			if runNotFound(err) {
				return refuse("Run not found: %s", runID)
			}
			if err != nil {
				return a.rpcError(err)
			}
			var bundle struct {
				Run replayRun `json:"run"`
			}
			if err := json.Unmarshal(resp.GetBundle(), &bundle); err != nil {
				return refuse("Error: cannot read the export of run %s: %v", runID, err)
			}
			run := &bundle.Run
			// By run: a run started from a file without --register is
			// replayed against the definition it carries.
			proto, err := engine.GetWorkflowProtocol(ctx, &realmv1.GetWorkflowProtocolRequest{WorkflowId: run.WorkflowID, RunId: runID})
			if err != nil {
				return a.rpcError(err)
			}
			var def workflow.Definition
			if err := json.Unmarshal(proto.GetDefinition(), &def); err != nil {
				return refuse("Error: cannot read workflow '%s' from engine-svc: %v", run.WorkflowID, err)
			}
			steps, err := replaySteps(&def, run, overrides)
			if err != nil {
				return err
			}
			out := a.env.Stdout
			if !run.TerminalState {
				fmt.Fprintf(out, "Warning: run %s is not in a terminal state. Partial replay.\n", runID)
			}
			printReplay(out, runID, overrides, steps)
			if !save {
				return nil
			}
			rec := savedReplay{
				ReplayID: "rpl_" + uuid.NewString(), Version: 1, RunID: runID, WorkflowID: run.WorkflowID,
				RunPhase: run.RunPhase, Partial: !run.TerminalState, CreatedAt: a.env.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
				Overrides: overrides, Steps: steps,
			}
			if err := a.saveReplay(rec); err != nil {
				return err
			}
			fmt.Fprintf(out, "\nSaved replay: %s\n", rec.ReplayID)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&with, "with", nil, "replace one field of one step's output: <step>.<field>=<value> (repeatable)")
	cmd.Flags().BoolVar(&save, "save", false, "store the result in $HOME/.realm/replays/ and print its ID")
	return cmd
}

// replaySteps evaluates every step's preconditions, in workflow order,
// against the recorded outputs and against them with the overrides.
func replaySteps(def *workflow.Definition, run *replayRun, overrides []override) ([]replayStep, error) {
	for name, s := range def.Steps {
		s.Name = name
	}
	settlement := map[string]map[string]any{}
	settle := func(steps []string, failed bool) {
		for _, s := range steps {
			byDefault := false
			for _, d := range run.DefaultedSteps {
				byDefault = byDefault || d == s
			}
			settlement[s] = map[string]any{"failed": failed, "settled_by_default": byDefault, "validation_rejections": run.ValidationRejections[s]}
		}
	}
	settle(run.CompletedSteps, false)
	settle(run.FailedSteps, true)
	original := condition.Scope{Outputs: run.Outputs, Params: run.Params, Settlement: settlement}
	changed := original
	changed.Outputs = applyOverrides(run.Outputs, overrides)

	var rows []replayStep
	for _, s := range def.Ordered() {
		row := replayStep{Step: s.Name, Preconditions: append([]string{}, s.Preconditions...), Original: "none", Replay: "none"}
		if len(s.Preconditions) > 0 {
			conds := make([]*condition.Condition, 0, len(s.Preconditions))
			for _, text := range s.Preconditions {
				c, err := condition.ParseFor("preconditions", text)
				if err != nil {
					return nil, refuse("Error: step '%s' of workflow '%s' has a precondition that cannot be read: %v", s.Name, def.ID, err)
				}
				conds = append(conds, c)
			}
			row.Original = verdict(condition.EvalAll(condition.FieldPrecondition, conds, original))
			row.Replay = verdict(condition.EvalAll(condition.FieldPrecondition, conds, changed))
			row.Changed = row.Original != row.Replay
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func verdict(passed bool, _ []condition.Result) string {
	if passed {
		return "PASS"
	}
	return "BLOCKED"
}

// Column widths of cli.md §3.5's table: step 21, preconditions 37,
// changed 8, two spaces between.
const (
	replayStepWidth = 21
	replayCondWidth = 37
	replayMarkWidth = 8
)

func printReplay(w io.Writer, runID string, overrides []override, steps []replayStep) {
	fmt.Fprintf(w, "Replay of %s\n", runID)
	for _, o := range overrides {
		fmt.Fprintf(w, "Override: %s.%s = %s\n", o.Step, o.Field, o.Raw)
	}
	fmt.Fprintln(w)
	// A longer step name widens its column for every row (as diff does).
	stepWidth := replayStepWidth
	for _, s := range steps {
		stepWidth = max(stepWidth, len([]rune(s.Step)))
	}
	pad := func(s string, n int) string {
		return s + strings.Repeat(" ", max(0, n-len([]rune(s)))+2)
	}
	fmt.Fprintln(w, pad("Step", stepWidth)+pad("Preconditions (original → replay)", replayCondWidth)+"Changed?")
	fmt.Fprintln(w, strings.Repeat("─", stepWidth)+"  "+strings.Repeat("─", replayCondWidth)+"  "+strings.Repeat("─", replayMarkWidth))
	for _, s := range steps {
		cell, mark := "none", "no"
		if len(s.Preconditions) > 0 {
			cell = s.Original + " → " + s.Replay
		}
		if s.Changed {
			mark = "YES ⚠"
		}
		fmt.Fprintln(w, pad(s.Step, stepWidth)+pad(cell, replayCondWidth)+mark)
	}
}

// saveReplay writes the replay file, never over an existing one: it is
// written to a temporary name in the same folder and linked into place.
func (a *app) saveReplay(rec savedReplay) error {
	home := a.env.Getenv("HOME")
	if home == "" {
		return refuse("Error: cannot save the replay: HOME is not set. Set HOME, or run without --save.")
	}
	dir := filepath.Join(home, ".realm", "replays")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return refuse("Error: cannot save the replay: %v", err)
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return refuse("Error: cannot save the replay: %v", err)
	}
	tmp, err := os.CreateTemp(dir, rec.ReplayID+".*.tmp")
	if err != nil {
		return refuse("Error: cannot save the replay: %v", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		_ = tmp.Close()
		return refuse("Error: cannot save the replay: %v", err)
	}
	if err := tmp.Close(); err != nil {
		return refuse("Error: cannot save the replay: %v", err)
	}
	if err := os.Link(tmp.Name(), filepath.Join(dir, rec.ReplayID+".json")); err != nil {
		return refuse("Error: cannot save the replay: %v", err)
	}
	return nil
}
