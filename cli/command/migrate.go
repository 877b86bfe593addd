package command

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// ExitResidue is `realm run migrate --stamp-seals --detailed-exitcode`'s
// "succeeded, residue remains" (cli.md §1.4).
const ExitResidue = 2

// stampOrderNote is printed whenever seals are (or would be) stamped.
const stampOrderNote = "Run `realm run migrate --stamp-seals` BEFORE `realm run gc --heal` after upgrading across #367 if retention clocks matter: heal rewrites the same records and resets updated_at, which this command deliberately preserves."

// runMigrateCommand is `realm run migrate --stamp-seals` (cli.md §4.11).
func (a *app) runMigrateCommand() *cobra.Command {
	var stampSeals, force, detailed bool
	cmd := &cobra.Command{
		Use:   "migrate --stamp-seals [--force] [--detailed-exitcode]",
		Short: "Stamp the seal arm on ended runs recorded before seals existed",
		Long: "Works out, from each ended run's record, the seal arm (sealed_by) of runs written before seals existed\n" +
			"and stamps it (classified: true) through the engine's write path: version rises, updated_at is kept.\n" +
			"Runs already sealed are checked against their record; arms that disagree are listed, never rewritten;\n" +
			"runs whose arm cannot be worked out are listed, never written. Dry run unless --force.\n" +
			"Exit 0 (also with residue); 1 when a write failed or without --stamp-seals; with --detailed-exitcode,\n" +
			"2 when residue (unstamped or incoherent runs) remains.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !stampSeals {
				return refuse("realm run migrate needs --stamp-seals (its only migration). See what it would stamp: realm run migrate --stamp-seals")
			}
			resp, err := call(a, cmd.Context(), func(ctx context.Context, e realmv1.EngineServiceClient) (*realmv1.StampSealsResponse, error) {
				return e.StampSeals(ctx, &realmv1.StampSealsRequest{Force: force})
			})
			if err != nil {
				return err
			}
			residue := printStamps(a.env.Stdout, resp, force)
			switch {
			case len(resp.GetFailed()) > 0:
				return &exitError{code: ExitRefused}
			case detailed && (residue > 0 || len(resp.GetIncoherent()) > 0):
				return &exitError{code: ExitResidue}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&stampSeals, "stamp-seals", false, "stamp the seal arm on ended runs lacking one (required)")
	cmd.Flags().BoolVar(&force, "force", false, "actually stamp (default: dry run)")
	cmd.Flags().BoolVar(&detailed, "detailed-exitcode", false, "exit 2 when residue remains")
	return cmd
}

// printStamps prints the buckets and returns the residue: unclassifiable
// runs and failed writes, plus, in a dry run, the runs it would stamp.
func printStamps(out io.Writer, resp *realmv1.StampSealsResponse, force bool) int {
	stamped := resp.GetStamped()
	residue := len(resp.GetUnclassifiable()) + len(resp.GetFailed())
	switch {
	case len(stamped) == 0 && residue == 0:
		fmt.Fprintln(out, "Nothing would be stamped — every terminal run already carries its seal arm.")
	case force:
		fmt.Fprintf(out, "Stamped %d run(s) with their seal arm.\n", len(stamped))
	default:
		residue += len(stamped)
		fmt.Fprintf(out, "%d run(s) WOULD be stamped:\n", len(stamped))
	}
	for _, s := range stamped {
		fmt.Fprintf(out, "  • %s: %s (phase %s)\n", s.GetRunId(), s.GetArm(), s.GetPhase())
	}
	if !force && len(stamped) > 0 {
		fmt.Fprintln(out, "Re-run with --force to actually stamp.")
	}
	if n := resp.GetAgreeing(); n > 0 || len(stamped) == 0 {
		fmt.Fprintf(out, "%d run(s) already stamped, and their arms agree with the record.\n", n)
	}
	if n := resp.GetRuled(); n > 0 {
		fmt.Fprintf(out, "%d run(s) already stamped by an operator's ruling (not checked).\n", n)
	}
	if n := resp.GetUnverifiable(); n > 0 {
		fmt.Fprintf(out, "%d run(s) already stamped with an arm their record cannot confirm (unverifiable).\n", n)
	}
	findings(out, resp.GetUnclassifiable(), "%d ended run(s) could not be classified (left unstamped):", func(f *realmv1.SealFinding) string {
		return fmt.Sprintf("%s (phase %s): %s", f.GetRunId(), f.GetPhase(), f.GetNote())
	})
	findings(out, resp.GetIncoherent(), "%d run(s) carry an arm that disagrees with the record (never rewritten):", func(f *realmv1.SealFinding) string {
		return fmt.Sprintf("%s: %s (phase %s) — %s", f.GetRunId(), f.GetArm(), f.GetPhase(), f.GetNote())
	})
	findings(out, resp.GetSkipped(), "%d run(s) skipped — written by another process meanwhile; run this again:", func(f *realmv1.SealFinding) string {
		return f.GetRunId()
	})
	findings(out, resp.GetFailed(), "%d run(s) failed to stamp:", func(f *realmv1.SealFinding) string {
		return fmt.Sprintf("%s: %s", f.GetRunId(), oneLine(f.GetNote()))
	})
	fmt.Fprintf(out, "Residue: %d terminal run(s) still without a recorded seal arm.\n", residue)
	if len(stamped) > 0 {
		fmt.Fprintln(out, stampOrderNote)
	}
	return residue
}

