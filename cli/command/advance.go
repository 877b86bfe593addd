package command

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/reply"
)

func (a *app) runAdvanceCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "advance <run>",
		Short: "Run the guards and auto steps a run owes to the engine",
		Long: "Run the guards and auto steps the run owes, plus an expired question's declared on_expiry,\n" +
			"until a question opens, an agent step is ready, or the run ends. No model is used.\n" +
			"Exit 1 when the engine refuses or a step cannot run; else 0.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			caller, err := a.caller()
			if err != nil {
				return err
			}
			engine, ctx, done, err := a.session(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			sr, err := engine.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: args[0]})
			if err != nil {
				return a.rpcError(err)
			}
			if r := sr.GetRefusal(); r != nil {
				return refuse("%s", replyMessage(r))
			}
			state := sr.GetState()
			if state == nil {
				return refuse("Error: engine-svc sent no state for run %s.", args[0])
			}
			out := a.env.Stdout
			fmt.Fprintf(out, "Advancing run %s (workflow '%s').\n", state.GetRunId(), state.GetWorkflowId())
			if owed := owedSteps(state.GetNextActions()); len(owed) > 0 {
				fmt.Fprintf(out, "Owed to the engine: %s.\n", quoted(owed))
			}
			ar, err := engine.AdvanceRun(ctx, &realmv1.AdvanceRunRequest{RunId: args[0], Caller: caller})
			if err != nil {
				return a.rpcError(err)
			}
			return a.printAdvanced(state, ar.GetReply())
		},
	}
	return cmd
}

// session dials engine-svc once for a command that makes several calls;
// every call shares the command's deadline. done is never nil.
func (a *app) session(ctx context.Context) (realmv1.EngineServiceClient, context.Context, func(), error) {
	engine, closeConn, err := a.engine(ctx)
	if err != nil {
		return nil, ctx, func() {}, err
	}
	cctx, cancel := context.WithTimeout(ctx, a.timeout)
	return engine, cctx, func() { cancel(); closeConn() }, nil
}

// printAdvanced prints what advance_run did: each step it ran, its
// warnings and guards, why it stopped, and the phase the run is left in.
func (a *app) printAdvanced(before *realmv1.RunState, r *realmv1.Reply) error {
	if r == nil {
		return refuse("Error: engine-svc sent an empty reply.")
	}
	out := a.env.Stdout
	id := before.GetRunId()
	for _, c := range r.GetChainedAutoSteps() {
		fmt.Fprintln(out, "→ "+c.GetStep())
		warn(out, c.GetWarnings())
	}
	warn(out, r.GetWarnings())
	printLines(out, guardLines(r))
	if !succeeded(r) {
		return refuse("%s", replyMessage(r))
	}
	for _, s := range stopReasons(before, r) {
		fmt.Fprintln(out, "Stopped: "+s)
	}
	fmt.Fprintf(out, "Run %s: phase '%s'\n", id, reply.PhaseWord(r.GetRunPhase()))
	return nil
}

func warn(w io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintln(w, "⚠ "+l)
	}
}

// stopReasons says why advance stopped, in cli.md §4.2's order. A run this
// call completed needs no reason.
func stopReasons(before *realmv1.RunState, r *realmv1.Reply) []string {
	id := before.GetRunId()
	phase := r.GetRunPhase()
	if reply.Terminal(phase) {
		if phase == realmv1.RunPhase_RUN_PHASE_COMPLETED && !before.GetTerminalState() {
			return nil
		}
		return []string{fmt.Sprintf("the run has ended (%s)", reply.PhaseWord(phase))}
	}
	if g := r.GetGate(); g != nil {
		return []string{fmt.Sprintf("a question opened at '%s' — answer it: %s", g.GetStepName(), respondCommand(id, g.GetGateId(), g.GetChoices()))}
	}
	var reasons, agents []string
	for _, na := range r.GetNextActions() {
		in := na.GetInstruction()
		switch in.GetTool() {
		case "submit_human_response":
			// A question opened before this call and still open.
			if g := before.GetPendingGate(); g != nil && g.GetGateId() == reply.Params(in)["gate_id"] {
				reasons = append(reasons, fmt.Sprintf("a question is open at '%s' — answer it: %s", g.GetStepName(), respondCommand(id, g.GetGateId(), g.GetChoices())))
			}
		case "execute_step":
			if s := reply.Command(in); s != "" {
				agents = append(agents, s)
			}
		}
	}
	switch len(agents) {
	case 0:
	case 1:
		reasons = append(reasons, fmt.Sprintf("an agent step is ready: '%s' — drive it with realm agent --run-id %s", agents[0], id))
	default:
		reasons = append(reasons, fmt.Sprintf("agent steps are ready: %s — drive them with realm agent --run-id %s", quoted(agents), id))
	}
	if len(reasons) == 0 {
		reasons = append(reasons, "nothing is ready to run now")
	}
	return reasons
}

// respondCommand is the command line that answers a question.
func respondCommand(runID, gateID string, choices []string) string {
	return fmt.Sprintf("realm run respond %s --gate %s --choice <one of: %s>", runID, gateID, strings.Join(choices, ", "))
}
