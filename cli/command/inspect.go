package command

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// runInspectCommand is `realm run inspect <run> [--verbose]`: the engine
// renders the report (cli.md §3.2); the command prints it.
func (a *app) runInspectCommand() *cobra.Command {
	var verbose, drift bool
	cmd := &cobra.Command{
		Use:   "inspect <run>",
		Short: "Show a run as a person reads it: phase, steps, gate, health, evidence",
		Long: "Show a run as a person reads it: phase, steps, gate, health, evidence.\n\n" +
			"--check-drift compares the project code a run recorded with the code on disk. Handlers\n" +
			"here run in handler runners, outside the engine, so no run records an extension\n" +
			"identity: the check says so, and never loads anything.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			engine, ctx, done, err := a.session(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := engine.InspectRun(ctx, &realmv1.InspectRunRequest{RunId: args[0], Verbose: verbose})
			if err != nil {
				return a.rpcError(err)
			}
			fmt.Fprintln(a.env.Stdout, strings.TrimRight(resp.GetText(), "\n"))
			if drift {
				fmt.Fprintln(a.env.Stdout, "Drift check: no extension identity recorded for this run.")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&verbose, "verbose", false, "show tool-call arguments and results")
	cmd.Flags().BoolVar(&drift, "check-drift", false, "compare the run's recorded extension identity with the files on disk")
	return cmd
}