// findings prints a header and one bullet per finding (nothing when none).
func findings(out io.Writer, list []*realmv1.SealFinding, header string, line func(*realmv1.SealFinding) string) {
	if len(list) == 0 {
		return
	}
	fmt.Fprintf(out, header+"\n", len(list))
	for _, f := range list {
		fmt.Fprintf(out, "  • %s\n", line(f))
	}
}

// runReconcileCommand is `realm run reconcile` (cli.md §4.10).
func (a *app) runReconcileCommand() *cobra.Command {
	var workflow string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "reconcile [--workflow <id>] [--dry-run]",
		Short: "Rebuild idempotency-key pointers from the run records",
		Long: "Rebuilds every idempotency-key pointer (the Redis key naming the run that holds a key) from the run\n" +
			"records: one key within one workflow is a key group, and its pointer names the newest run holding it.\n" +
			"A pointer is written only if it still holds what was read. Groups shared by several runs (after a\n" +
			"rerun) are listed. Exit 0.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			resp, err := call(a, cmd.Context(), func(ctx context.Context, e realmv1.EngineServiceClient) (*realmv1.ReconcileKeysResponse, error) {
				return e.ReconcileKeys(ctx, &realmv1.ReconcileKeysRequest{WorkflowId: workflow, DryRun: dryRun})
			})
			if err != nil {
				return err
			}
			out := a.env.Stdout
			verb := "Wrote"
			if dryRun {
				verb = "Would write"
			}
			fmt.Fprintf(out, "%s %d pointer(s) across %d key group(s); %d already current.\n", verb, resp.GetWritten(), resp.GetGroups(), resp.GetCurrent())
			if d := resp.GetDuplicates(); len(d) > 0 {
				fmt.Fprintf(out, "Duplicate-key groups: %d\n", len(d))
				for _, g := range d {
					fmt.Fprintf(out, "  - workflow '%s' → canonical %s; other runs: %s\n", g.GetWorkflowId(), g.GetCanonical(), strings.Join(g.GetOthers(), ", "))
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&workflow, "workflow", "", "only this workflow's keys")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would be written; change nothing")
	return cmd
}

// workflowMigrateCommand is `realm workflow migrate` (cli.md §2.8).
func (a *app) workflowMigrateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Add origin: human to stored workflows that lack an origin",
		Long: "Adds origin: human to every stored copy of a workflow that has no origin (copies registered before\n" +
			"origins were recorded). The store keeps every registered version: each is brought up to date in\n" +
			"place, and a workflow counts as migrated when any of its versions was. Idempotent. Exit 0.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			resp, err := call(a, cmd.Context(), func(ctx context.Context, e realmv1.EngineServiceClient) (*realmv1.MigrateWorkflowsResponse, error) {
				return e.MigrateWorkflows(ctx, &realmv1.MigrateWorkflowsRequest{})
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.env.Stdout, "Done. %d migrated, %d already up to date.\n", resp.GetMigrated(), resp.GetUpToDate())
			return nil
		},
	}
}
