package command

import (
	"fmt"

	"github.com/spf13/cobra"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// cleanupNote follows a cleanup that marks runs: cleanup abandons, and
// abandon is a kill (the engine's abandon note, word for word).
const cleanupNote = "abandon is a kill — declared finalizers (if any) did NOT run and will not for this run. The graceful path is the workflow's own guard step (abort_unless), which runs them; there is no operator abort command."

// runCleanupCommand is `realm run cleanup --older-than <duration>
// [--dry-run]` (cli.md §4.5): abandons every open run idle (by updated_at)
// for at least the duration, skipping gate_waiting runs. The engine decides
// each again in its abandon write (cleanup_idle_seconds), so a run that
// moved since the listing is left alone and not counted.
func (a *app) runCleanupCommand() *cobra.Command {
	var olderThan string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "cleanup --older-than <duration> [--dry-run]",
		Short: "Abandon every open run idle for at least the duration (skips runs waiting on a gate)",
		Long: "Abandon every open run whose last write is at least --older-than ago (e.g. 30d, 6h, 10m);\n" +
			"runs waiting on a gate are skipped. Abandoned runs are sealed 'cleanup_sweep'. Finalizers do not run.\n" +
			"Exit 0 (also when nothing matches), 1 for a bad duration.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("older-than") {
				return refuse("--older-than <duration> is required (e.g. 30d, 6h, 10m).")
			}
			idle, err := parseDuration(olderThan)
			if err != nil {
				return err
			}
			if idle <= 0 {
				return refuse("Invalid duration '%s'. Use format: <number>(d|h|m), e.g. 30d, 6h, 10m", olderThan)
			}
			runs, err := a.listRuns(cmd.Context(), &realmv1.ListRunsRequest{Phase: realmv1.RunPhase_RUN_PHASE_RUNNING})
			if err != nil {
				return err
			}
			cutoff := a.env.Now().Add(-idle)
			var picked []string
			for _, r := range runs {
				if r.GetGateStep() == "" && !r.GetUpdatedAt().AsTime().After(cutoff) {
					picked = append(picked, r.GetRunId())
				}
			}
			if !dryRun && len(picked) > 0 {
				if picked, err = a.cleanup(cmd, picked, int64(idle.Seconds())); err != nil {
					return err
				}
			}
			out := a.env.Stdout
			if dryRun {
				fmt.Fprintf(out, "Would mark %d run(s) as abandoned.\n", len(picked))
			} else {
				fmt.Fprintf(out, "Marked %d run(s) as abandoned.\n", len(picked))
			}
			for _, id := range picked {
				fmt.Fprintf(out, "  • %s\n", id)
			}
			if len(picked) > 0 {
				fmt.Fprintln(out, cleanupNote)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&olderThan, "older-than", "", "idle for at least this long, by last write (e.g. 30d, 6h, 10m); required")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be abandoned; change nothing")
	return cmd
}

// cleanup abandons each run with the cleanup seal and returns the ones the
// engine marked (a run it refused — written meanwhile, or now waiting on a
// gate — is left out).
func (a *app) cleanup(cmd *cobra.Command, runs []string, idleSeconds int64) ([]string, error) {
	caller, err := a.caller()
	if err != nil {
		caller = &realmv1.Caller{Channel: realmv1.Channel_CHANNEL_RUN}
	}
	engine, ctx, done, err := a.session(cmd.Context())
	if err != nil {
		return nil, err
	}
	defer done()
	var marked []string
	for _, id := range runs {
		resp, err := engine.AbandonRun(ctx, &realmv1.AbandonRunRequest{RunId: id, CleanupIdleSeconds: idleSeconds, Caller: caller})
		if err != nil {
			return marked, a.rpcError(err)
		}
		if resp.GetRefusal() == nil {
			marked = append(marked, id)
		}
	}
	return marked, nil
}
