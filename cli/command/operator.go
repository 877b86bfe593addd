package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/reply"
)

// The operator acts (cli.md §4.3, §4.6–§4.8, §3.6). The engine composes
// what each says; these commands print it and map refusals to exit 1.

// printOperatorReply prints a reply's text, or its refusal on stderr (exit 1).
func (a *app) printOperatorReply(r *realmv1.Reply) error {
	if r.GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_ERROR || r.GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_BLOCKED {
		if len(r.GetErrors()) > 0 {
			return refuse("%s", r.GetErrors()[0])
		}
		return refuse("%s", r.GetContextHint())
	}
	fmt.Fprintln(a.env.Stdout, strings.TrimRight(r.GetContextHint(), "\n"))
	return nil
}

func (a *app) runReclaimCommand() *cobra.Command {
	var step, workflowID, olderThan string
	var force, all bool
	cmd := &cobra.Command{
		Use:   "reclaim [<run>]",
		Short: "Free a claimed step that never finished, so it can run again",
		Long: "Without --step, report the run's claims. With --step <name> --force, free that claim:\n" +
			"the step runs again (at-least-once — its side effects may repeat). Runs no step.\n\n" +
			"With --all instead of a run, report every claim past its deadline (only those late by at\n" +
			"least --older-than, only runs of --workflow); with --all --force, free them all.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case all && len(args) > 0:
				return refuse("Cannot combine a <run-id> with --all. Use one or the other.")
			case all && step != "":
				return refuse("--step is a per-run flag; it cannot be combined with --all.")
			case !all && (cmd.Flags().Changed("workflow") || cmd.Flags().Changed("older-than")):
				return refuse("--workflow and --older-than are only valid with --all.")
			case !all && len(args) == 0:
				return refuse("Provide a <run-id> to inspect/reclaim, or use --all for batch mode.")
			case !all && force && step == "":
				return refuse("--force requires --step <name> (or use --all for batch). Run without arguments to see a dry-run.")
			}
			var minLate time.Duration
			if all && cmd.Flags().Changed("older-than") {
				d, err := parseDuration(olderThan)
				if err != nil {
					return err
				}
				minLate = d
			}
			caller, err := a.caller()
			if err != nil {
				return err
			}
			engine, ctx, done, err := a.session(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			if all {
				return a.reclaimAll(ctx, engine, caller, workflowID, minLate, force)
			}
			resp, err := a.reclaim(ctx, engine, caller, args[0], step, force, false)
			if err != nil {
				return err
			}
			return a.printOperatorReply(resp.GetReply())
		},
	}
	cmd.Flags().StringVar(&step, "step", "", "the claimed step to free")
	cmd.Flags().BoolVar(&force, "force", false, "act (without it, nothing changes)")
	cmd.Flags().BoolVar(&all, "all", false, "every claim past its deadline, across runs (batch mode)")
	cmd.Flags().StringVar(&workflowID, "workflow", "", "with --all: only runs of this workflow")
	cmd.Flags().StringVar(&olderThan, "older-than", "", "with --all: only claims at least this far past their deadline (e.g. 30m, 6h, 1d)")
	return cmd
}

// reclaim is one reclaim_run call, shared by the single-run form and --all.
// onlyIdempotent makes the engine refuse a step not declared idempotent.
func (a *app) reclaim(ctx context.Context, engine realmv1.EngineServiceClient, caller *realmv1.Caller, run, step string, force, onlyIdempotent bool) (*realmv1.ReclaimRunResponse, error) {
	resp, err := engine.ReclaimRun(ctx, &realmv1.ReclaimRunRequest{RunId: run, Step: step, Force: force, Caller: caller, OnlyIdempotent: onlyIdempotent})
	if err != nil {
		return nil, a.rpcError(err)
	}
	return resp, nil
}

// staleClaim is one claim --all selects: run, step and how late it is.
type staleClaim struct {
	run, step, deadline string
	late                time.Duration
}

