package command

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/structpb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/reply"
)

func (a *app) runCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Start runs, do their steps, read their state",
	}
	cmd.AddCommand(a.runStartCommand(), a.runStepCommand(), a.runStateCommand(), a.runListCommand())
	return cmd
}

func (a *app) runStartCommand() *cobra.Command {
	var params, key, onLive, onTerminal string
	cmd := &cobra.Command{
		Use:   "start <workflow>",
		Short: "Start a run of a registered workflow and print the engine's reply",
		Long: "Start a run of a registered workflow; the engine runs every auto step that is ready.\n" +
			"Prints the reply as JSON. Exit 0 on status ok or confirm_required, 1 on error or blocked.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			caller, err := a.caller()
			if err != nil {
				return err
			}
			p, err := parseParams(params)
			if err != nil {
				return err
			}
			resp, err := call(a, cmd.Context(), func(ctx context.Context, e realmv1.EngineServiceClient) (*realmv1.StartRunResponse, error) {
				return e.StartRun(ctx, &realmv1.StartRunRequest{
					WorkflowId: args[0], Params: p, IdempotencyKey: key,
					OnLiveMatch: onLive, OnTerminalMatch: onTerminal, Caller: caller,
				})
			})
			if err != nil {
				return err
			}
			return a.printReply(resp.GetReply())
		},
	}
	cmd.Flags().StringVar(&params, "params", "", "the run's parameters, a JSON object (default {})")
	cmd.Flags().StringVar(&key, "idempotency-key", "", "a repeat with the same key returns the first run")
	cmd.Flags().StringVar(&onLive, "on-live-match", "", "use_existing (default) or fail")
	cmd.Flags().StringVar(&onTerminal, "on-terminal-match", "", "reuse (default), reject, rerun_if_failed or rerun")
	return cmd
}

func (a *app) runStepCommand() *cobra.Command {
	var params, nonce string
	cmd := &cobra.Command{
		Use:   "step <run> <step>",
		Short: "Do one step of a run, with its answer, and print the engine's reply",
		Long: "Do one step of a run: for an agent step, --params is the answer.\n" +
			"Prints the reply as JSON. Exit 0 on status ok or confirm_required, 1 on error or blocked.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			caller, err := a.caller()
			if err != nil {
				return err
			}
			p, err := parseParams(params)
			if err != nil {
				return err
			}
			resp, err := call(a, cmd.Context(), func(ctx context.Context, e realmv1.EngineServiceClient) (*realmv1.ExecuteStepResponse, error) {
				return e.ExecuteStep(ctx, &realmv1.ExecuteStepRequest{
					RunId: args[0], Command: args[1], Params: p, WriterNonce: nonce, Caller: caller,
				})
			})
			if err != nil {
				return err
			}
			return a.printReply(resp.GetReply())
		},
	}
	cmd.Flags().StringVar(&params, "params", "", "the step's answer, a JSON object (default {})")
	cmd.Flags().StringVar(&nonce, "writer-nonce", "", "an identifier for this attempt of the step")
	return cmd
}

// printReply prints the reply JSON and turns its status into the exit code:
// ok and confirm_required succeed; error and blocked end with their one line.
func (a *app) printReply(r *realmv1.Reply) error {
	if r == nil {
		return refuse("Error: engine-svc sent an empty reply.")
	}
	if err := printJSON(a.env.Stdout, reply.ReplyJSON(r)); err != nil {
		return err
	}
	switch r.GetStatus() {
	case realmv1.ReplyStatus_REPLY_STATUS_OK, realmv1.ReplyStatus_REPLY_STATUS_CONFIRM_REQUIRED:
		return nil
	}
	return refuse("%s", replyMessage(r))
}

// replyMessage is the one line that says why a reply refused: its first
// error, else its context_hint, else its status.
func replyMessage(r *realmv1.Reply) string {
	for _, e := range r.GetErrors() {
		if strings.TrimSpace(e) != "" {
			return e
		}
	}
	if r.GetContextHint() != "" {
		return r.GetContextHint()
	}
	return "engine-svc replied " + reply.StatusWord(r.GetStatus()) + "."
}

