package command

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// gcFloor is the youngest residue gc reaps (cli.md §4.9).
const gcFloor = time.Hour

// runGcCommand is `realm run gc` (cli.md §4.9) on the Redis store: the
// original swept crash residue from its runs folder; here the residue is
// what a run leaves in Redis once its document is gone.
func (a *app) runGcCommand() *cobra.Command {
	var olderThan string
	var heal, force bool
	cmd := &cobra.Command{
		Use:   "gc --older-than <duration> [--heal] [--force] | gc --heal [--force]",
		Short: "Sweep run-less residue from the store; --heal rewrites runs whose stored phase disagrees",
		Long: "Crash-residue sweeper for the Redis store. Dry run unless --force.\n\n" +
			"--older-than <duration> (at least 1h) reaps run-less residue: a run's outputs hash (step outputs and\n" +
			"trace buffers), its evidence list, its entries in the run and timer indexes, and idempotency keys\n" +
			"still naming it — once the run document itself is gone (a purge leaves its key pointer; eviction or a\n" +
			"hand in redis-cli leaves the rest). Residue whose age the store knows (the last evidence entry, the\n" +
			"run index score) must be at least that old; the rest has no age and is reaped whatever the threshold:\n" +
			"every write is one atomic script, so residue is never a write in flight.\n\n" +
			"--heal rewrites, through the engine's write path, every run whose stored run_phase differs from the\n" +
			"phase its record derives, or that is missing from the run index or sits wrongly in a timer index\n" +
			"(version rises, updated_at is reset). No age limit. One unreadable run document aborts heal.\n\n" +
			"Both walk the store a page at a time (runs and keys, never the whole store at once); when it took more\n" +
			"than one page, how many runs and pages were read goes to stderr.\n\n" +
			"The file store's .tmp files and .lock directories have no Redis counterpart (writes are atomic\n" +
			"scripts), so their lines are not printed. Exit 0; 1 when something could not be reaped or healed,\n" +
			"for a bad duration, or for a threshold under 1h.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sweep := cmd.Flags().Changed("older-than")
			if !sweep && !heal {
				return refuse("--older-than <duration> is required (at least 1h, e.g. 30d, 6h) unless --heal is given alone.")
			}
			var age time.Duration
			if sweep {
				var err error
				if age, err = parseDuration(olderThan); err != nil {
					return err
				}
				if age < gcFloor {
					return refuse("--older-than must be at least 1h (got '%s'). gc refuses to reap crash residue younger than that, even with --force.", olderThan)
				}
			}
			resp, err := call(a, cmd.Context(), func(ctx context.Context, e realmv1.EngineServiceClient) (*realmv1.GcRunsResponse, error) {
				return e.GcRuns(ctx, &realmv1.GcRunsRequest{Sweep: sweep, OlderThanSeconds: int64(age.Seconds()), Heal: heal, Force: force})
			})
			if err != nil {
				return err
			}
			out := a.env.Stdout
			reportWalk(a.env.Stderr, int64(resp.GetRunsScanned()), int64(resp.GetPages()), int64(resp.GetLargestPage()))
			if sweep {
				printSweep(out, resp, force)
			}
			if heal {
				if sweep {
					fmt.Fprintln(out)
				}
				printHeal(out, resp, force)
			}
			for _, f := range resp.GetFailures() {
				fmt.Fprintf(out, "  ⚠ %s\n", oneLine(f))
			}
			if resp.GetReapFailed() > 0 || resp.GetHealFailed() > 0 {
				return &exitError{code: ExitRefused}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&olderThan, "older-than", "", "reap run-less residue at least this old where its age is known (e.g. 30d, 6h; at least 1h)")
	cmd.Flags().BoolVar(&heal, "heal", false, "rewrite runs whose stored phase or index membership disagrees with the record")
	cmd.Flags().BoolVar(&force, "force", false, "actually delete and rewrite (default: dry run)")
	return cmd
}

func printSweep(out io.Writer, resp *realmv1.GcRunsResponse, force bool) {
	res := resp.GetResidue()
	switch {
	case len(res) == 0:
		fmt.Fprintln(out, "No run-less orphaned WAL/sidecar artifacts found to reap.")
		return
	case force:
		fmt.Fprintf(out, "Reaped %d run-less orphaned artifact(s). %d already gone, %d failed.\n", resp.GetReaped(), resp.GetReapGone(), resp.GetReapFailed())
	default:
		fmt.Fprintf(out, "%d run-less orphaned artifact(s) WOULD be reaped:\n", len(res))
	}
	for _, r := range res {
		fmt.Fprintf(out, "  • %s  (run %s)\n", r.GetKey(), r.GetRunId())
	}
	if !force {
		fmt.Fprintln(out, "Re-run with --force to actually delete.")
	}
}

func printHeal(out io.Writer, resp *realmv1.GcRunsResponse, force bool) {
	stale := resp.GetStale()
	switch {
	case len(stale) == 0:
		fmt.Fprintln(out, "No stale-phase records found to heal.")
		return
	case force:
		fmt.Fprintf(out, "Healed %d stale-phase record(s). %d already gone, %d failed.\n", resp.GetHealed(), resp.GetHealGone(), resp.GetHealFailed())
	default:
		fmt.Fprintf(out, "%d stale-phase record(s) WOULD be healed:\n", len(stale))
	}
	for _, s := range stale {
		fmt.Fprintf(out, "  • %s: %s\n", s.GetRunId(), strings.Join(s.GetReasons(), "; "))
	}
	if !force {
		fmt.Fprintln(out, "Re-run with --force to actually heal.")
	}
}