// reclaimAll is `realm run reclaim --all` (cli.md §4.6). The runs are the
// ones `run list --stuck` finds; each run's stuck_claims (get_run_state)
// name its claims, and those of steps declared idempotent: true with a
// concrete deadline at least minLate past — never an open gate's, which
// the engine leaves out — are selected.
// With force each is freed by the single-run reclaim call.
func (a *app) reclaimAll(ctx context.Context, engine realmv1.EngineServiceClient, caller *realmv1.Caller, workflowID string, minLate time.Duration, force bool) error {
	list, err := engine.ListRuns(ctx, &realmv1.ListRunsRequest{WorkflowId: workflowID, Stuck: true})
	if err != nil {
		return a.rpcError(err)
	}
	now := a.env.Now()
	var picked []staleClaim
	for _, run := range list.GetRuns() {
		switch run.GetRunPhase() {
		case realmv1.RunPhase_RUN_PHASE_RUNNING, realmv1.RunPhase_RUN_PHASE_GATE_WAITING:
		default:
			continue // an ended run holds no reclaimable claim
		}
		st, err := engine.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: run.GetRunId()})
		if err != nil {
			return a.rpcError(err)
		}
		claims, _ := st.GetState().GetExtra().AsMap()["stuck_claims"].([]any)
		for _, c := range claims {
			m, _ := c.(map[string]any)
			s, _ := m["step"].(string)
			state, _ := m["state"].(string)
			deadline, _ := m["deadline"].(string)
			if s == "" || state != "claim_stale" || deadline == "" {
				continue // no concrete deadline: its liveness is unknown
			}
			d, err := time.Parse(time.RFC3339Nano, deadline)
			if err != nil {
				continue
			}
			late := now.Sub(d)
			if late < minLate || late <= 0 {
				continue
			}
			// Only steps declared idempotent: true are auto-reclaimed; the
			// engine says which (a reclaim without --force changes nothing).
			probe, err := a.reclaim(ctx, engine, caller, run.GetRunId(), s, false, true)
			if err != nil {
				return err
			}
			if probe.GetStepIdempotent() {
				picked = append(picked, staleClaim{run: run.GetRunId(), step: s, deadline: deadline, late: late})
			}
		}
	}
	sort.Slice(picked, func(i, j int) bool {
		if picked[i].late != picked[j].late {
			return picked[i].late > picked[j].late
		}
		if picked[i].run != picked[j].run {
			return picked[i].run < picked[j].run
		}
		return picked[i].step < picked[j].step
	})
	out := a.env.Stdout
	if len(picked) == 0 {
		fmt.Fprintln(out, "No auto-reclaimable claims found (idempotent ∧ concrete-past-deadline ∧ non-gated).")
		return nil
	}
	if !force {
		fmt.Fprintf(out, "%d claim(s) WOULD be auto-reclaimed (idempotent ∧ past-deadline ∧ non-gated):\n", len(picked))
		for _, c := range picked {
			fmt.Fprintf(out, "  • %s / %s  (deadline %s, %s past)\n", c.run, c.step, c.deadline, age(c.late))
		}
		fmt.Fprintln(out, "")
		fmt.Fprintln(out, "Re-run with --force to reclaim them. WARNING: each re-executes its handler at-least-once with NO per-step human judgment — enable only for genuinely idempotent handlers.")
		return nil
	}
	fmt.Fprintf(out, "⚠ Auto-reclaiming %d claim(s); each re-executes its handler — side effects may repeat.\n", len(picked))
	done := 0
	for _, c := range picked {
		resp, err := a.reclaim(ctx, engine, caller, c.run, c.step, true, true)
		if err != nil {
			var ee *exitError
			if errors.As(err, &ee) && ee.code == ExitRefused {
				fmt.Fprintf(out, "  ✗ %s: %s\n", c.run, ee.msg)
				continue
			}
			return err
		}
		r := resp.GetReply()
		if r.GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_ERROR || r.GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_BLOCKED {
			why := r.GetContextHint()
			if len(r.GetErrors()) > 0 {
				why = r.GetErrors()[0]
			}
			fmt.Fprintf(out, "  ✗ %s: %s\n", c.run, oneLine(why))
			continue
		}
		hint := strings.Split(strings.TrimRight(r.GetContextHint(), "\n"), "\n")
		fmt.Fprintf(out, "  ✓ %s: %s\n", c.run, hint[len(hint)-1])
		done++
	}
	fmt.Fprintf(out, "Reclaimed %d/%d selected claim(s).\n", done, len(picked))
	if done < len(picked) {
		return &exitError{code: ExitRefused}
	}
	return nil
}