// parseParams reads --params: a JSON object, {} when empty.
func parseParams(s string) (*structpb.Struct, error) {
	if strings.TrimSpace(s) == "" {
		return &structpb.Struct{}, nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil || m == nil {
		cause := "not an object"
		if err != nil {
			cause = err.Error()
		}
		return nil, refuse("Error: --params must be a JSON object: %s", cause)
	}
	p, err := structpb.NewStruct(m)
	if err != nil {
		return nil, refuse("Error: --params must be a JSON object: %v", err)
	}
	return p, nil
}

func (a *app) runStateCommand() *cobra.Command {
	var includeSteps bool
	cmd := &cobra.Command{
		Use:   "state <run>",
		Short: "Print where a run stands (get_run_state's JSON)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := call(a, cmd.Context(), func(ctx context.Context, e realmv1.EngineServiceClient) (*realmv1.GetRunStateResponse, error) {
				return e.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: args[0], IncludeSteps: includeSteps})
			})
			if err != nil {
				return err
			}
			if r := resp.GetRefusal(); r != nil {
				return refuse("%s", replyMessage(r))
			}
			if resp.GetState() == nil {
				return refuse("Error: engine-svc sent no state for run %s.", args[0])
			}
			return printJSON(a.env.Stdout, reply.RunStateJSON(resp.GetState()))
		},
	}
	cmd.Flags().BoolVar(&includeSteps, "include-steps", false, "add each step's attempts and their cost")
	return cmd
}

// phaseFilters are the --status values run list takes, in the order its
// message lists them.
var phaseFilters = []struct {
	word  string
	phase realmv1.RunPhase
}{
	{"running", realmv1.RunPhase_RUN_PHASE_RUNNING},
	{"gate_waiting", realmv1.RunPhase_RUN_PHASE_GATE_WAITING},
	{"completed", realmv1.RunPhase_RUN_PHASE_COMPLETED},
	{"failed", realmv1.RunPhase_RUN_PHASE_FAILED},
	{"abandoned", realmv1.RunPhase_RUN_PHASE_ABANDONED},
	{"aborted", realmv1.RunPhase_RUN_PHASE_ABORTED},
}

// listPageSize is how many runs one ListRuns call asks for.
const listPageSize = 500

