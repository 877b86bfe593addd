package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
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
	var step string
	var force bool
	cmd := &cobra.Command{
		Use:   "reclaim <run>",
		Short: "Free a claimed step that never finished, so it can run again",
		Long: "Without --step, report the run's claims. With --step <name> --force, free that claim:\n" +
			"the step runs again (at-least-once — its side effects may repeat). Runs no step.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if force && step == "" {
				return refuse("--force requires --step <name> (or use --all for batch). Run without arguments to see a dry-run.")
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
			resp, err := engine.ReclaimRun(ctx, &realmv1.ReclaimRunRequest{RunId: args[0], Step: step, Force: force, Caller: caller})
			if err != nil {
				return a.rpcError(err)
			}
			return a.printOperatorReply(resp.GetReply())
		},
	}
	cmd.Flags().StringVar(&step, "step", "", "the claimed step to free")
	cmd.Flags().BoolVar(&force, "force", false, "act (without it, nothing changes)")
	return cmd
}

func (a *app) runDrainCommand() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "drain <run>",
		Short: "Run the cleanup steps (finalizers) an ended run still owes",
		Args:  cobra.ExactArgs(1),
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
			resp, err := engine.DrainRun(ctx, &realmv1.DrainRunRequest{RunId: args[0], Force: force, Caller: caller})
			if err != nil {
				return a.rpcError(err)
			}
			r := resp.GetReply()
			if r.GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_ERROR {
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
	return cmd
}

func (a *app) runResumeCommand() *cobra.Command {
	var from string
	cmd := &cobra.Command{
		Use:   "resume <run> --from <step>",
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
			resp, err := engine.ResumeRun(ctx, &realmv1.ResumeRunRequest{RunId: args[0], FromStep: from, Caller: caller})
			if err != nil {
				return a.rpcError(err)
			}
			return a.printOperatorReply(resp.GetReply())
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the failed step to make runnable again")
	return cmd
}

func (a *app) runPurgeCommand() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "purge <run>",
		Short: "Delete an ended run and everything kept with it (a dry run without --force)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			engine, ctx, done, err := a.session(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			resp, err := engine.PurgeRun(ctx, &realmv1.PurgeRunRequest{RunId: args[0], Force: force})
			if err != nil {
				return a.rpcError(err)
			}
			if strings.HasPrefix(resp.GetMessage(), "Refusing") || strings.HasPrefix(resp.GetMessage(), "Run not found") {
				return refuse("%s", resp.GetMessage())
			}
			fmt.Fprintln(a.env.Stdout, resp.GetMessage())
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "delete (without it, say what would be removed)")
	return cmd
}

func (a *app) runExportCommand() *cobra.Command {
	var out string
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
			resp, err := engine.ExportRun(ctx, &realmv1.ExportRunRequest{RunId: args[0]})
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
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "file or directory to write (default ./<run-id>.realm.json)")
	return cmd
}
