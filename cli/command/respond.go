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

func (a *app) runRespondCommand() *cobra.Command {
	var gate, choice, by string
	cmd := &cobra.Command{
		Use:   "respond <run> --gate <id> --choice <c> [--by <name>]",
		Short: "Answer a run's open human gate",
		Long: "Record a gate answer (nothing is prompted). Guards the answer makes ready are decided\n" +
			"in the same write; auto steps it makes ready are owed to realm run advance.\n" +
			"Exit 0 when the answer is recorded (even if a guard then ended the run), 1 on a refusal.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Both names are checked before the run is read (cli.md §4.1).
			var respondedBy *string
			if cmd.Flags().Changed("by") {
				if why := byProblem(by); why != "" {
					return refuse("--by: %s; nothing was recorded. Give a name of at most %d characters with no control characters, or leave it out.", why, maxNameLen)
				}
				respondedBy = &by
			}
			caller, err := a.respondCaller()
			if err != nil {
				return err
			}
			resp, err := call(a, cmd.Context(), func(ctx context.Context, e realmv1.EngineServiceClient) (*realmv1.SubmitHumanResponseResponse, error) {
				return e.SubmitHumanResponse(ctx, &realmv1.SubmitHumanResponseRequest{
					RunId: args[0], GateId: gate, Choice: choice, RespondedBy: respondedBy, Caller: caller,
				})
			})
			if err != nil {
				return err
			}
			return a.printResponded(args[0], choice, resp.GetReply())
		},
	}
	cmd.Flags().StringVar(&gate, "gate", "", "the open gate's id (required)")
	cmd.Flags().StringVar(&choice, "choice", "", "one of the gate's choices (required)")
	cmd.Flags().StringVar(&by, "by", "", "who answered, recorded verbatim (at most 200 characters)")
	_ = cmd.MarkFlagRequired("gate")
	_ = cmd.MarkFlagRequired("choice")
	return cmd
}

// byProblem says why a --by name cannot be recorded, or "" when it can.
func byProblem(name string) string {
	if strings.TrimSpace(name) == "" {
		return "empty"
	}
	return nameProblem(name)
}

// respondCaller is caller with respond's wording for a bad REALM_OPERATOR:
// respond records an answer, so "nothing was recorded" (cli.md §4.1).
func (a *app) respondCaller() (*realmv1.Caller, error) {
	if op := strings.TrimSpace(a.env.Getenv(operatorEnv)); op != "" {
		if why := nameProblem(op); why != "" {
			return nil, refuse("%s: %s, so nothing was recorded. Unset it or give it a name of at most %d characters with no control characters.", operatorEnv, why, maxNameLen)
		}
	}
	return a.caller()
}

// printResponded prints respond's lines for the engine's reply and picks
// the exit code.
func (a *app) printResponded(runID, choice string, r *realmv1.Reply) error {
	if r == nil {
		return refuse("Error: engine-svc sent an empty reply.")
	}
	if r.GetRunId() != "" {
		runID = r.GetRunId()
	}
	if r.AnswerRecorded != nil && !r.GetAnswerRecorded() {
		return a.printLateAnswer(runID, r)
	}
	if !succeeded(r) {
		return refuse("%s", replyMessage(r))
	}
	out := a.env.Stdout
	printLines(out, guardLines(r))
	fmt.Fprintf(out, "Responded: %s | choice '%s' | new state '%s'\n", runID, choice, reply.PhaseWord(r.GetRunPhase()))
	if owed := owedSteps(r.GetNextActions()); len(owed) > 0 {
		fmt.Fprintln(out, owedLine(runID, owed))
	} else if !reply.Terminal(r.GetRunPhase()) && len(r.GetNextActions()) == 0 {
		fmt.Fprintf(out, "To end the run instead: realm run abandon %s.\n", runID)
	}
	return nil
}

// printLateAnswer prints an answer that came after its gate's time was up:
// never recorded. A choice matching the settled one succeeds (stdout, exit
// 0); any other is a refusal, all of it on stderr (cli.md §4.1).
func (a *app) printLateAnswer(runID string, r *realmv1.Reply) error {
	ok := succeeded(r)
	out := a.env.Stdout
	if !ok {
		out = a.env.Stderr
	}
	for _, w := range r.GetWarnings() {
		fmt.Fprintln(out, "⚠ "+w)
	}
	guards := guardLines(r)
	if ok {
		// The hint ends with the guard sentence the guard lines below
		// repeat; print it once.
		hint := r.GetContextHint()
		for _, g := range guards {
			if strings.HasSuffix(hint, g) {
				hint = strings.TrimSpace(strings.TrimSuffix(hint, g))
				break
			}
		}
		if hint != "" {
			fmt.Fprintln(out, hint)
		}
	} else {
		fmt.Fprintln(out, replyMessage(r))
	}
	printLines(out, guards)
	if c := r.GetErrorDetails().GetFields()["winning_choice"].GetStringValue(); c != "" {
		fmt.Fprintf(out, "Not recorded: %s | gate settled by timeout with choice '%s' | state '%s'\n", runID, c, reply.PhaseWord(r.GetRunPhase()))
	}
	if ok {
		return nil
	}
	return &exitError{code: ExitRefused}
}

// succeeded is true for the statuses that end a command with exit 0.
func succeeded(r *realmv1.Reply) bool {
	switch r.GetStatus() {
	case realmv1.ReplyStatus_REPLY_STATUS_OK, realmv1.ReplyStatus_REPLY_STATUS_CONFIRM_REQUIRED:
		return true
	}
	return false
}

func printLines(w io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// guardLines are the lines for the guards a call decided (reply.guards),
// with the one that ended the run told as ended_by says.
func guardLines(r *realmv1.Reply) []string {
	ended := r.GetEndedBy()
	endedHere := func(step string) bool { return ended != nil && ended.GetStep() == step }
	var lines []string
	for _, g := range r.GetGuards() {
		step := g.GetStep()
		switch g.GetOutcome() {
		case "pass":
			if endedHere(step) && ended.GetArm() == "guard_pass_complete" {
				lines = append(lines, fmt.Sprintf("Guard step '%s' passed and completed the run.", step))
			} else {
				lines = append(lines, fmt.Sprintf("Guard step '%s' passed.", step))
			}
		case "abort":
			lines = append(lines, fmt.Sprintf("Guard step '%s' aborted the run.", step))
			if endedHere(step) && ended.GetReason() != "" {
				lines = append(lines, "Reason: "+ended.GetReason())
			}
		case "resolution_error":
			lines = append(lines, fmt.Sprintf("Guard step '%s' failed with a resolution error. Run is terminated.", step))
		}
	}
	return lines
}

// owedSteps names the steps the engine owes, from the advance_run entry of
// next_actions.
func owedSteps(actions []*realmv1.NextAction) []string {
	for _, na := range actions {
		if na.GetInstruction().GetTool() == "advance_run" && len(na.GetOwedSteps()) > 0 {
			return na.GetOwedSteps()
		}
	}
	return nil
}

// quoted writes names as 'a', 'b'.
func quoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	return strings.Join(q, ", ")
}

// owedLine is cli.md §1.8's engine-owed line.
func owedLine(runID string, steps []string) string {
	pronoun := "them"
	if len(steps) == 1 {
		pronoun = "it"
	}
	return fmt.Sprintf("Owed to the engine: %s — realm run advance %s runs %s from this shell.", quoted(steps), runID, pronoun)
}