func (a *app) runListCommand() *cobra.Command {
	var workflowID, phase, olderThan string
	var stuck, asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest change first",
		Long: "List runs, newest change first:\n" +
			"  <run-id>  <workflow-id>  <phase>  <last change, local time>\n" +
			"With --stuck, only runs with a health finding, each with its idle time and labels.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &realmv1.ListRunsRequest{WorkflowId: workflowID, Stuck: stuck, Limit: listPageSize}
			threshold := "24h"
			if cmd.Flags().Changed("older-than") {
				if !stuck {
					return refuse("--older-than is only valid with --stuck.")
				}
				threshold = olderThan
			}
			if stuck && cmd.Flags().Changed("status") {
				return refuse("--stuck cannot be combined with --status.")
			}
			if cmd.Flags().Changed("status") {
				p, ok := phaseFilter(phase)
				if !ok {
					words := make([]string, 0, len(phaseFilters))
					for _, f := range phaseFilters {
						words = append(words, f.word)
					}
					return refuse("Invalid --status value '%s'. Valid values: %s", phase, strings.Join(words, ", "))
				}
				req.Phase = p
			}
			if stuck {
				d, err := parseDuration(threshold)
				if err != nil {
					return err
				}
				secs := int64(d / time.Second)
				req.OlderThanSeconds = &secs
			}
			runs, err := a.listRuns(cmd.Context(), req)
			if err != nil {
				return err
			}
			if asJSON {
				return a.printRunsJSON(runs)
			}
			a.printRuns(runs, workflowID, stuck, threshold)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"runs": [...]}, one object per run`)
	cmd.Flags().StringVar(&workflowID, "workflow", "", "only runs of this workflow")
	cmd.Flags().StringVar(&phase, "status", "", "only runs in this phase: running, gate_waiting, completed, failed, abandoned, aborted")
	cmd.Flags().BoolVar(&stuck, "stuck", false, "only runs with a health finding")
	cmd.Flags().StringVar(&olderThan, "older-than", "24h", "with --stuck: idle threshold for never-claimed runs (<n>d|h|m)")
	return cmd
}

// printRunsJSON prints the listing for scripts: times in RFC 3339 UTC,
// phases as the replies spell them, absent fields left out.
func (a *app) printRunsJSON(runs []*realmv1.RunSummary) error {
	out := make([]map[string]any, 0, len(runs))
	for _, r := range runs {
		m := map[string]any{
			"run_id":           r.GetRunId(),
			"workflow_id":      r.GetWorkflowId(),
			"workflow_version": r.GetWorkflowVersion(),
			"run_phase":        reply.PhaseWord(r.GetRunPhase()),
			"updated_at":       reply.FormatTime(r.GetUpdatedAt()),
			"step_count":       r.GetStepCount(),
		}
		if r.GetCreatedAt() != nil {
			m["created_at"] = reply.FormatTime(r.GetCreatedAt())
		}
		if r.GetLastStep() != "" {
			m["last_step"] = r.GetLastStep()
		}
		if len(r.GetLabels()) > 0 {
			m["labels"] = r.GetLabels()
		}
		if r.GetGateStep() != "" {
			gate := map[string]any{"step": r.GetGateStep(), "opened_at": reply.FormatTime(r.GetGateOpenedAt())}
			if r.GetGateExpiresAt() != nil {
				gate["expires_at"] = reply.FormatTime(r.GetGateExpiresAt())
			}
			m["gate"] = gate
		}
		out = append(out, m)
	}
	enc := json.NewEncoder(a.env.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"runs": out})
}

func phaseFilter(word string) (realmv1.RunPhase, bool) {
	for _, f := range phaseFilters {
		if f.word == word {
			return f.phase, true
		}
	}
	return realmv1.RunPhase_RUN_PHASE_UNSPECIFIED, false
}

// listRuns reads every page of ListRuns.
func (a *app) listRuns(ctx context.Context, req *realmv1.ListRunsRequest) ([]*realmv1.RunSummary, error) {
	engine, closeConn, err := a.engine(ctx)
	if err != nil {
		return nil, err
	}
	defer closeConn()
	cctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	var runs []*realmv1.RunSummary
	seen := map[string]bool{}
	for {
		resp, err := engine.ListRuns(cctx, req)
		if err != nil {
			return nil, a.rpcError(err)
		}
		runs = append(runs, resp.GetRuns()...)
		next := resp.GetNextPageToken()
		// A token seen before would loop for ever: stop at it.
		if next == "" || seen[next] {
			return runs, nil
		}
		seen[next] = true
		req.PageToken = next
	}
}

func (a *app) printRuns(runs []*realmv1.RunSummary, workflowID string, stuck bool, threshold string) {
	out := a.env.Stdout
	if len(runs) == 0 {
		switch {
		case stuck && workflowID != "":
			fmt.Fprintf(out, "No stuck runs found for workflow '%s' (threshold %s).\n", workflowID, threshold)
		case stuck:
			fmt.Fprintf(out, "No stuck runs found (threshold %s).\n", threshold)
		case workflowID != "":
			fmt.Fprintf(out, "No runs found for workflow '%s'.\n", workflowID)
		default:
			fmt.Fprintln(out, "No runs found.")
		}
		return
	}
	runs = append([]*realmv1.RunSummary(nil), runs...)
	sort.SliceStable(runs, func(i, j int) bool {
		return runs[i].GetUpdatedAt().AsTime().After(runs[j].GetUpdatedAt().AsTime())
	})
	if stuck {
		fmt.Fprintf(out, "Stuck runs (threshold %s):\n", threshold)
	}
	now := a.env.Now()
	p := newPaint(out, a.env.Getenv)
	for _, r := range runs {
		updated := r.GetUpdatedAt().AsTime()
		fields := []string{r.GetRunId(), r.GetWorkflowId() + " v" + versionWord(r.GetWorkflowVersion()), p.phase(r.GetRunPhase()),
			localTime(updated, a.env.Location), fmt.Sprintf("%d step(s)", r.GetStepCount())}
		if g := r.GetGateStep(); g != "" {
			gate := fmt.Sprintf("gate: %s (%s)", g, age(now.Sub(r.GetGateOpenedAt().AsTime())))
			if exp := r.GetGateExpiresAt(); exp != nil && now.After(exp.AsTime()) {
				gate += "  EXPIRED " + age(now.Sub(exp.AsTime())) + " ago"
			}
			fields = append(fields, gate)
		}
		if stuck {
			fields = append(fields, "idle: "+age(now.Sub(updated)))
		}
		line := strings.Join(append(fields, r.GetLabels()...), "  ")
		fmt.Fprintln(out, line)
	}
}

// versionWord writes a workflow version as the spec shows it: v1, v1.5.
func versionWord(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
