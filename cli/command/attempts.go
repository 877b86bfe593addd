package command

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// attemptRecord is one line of the refused-attempts sidecar
// (run-record.md §8.1): metadata about an agent answer the engine refused,
// never the submitted values.
type attemptRecord struct {
	RunID                  string                 `json:"run_id"`
	WorkflowID             string                 `json:"workflow_id"`
	StepID                 string                 `json:"step_id"`
	TS                     string                 `json:"ts"`
	ErrorCode              string                 `json:"error_code"`
	ValidationErrorSummary []attemptValidationErr `json:"validation_error_summary"`
	SubmittedKeyCount      int                    `json:"submitted_key_count"`
}

type attemptValidationErr struct {
	InstancePath string `json:"instancePath"`
	Keyword      string `json:"keyword"`
}

// attemptsBundle is the part of the export bundle (run-record.md §9) this
// command reads: the sidecar records, oldest first, and whether the
// sidecar hit its cap.
type attemptsBundle struct {
	Attempts       []json.RawMessage `json:"attempts"`
	AttemptsCapped bool              `json:"attempts_capped"`
}

// runAttemptsCommand is `realm run attempts <run> [--json]` (cli.md §3.3):
// the refused agent answers of a run. engine-svc has no RPC of its own for
// the sidecar; ExportRun carries it (`attempts`, `attempts_capped`), so the
// command reads the bundle and prints only that part.
func (a *app) runAttemptsCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "attempts <run>",
		Short: "List the agent answers a run refused (metadata only)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			runID := args[0]
			engine, ctx, done, err := a.session(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			var bundle attemptsBundle
			resp, err := engine.ExportRun(ctx, &realmv1.ExportRunRequest{RunId: runID})
			switch {
			case runNotFound(err):
				// cli.md §1.3 / §3.3: an unknown run is not an error here; it
				// has no failed attempts, like any run without a sidecar.
			case err != nil:
				return a.rpcError(err)
			default:
				if err := json.Unmarshal(resp.GetBundle(), &bundle); err != nil {
					return refuse("Error: cannot read the export of run %s: %v", runID, err)
				}
			}
			if bundle.Attempts == nil {
				bundle.Attempts = []json.RawMessage{}
			}
			if asJSON {
				// Records are passed through verbatim: the sidecar's fields
				// (run-record.md §8.1) are the contract, not this CLI's struct.
				return printJSON(a.env.Stdout, struct {
					Records []json.RawMessage `json:"records"`
					Capped  bool              `json:"capped"`
				}{bundle.Attempts, bundle.AttemptsCapped})
			}
			if len(bundle.Attempts) == 0 {
				fmt.Fprintf(a.env.Stdout, "No failed attempts recorded for run %s.\n", runID)
				return nil
			}
			fmt.Fprintf(a.env.Stdout, "Failed attempts for run %s (%d):\n\n", runID, len(bundle.Attempts))
			for _, raw := range bundle.Attempts {
				var rec attemptRecord
				if err := json.Unmarshal(raw, &rec); err != nil {
					// One unreadable record does not hide the others
					// (cli.md is silent; an operator wants the rest).
					fmt.Fprintf(a.env.Stdout, "(unreadable record: %s)\n", oneLine(err.Error()))
					continue
				}
				fmt.Fprintln(a.env.Stdout, attemptLine(rec))
			}
			if bundle.AttemptsCapped {
				// cli.md §3.3 leaves the wording open (§10 item 6).
				fmt.Fprintf(a.env.Stdout, "\nNote: the attempts file reached its size cap; only the first %d attempts were kept, later attempts were dropped.\n", len(bundle.Attempts))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"records": [...], "capped": <bool>}`)
	return cmd
}

// attemptLine renders one record as
// `<ts>  <step>  <error_code>  <k> key(s)  <keyword> <instancePath>[ (+N more)]`.
// "key(s)" is printed literally as cli.md shows it. A record with no
// validation summary ends after the key count; a root instancePath ("")
// prints as "(root)" so the line does not end in a bare space (cli.md is
// silent on both).
func attemptLine(r attemptRecord) string {
	parts := []string{r.TS, r.StepID, r.ErrorCode, fmt.Sprintf("%d key(s)", r.SubmittedKeyCount)}
	if len(r.ValidationErrorSummary) > 0 {
		first := r.ValidationErrorSummary[0]
		path := first.InstancePath
		if path == "" {
			path = "(root)"
		}
		v := first.Keyword + " " + path
		if n := len(r.ValidationErrorSummary) - 1; n > 0 {
			v += fmt.Sprintf(" (+%d more)", n)
		}
		parts = append(parts, v)
	}
	return strings.Join(parts, "  ")
}

// runNotFound reports whether the engine answered "no such run" (by the
// code in the status details).
func runNotFound(err error) bool {
	e, ok := errcode.FromStatus(err)
	return ok && e.Code == errcode.StateRunNotFound
}