func (a *app) runDrainCommand() *cobra.Command {
	var force, expired, all bool
	var void string
	cmd := &cobra.Command{
		Use:   "drain <run> [--force] [--expired] | drain <run> --void <finalizer> | drain --all [--force] [--expired] | drain --expired [--force]",
		Short: "Run the cleanup steps (finalizers) ended runs still owe; with --expired, carry out expired gates",
		Long: "With a run: say which finalizers it owes, and with --force lease and run them. --expired first\n" +
			"carries out its open gate whose time is up and that declares on_expiry (settle_default or abort);\n" +
			"--void <finalizer> marks one pending finalizer voided instead of running it (acts without --force).\n\n" +
			"With --all instead of a run: every ended run owing a finalizer no drainer holds, across the store;\n" +
			"with --expired (alone or with --all) also every open gate past its time first — a gate without\n" +
			"on_expiry is listed as a finding and never enacted. The store is walked a page at a time; each run is\n" +
			"listed as it is found, progress goes to stderr, and a summary ends the output. Dry run unless --force.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			run := ""
			if len(args) == 1 {
				run = args[0]
			}
			switch {
			case all && run != "":
				return refuse("Cannot combine a <run-id> with --all. Use one or the other.")
			case void != "" && run == "":
				return refuse("--void <finalizer> names a finalizer of one run: give the <run-id> (realm run drain <run-id> --void <finalizer>); it cannot be combined with --all.")
			case void != "" && (force || expired):
				return refuse("--void acts on its own (no --force needed); it cannot be combined with --force or --expired.")
			case run == "" && !all && !expired:
				return refuse("Provide a <run-id>, or use --all for batch mode.")
			}
			caller, err := a.caller()
			if err != nil {
				return err
			}
			if run == "" {
				return a.drainAll(cmd.Context(), caller, force, expired)
			}
			engine, ctx, done, err := a.session(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := engine.DrainRun(ctx, &realmv1.DrainRunRequest{RunId: run, Force: force, Caller: caller, Expired: expired, Void: void})
			if err != nil {
				return a.rpcError(err)
			}
			r := resp.GetReply()
			if r.GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_ERROR && void == "" {
				// A finalizer still owed after --force: say what ran, then why.
				fmt.Fprintln(a.env.Stdout, strings.TrimRight(r.GetContextHint(), "\n"))
				return refuse("%s", strings.Join(r.GetErrors(), " "))
			}
			if r.GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_BLOCKED && !force {
				// "not terminal — nothing to drain" is a report, not a refusal,
				// unless --force asked to act (cli.md §4.7).
				fmt.Fprintln(a.env.Stdout, r.GetContextHint())
				return nil
			}
			return a.printOperatorReply(r)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "act (without it, say what would run)")
	cmd.Flags().BoolVar(&expired, "expired", false, "also carry out open gates whose time is up and that declare on_expiry (without a run: every such gate, as --all --expired)")
	cmd.Flags().BoolVar(&all, "all", false, "every ended run owing a finalizer, across the store (batch mode)")
	cmd.Flags().StringVar(&void, "void", "", "mark this pending finalizer of the run voided instead of running it")
	return cmd
}

// drainAll is `realm run drain --all` / `--expired` without a run (cli.md
// §4.7): the engine walks the store and streams each run it selects.
func (a *app) drainAll(ctx context.Context, caller *realmv1.Caller, force, expired bool) error {
	out := a.env.Stdout
	if force {
		fmt.Fprintln(out, "Draining (each run is listed as it is done):")
	} else {
		fmt.Fprintln(out, "Runs that WOULD be drained (each listed as it is found):")
	}
	sum, err := a.readBatch(ctx, func(ctx context.Context, e realmv1.EngineServiceClient) (func() (*realmv1.OperatorEvent, error), error) {
		return events(e.DrainRuns(ctx, &realmv1.DrainRunsRequest{Force: force, Expired: expired, Caller: caller}))
	}, func(it *realmv1.OperatorItem) {
		switch it.GetOutcome() {
		case "would":
			if it.GetLine() == "" {
				fmt.Fprintf(out, "  • %s\n", it.GetRunId())
				return
			}
			fmt.Fprintf(out, "  • %s: %s\n", it.GetRunId(), it.GetLine())
		case "done":
			fmt.Fprintf(out, "  ✓ %s: %s\n", it.GetRunId(), it.GetLine())
		case "warned":
			fmt.Fprintf(out, "  • %s: %s\n", it.GetRunId(), it.GetLine())
		default:
			fmt.Fprintf(out, "  ✗ %s: %s\n", it.GetRunId(), orOutcome(it))
		}
	})
	if err != nil {
		return err
	}
	switch {
	case sum.GetSelected() == 0 && sum.GetWarned() == 0:
		fmt.Fprintln(out, "No runs with an actionable pending finalizer.")
	case !force:
		fmt.Fprintf(out, "%d run(s) WOULD be drained.\n", sum.GetSelected())
		fmt.Fprintln(out, "Re-run with --force to actually drain them.")
	default:
		fmt.Fprintf(out, "Drained %d/%d run(s).\n", sum.GetDone(), sum.GetSelected())
	}
	if sum.GetFailed() > 0 || (force && sum.GetDone() < sum.GetSelected()) {
		return &exitError{code: ExitRefused}
	}
	return nil
}

// orOutcome is an item's line, or its outcome when it has none.
func orOutcome(it *realmv1.OperatorItem) string {
	if it.GetLine() != "" {
		return it.GetLine()
	}
	return it.GetOutcome()
}

func (a *app) runResumeCommand() *cobra.Command {
	var from string
	var force bool
	cmd := &cobra.Command{
		Use:   "resume <run> --from <step> [--force]",
		Short: "Reopen a failed or abandoned run at one of its failed steps",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" {
				return refuse("--from <step> is required: the failed step to run again.")
			}
			caller, err := a.caller()
			if err != nil {
				return err
			}
			engine, ctx, done, err := a.session(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := engine.ResumeRun(ctx, &realmv1.ResumeRunRequest{RunId: args[0], FromStep: from, Caller: caller, Force: force})
			if err != nil {
				return a.rpcError(err)
			}
			return a.printOperatorReply(resp.GetReply())
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the failed step to make runnable again")
	cmd.Flags().BoolVar(&force, "force", false, "resume past a claim of unknown age on the step (only after confirming its runner is dead; a healthy claim is never overridden)")
	return cmd
}

func (a *app) runPurgeCommand() *cobra.Command {
	var force, dryRun bool
	var olderThan, workflowID string
	cmd := &cobra.Command{
		Use:   "purge <run> [--force] | purge --older-than <duration> [--workflow <id>] [--force | --dry-run]",
		Short: "Delete ended runs and everything kept with them (a dry run without --force)",
		Long: "With a run: delete that ended run (a dry run without --force).\n\n" +
			"With --older-than <duration> (e.g. 30d, 6h, 10m) instead: every ended run whose last write is at least\n" +
			"that old, of --workflow when given. Never an open run, never one with a healthy claim; one still owing a\n" +
			"finalizer is blocked (drain_pending); one with a claim of unknown age is skipped with a warning (name it to\n" +
			"purge it). The store is walked a page at a time; each run is listed as it is found, progress goes to\n" +
			"stderr, and a summary ends the output. Dry run unless --force (--dry-run says so explicitly).\n" +
			"Exit 1 when a deletion failed.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			batch := cmd.Flags().Changed("older-than")
			switch {
			case batch && len(args) > 0:
				return refuse("Cannot combine a <run-id> with --older-than. Use one or the other.")
			case !batch && len(args) == 0:
				return refuse("Provide a <run-id> to purge, or use --older-than for batch mode.")
			case !batch && cmd.Flags().Changed("workflow"):
				return refuse("--workflow is only valid with --older-than.")
			case force && dryRun:
				return refuse("--force and --dry-run contradict each other: --force deletes, --dry-run (the default) only lists. Use one.")
			}
			if batch {
				age, err := parseDuration(olderThan)
				if err != nil {
					return err
				}
				if age <= 0 {
					return refuse("Invalid duration '%s'. Use format: <number>(d|h|m), e.g. 30d, 6h, 10m", olderThan)
				}
				return a.purgeOlder(cmd.Context(), age, workflowID, force)
			}
			engine, ctx, done, err := a.session(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := engine.PurgeRun(ctx, &realmv1.PurgeRunRequest{RunId: args[0], Force: force})
			if err != nil {
				return a.rpcError(err)
			}
			if resp.GetRefusal() != realmv1.PurgeRefusal_PURGE_REFUSAL_UNSPECIFIED {
				return refuse("%s", resp.GetMessage())
			}
			fmt.Fprintln(a.env.Stdout, resp.GetMessage())
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "delete (without it, say what would be removed)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "with --older-than: only list what would be deleted (the default without --force)")
	cmd.Flags().StringVar(&olderThan, "older-than", "", "batch mode: ended runs whose last write is at least this old (e.g. 30d, 6h, 10m)")
	cmd.Flags().StringVar(&workflowID, "workflow", "", "with --older-than: only runs of this workflow")
	return cmd
}

// purgeOlder is `realm run purge --older-than` (cli.md §4.8): the engine
// walks the store and streams each ended run it selects.
func (a *app) purgeOlder(ctx context.Context, age time.Duration, workflowID string, force bool) error {
	out := a.env.Stdout
	sum, err := a.readBatch(ctx, func(ctx context.Context, e realmv1.EngineServiceClient) (func() (*realmv1.OperatorEvent, error), error) {
		return events(e.PurgeRuns(ctx, &realmv1.PurgeRunsRequest{OlderThanSeconds: int64(age.Seconds()), WorkflowId: workflowID, Force: force}))
	}, func(it *realmv1.OperatorItem) {
		phase := reply.PhaseWord(it.GetRunPhase())
		switch it.GetOutcome() {
		case "would":
			fmt.Fprintf(out, "  • %s  (%s, %d KB)\n", it.GetRunId(), phase, kb(it.GetSizeBytes()))
		case "done":
			fmt.Fprintf(out, "  ✓ %s  (%s, %d KB)\n", it.GetRunId(), phase, kb(it.GetSizeBytes()))
		case "gone":
			fmt.Fprintf(out, "  • %s: already gone\n", it.GetRunId())
		default:
			fmt.Fprintf(out, "  ⚠ %s: %s\n", it.GetRunId(), orOutcome(it))
		}
	})
	if err != nil {
		return err
	}
	n := sum.GetSelected()
	if n == 0 {
		fmt.Fprintln(out, "No eligible runs found to purge.")
		return nil
	}
	if !force {
		would := n - sum.GetBlocked() - sum.GetFailed()
		fmt.Fprintf(out, "%d run(s) WOULD be purged (%d KB to free).\n", would, kb(sum.GetSizeBytes()))
		if k := sum.GetResumable(); k > 0 {
			fmt.Fprintf(out, "%d of %d selected run(s) are resumable via 'realm run resume' — purging would destroy that path permanently.\n", k, n)
		} else {
			fmt.Fprintf(out, "None of the %d selected run(s) are resumable via 'realm run resume'.\n", n)
		}
		fmt.Fprintln(out, "Re-run with --force to actually delete.")
		return nil
	}
	fmt.Fprintf(out, "Purged %d/%d run(s) (%d KB freed, store-reported). %d already gone, %d blocked, %d failed.\n",
		sum.GetDone(), n, kb(sum.GetSizeBytes()), sum.GetGone(), sum.GetBlocked(), sum.GetFailed())
	if k := sum.GetResumable(); k > 0 {
		fmt.Fprintf(out, "%d of %d selected run(s) were resumable via 'realm run resume' — purging has destroyed that path for them.\n", k, n)
	}
	if sum.GetFailed() > 0 {
		return &exitError{code: ExitRefused}
	}
	return nil
}

// exportSummary is what the export's second line counts (cli.md §3.6).
type exportSummary struct {
	Run struct {
		RunPhase string `json:"run_phase"`
	} `json:"run"`
	Attempts []json.RawMessage          `json:"attempts"`
	WAL      map[string]json.RawMessage `json:"wal"`
	Sealed   map[string]json.RawMessage `json:"sealed"`
}

func (a *app) runExportCommand() *cobra.Command {
	var out string
	var withSecrets bool
	cmd := &cobra.Command{
		Use:   "export <run>",
		Short: "Write the whole record of a run as one JSON bundle",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target := args[0] + ".realm.json"
			if out != "" {
				target = out
				if fi, err := os.Stat(out); err == nil && fi.IsDir() {
					target = filepath.Join(out, args[0]+".realm.json")
				}
			}
			abs, err := filepath.Abs(target)
			if err != nil {
				return err
			}
			if _, err := os.Stat(abs); err == nil {
				return refuse("Refusing to overwrite existing file '%s'. Choose a different --out.", abs)
			} else if !errors.Is(err, os.ErrNotExist) {
				return err
			}
			engine, ctx, done, err := a.session(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := engine.ExportRun(ctx, &realmv1.ExportRunRequest{RunId: args[0], WithSecrets: withSecrets})
			if err != nil {
				return a.rpcError(err)
			}
			f, err := os.OpenFile(abs, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return refuse("Refusing to overwrite existing file '%s'. Choose a different --out.", abs)
			}
			if _, err := f.Write(resp.GetBundle()); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintf(a.env.Stdout, "Exported run '%s' to '%s' (%d KB).\n", args[0], abs, (len(resp.GetBundle())+1023)/1024)
			var b exportSummary
			if err := json.Unmarshal(resp.GetBundle(), &b); err == nil {
				fmt.Fprintf(a.env.Stdout, "  phase: %s, attempts: %d, WAL steps: %d, sealed artifacts: %d\n",
					b.Run.RunPhase, len(b.Attempts), len(b.WAL), len(b.Sealed))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "file or directory to write (default ./<run-id>.realm.json)")
	cmd.Flags().BoolVar(&withSecrets, "with-secrets", false, "keep the claim and lease tokens (whoever holds one may settle its step); left out by default")
	return cmd
}
