package command

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/reply"
)

// defaultAbandonReason is the terminal_reason when --reason is not given.
const defaultAbandonReason = "Abandoned via realm run abandon"

// alreadyAbandonedNote leads the engine's note when the run was abandoned
// before this call; the CLI says so on its first line instead.
const alreadyAbandonedNote = "already abandoned (no change this call). "

func (a *app) runAbandonCommand() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "abandon <run>",
		Short: "End an open run by hand (a kill: finalizers do not run)",
		Long: "End an open run: phase 'abandoned', with the reason recorded. Finalizers do not run.\n" +
			"Exit 0 when the run is (or already was) abandoned, 1 on a refusal.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				reason = defaultAbandonReason
			}
			// abandon does not read REALM_OPERATOR (cli.md §1.5): a bad one
			// is left out of the record rather than refusing the command.
			caller, err := a.caller()
			if err != nil {
				caller = &realmv1.Caller{Channel: realmv1.Channel_CHANNEL_RUN}
			}
			engine, ctx, done, err := a.session(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			// The state before the act: what the run was started with (for
			// the way to run it again), and whether it had already ended.
			sr, err := engine.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: args[0]})
			if err != nil {
				return a.rpcError(err)
			}
			if r := sr.GetRefusal(); r != nil {
				return refuse("%s", replyMessage(r))
			}
			resp, err := engine.AbandonRun(ctx, &realmv1.AbandonRunRequest{RunId: args[0], Reason: reason, Caller: caller})
			if err != nil {
				return a.rpcError(err)
			}
			if r := resp.GetRefusal(); r != nil {
				return refuse("%s", replyMessage(r))
			}
			return a.printAbandoned(sr.GetState(), resp)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", defaultAbandonReason, "why the run is ended, recorded as its terminal_reason")
	return cmd
}

// printAbandoned prints abandon's three lines (cli.md §4.4). Runs are
// started by workflow id in this design, so the way to run the same work
// again is realm run start, not a source directory.
func (a *app) printAbandoned(before *realmv1.RunState, resp *realmv1.AbandonRunResponse) error {
	out := a.env.Stdout
	id := resp.GetRunId()
	first := fmt.Sprintf("Run '%s' abandoned (phase: '%s'). Reason: %s.", id, reply.PhaseWord(resp.GetRunPhase()), strings.TrimSuffix(resp.GetTerminalReason(), "."))
	if before.GetRunPhase() == realmv1.RunPhase_RUN_PHASE_ABANDONED {
		first += " Already abandoned (no change this call)."
	}
	fmt.Fprintln(out, first)
	params, err := paramsJSON(before.GetParams().AsMap())
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "To run the same work again: realm run start %s --params %s — a fresh run; this run's evidence stays at realm run inspect %s.\n",
		before.GetWorkflowId(), shellQuote(params), id)
	if note := strings.TrimPrefix(resp.GetNote(), alreadyAbandonedNote); note != "" {
		fmt.Fprintln(out, note)
	}
	return nil
}

// paramsJSON writes a run's params as one line of JSON, keys sorted, with
// no HTML escaping.
func paramsJSON(m map[string]any) (string, error) {
	if m == nil {
		m = map[string]any{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return "", refuse("Error: cannot print the run's params as JSON: %v", err)
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// shellQuote single-quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
