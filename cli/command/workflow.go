package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/source"
	"github.com/realm-go/realm/pkg/version"
)

// storedSchemaVersion is the registered-copy layout the engine writes
// (workflow.SchemaVersion). Kept here so the CLI does not link the loader.
const storedSchemaVersion = 1

func (a *app) workflowCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workflow",
		Short: "Validate, register and list workflows",
	}
	cmd.AddCommand(a.workflowInitCommand(), a.workflowValidateCommand(), a.workflowRegisterCommand(), a.workflowWatchCommand(), a.workflowListCommand(),
		a.workflowRunCommand(), a.workflowTestCommand(), a.workflowMigrateCommand())
	return cmd
}

func (a *app) workflowValidateCommand() *cobra.Command {
	var strict, asJSON, explain bool
	var registered string
	cmd := &cobra.Command{
		Use:   "validate <path> | --registered <id>",
		Short: "Check a workflow file without storing it",
		Long: "Check a workflow file (or the folder holding workflow.yaml) without storing it.\n" +
			"With --registered <id>, audit the stored copy of a registered workflow with today's\n" +
			"loader rules: what registering it again would say (runs keep using the stored copy).\n" +
			"Exit 0 when the workflow is accepted, 1 when it is refused.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case registered != "" && len(args) > 0:
				return refuse("Error: --registered <id> audits a stored definition; it cannot be combined with a path.")
			case registered != "":
				return a.validateRegistered(cmd.Context(), registered, strict, asJSON, explain)
			case len(args) == 0:
				return refuse("Error: provide a workflow path, or --registered <id> to audit a stored definition.")
			}
			return a.validate(cmd.Context(), args[0], strict, asJSON, explain)
		},
	}
	cmd.Flags().BoolVar(&explain, "explain", false, "one line per step that could use structured_output: strict, instead of the summary line")
	cmd.Flags().StringVar(&registered, "registered", "", "audit the registered copy of this workflow instead of a file")
	cmd.Flags().BoolVar(&strict, "strict", false, "any warning fails the check")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print exactly one JSON object on stdout")
	return cmd
}

func (a *app) validate(ctx context.Context, path string, strict, asJSON, explain bool) error {
	src, err := source.Read(path)
	if err != nil {
		return a.unreadable(path, strict, asJSON, err)
	}
	if err := a.check(ctx, src, "file", strict, asJSON); err != nil {
		return err
	}
	if !asJSON {
		a.nudge(src, explain)
	}
	return nil
}

// realmWritten are the fields the engine adds to a registered copy (and
// the loader's own bookkeeping): a file may not carry them, so an audit
// takes them off before the loader reads the copy.
var realmWritten = []string{"step_order", "extension_keys", "source_dir", "trust_root",
	"resolved_profiles", "resolved_context", "schema_version", "origin", "model", "agent"}

// validateRegistered audits the stored copy of workflow id (cli.md §2.2
// --registered): the engine's loader reads it as a file again, so the
// report says what registering it today would say.
func (a *app) validateRegistered(ctx context.Context, id string, strict, asJSON, explain bool) error {
	resp, err := call(a, ctx, func(ctx context.Context, e realmv1.EngineServiceClient) (*realmv1.GetWorkflowProtocolResponse, error) {
		return e.GetWorkflowProtocol(ctx, &realmv1.GetWorkflowProtocolRequest{WorkflowId: id})
	})
	if err != nil {
		return err
	}
	var def map[string]any
	if err := json.Unmarshal(resp.GetDefinition(), &def); err != nil || def == nil {
		return refuse("Error: engine-svc sent no readable definition for '%s'.", id)
	}
	schemaVersion := def["schema_version"]
	for _, k := range realmWritten {
		delete(def, k)
	}
	steps, _ := def["steps"].(map[string]any)
	for _, s := range steps {
		if m, ok := s.(map[string]any); ok {
			delete(m, "name")
			delete(m, "line")
		}
	}
	copyJSON, err := json.Marshal(def)
	if err != nil {
		return refuse("Error: %v", err)
	}
	if !asJSON {
		fmt.Fprintf(a.env.Stdout, "Auditing the registered copy of '%s' (schema_version %v) with realm %s's loader.\n", id, schemaVersion, version.Version)
		fmt.Fprintln(a.env.Stdout, "Registered copies stay grandfathered at runtime against LOADER changes — this reports what re-registration today would say.")
	}
	// JSON is YAML: the copy goes to the loader as a file would.
	src := &realmv1.WorkflowSource{Yaml: copyJSON, Path: id + " (registered copy)"}
	if err := a.check(ctx, src, "registered", strict, asJSON); err != nil {
		return err
	}
	if !asJSON {
		a.nudge(src, explain)
	}
	return nil
}

// check has the engine validate src and prints its report.
func (a *app) check(ctx context.Context, src *realmv1.WorkflowSource, mode string, strict, asJSON bool) error {
	resp, err := call(a, ctx, func(ctx context.Context, e realmv1.EngineServiceClient) (*realmv1.ValidateWorkflowResponse, error) {
		return e.ValidateWorkflow(ctx, &realmv1.ValidateWorkflowRequest{Source: src, Strict: strict})
	})
	if err != nil {
		return err
	}
	report := resp.GetReport()
	if asJSON {
		out := validateJSON(src.GetPath(), strict, report)
		out["mode"] = mode
		if err := printJSON(a.env.Stdout, out); err != nil {
			return err
		}
	} else {
		printText(a.env.Stdout, report.GetText())
	}
	if !report.GetValid() {
		return &exitError{code: ExitRefused}
	}
	return nil
}

// unreadable reports a workflow file the CLI could not read: the engine
// never saw it, so this line is the CLI's own (cli.md §2.2).
func (a *app) unreadable(path string, strict, asJSON bool, err error) error {
	var re *source.ReadError
	if !errors.As(err, &re) {
		return refuse("Error: %v", err)
	}
	line := "Invalid: " + re.Error()
	if asJSON {
		report := &realmv1.WorkflowReport{Errors: []string{re.Error()}}
		if err := printJSON(a.env.Stdout, validateJSON(path, strict, report)); err != nil {
			return err
		}
		return &exitError{code: ExitRefused}
	}
	fmt.Fprintln(a.env.Stdout, line)
	return &exitError{code: ExitRefused}
}

// validateJSON is the `validate --json` object (cli.md §2.2) built from the
// engine's report. loader_version is left out: the engine does not say it.
func validateJSON(path string, strict bool, r *realmv1.WorkflowReport) map[string]any {
	diags := make([]any, 0, len(r.GetDiagnostics()))
	warnings := 0
	for _, d := range r.GetDiagnostics() {
		if d.GetSeverity() == "warning" {
			warnings++
		}
		e := map[string]any{
			"code":     d.GetCode(),
			"severity": d.GetSeverity(),
			"message":  d.GetMessage(),
			"scope":    d.GetScope(),
		}
		for k, v := range map[string]string{"step": d.GetStep(), "key": d.GetKey(), "did_you_mean": d.GetDidYouMean()} {
			if v != "" {
				e[k] = v
			}
		}
		if d.GetLine() > 0 {
			e["line"] = d.GetLine()
		}
		if d.GetColumn() > 0 {
			e["column"] = d.GetColumn()
		}
		diags = append(diags, e)
	}
	var id, schema any
	if r.GetWorkflowId() != "" {
		id = r.GetWorkflowId()
	}
	if r.GetValid() {
		schema = storedSchemaVersion
	}
	return map[string]any{
		"valid":          r.GetValid(),
		"mode":           "file",
		"path":           path,
		"workflow_id":    id,
		"schema_version": schema,
		"error_count":    len(r.GetErrors()),
		"warning_count":  warnings,
		"strict":         map[string]any{"requested": strict, "failed": strict && warnings > 0},
		"diagnostics":    diags,
		"errors":         stringList(r.GetErrors()),
		"checks_not_run": []any{},
		"extension_keys": stringList(r.GetExtensionKeys()),
	}
}

func (a *app) workflowRegisterCommand() *cobra.Command {
	var strict bool
	cmd := &cobra.Command{
		Use:   "register <path>",
		Short: "Validate a workflow and store it in the engine",
		Long: "Validate a workflow file (or the folder holding workflow.yaml) and, if it is accepted,\n" +
			"store it in the engine. Exit 0 if stored, else 1.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.register(cmd.Context(), args[0], strict)
		},
	}
	cmd.Flags().BoolVar(&strict, "strict", false, "refuse to register a workflow with any warning")
	return cmd
}

func (a *app) register(ctx context.Context, path string, strict bool) error {
	src, err := source.Read(path)
	if err != nil {
		return a.unreadable(path, strict, false, err)
	}
	resp, err := call(a, ctx, func(ctx context.Context, e realmv1.EngineServiceClient) (*realmv1.RegisterWorkflowResponse, error) {
		return e.RegisterWorkflow(ctx, &realmv1.RegisterWorkflowRequest{Source: src, Strict: strict})
	})
	if err != nil {
		return err
	}
	r := resp.GetReport()
	switch {
	case resp.GetRegistered():
		// The warnings stay; the Valid: line gives way to the Registered: one.
		line := fmt.Sprintf("Registered: %s v%s (%s)", r.GetWorkflowId(), number(r.GetVersion()), plural(int(r.GetStepCount()), "step", "steps"))
		printText(a.env.Stdout, replaceValidLine(r.GetText(), line))
		return nil
	case strict && len(r.GetErrors()) == 0 && countWarnings(r) > 0:
		printText(a.env.Stdout, replaceValidLine(r.GetText(), ""))
		return refuse("Error: '%s' v%s has %s; refusing to register due to --strict", r.GetWorkflowId(), number(r.GetVersion()), plural(countWarnings(r), "warning", "warnings"))
	case r.GetValid():
		printText(a.env.Stdout, r.GetText())
		return refuse("Error: engine-svc accepted '%s' but did not store it.", r.GetWorkflowId())
	}
	printText(a.env.Stdout, r.GetText())
	return &exitError{code: ExitRefused}
}

func countWarnings(r *realmv1.WorkflowReport) int {
	n := 0
	for _, d := range r.GetDiagnostics() {
		if d.GetSeverity() == "warning" {
			n++
		}
	}
	return n
}

// replaceValidLine swaps validate's `Valid: …` summary line in a report
// text for repl. An empty repl drops the line and the indented lines that
// belong to it (the description). With no Valid: line, repl is appended.
func replaceValidLine(text, repl string) string {
	var out []string
	replaced, dropping := false, false
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "Valid: "):
			replaced, dropping = true, repl == ""
			if repl != "" {
				out = append(out, repl)
			}
			continue
		case dropping && strings.HasPrefix(l, "  "):
			continue
		}
		dropping = false
		out = append(out, l)
	}
	if !replaced && repl != "" {
		out = append(out, repl)
	}
	return strings.Join(out, "\n")
}

func (a *app) workflowListCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the registered workflows",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.listWorkflows(cmd.Context(), asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func (a *app) listWorkflows(ctx context.Context, asJSON bool) error {
	resp, err := call(a, ctx, func(ctx context.Context, e realmv1.EngineServiceClient) (*realmv1.ListWorkflowsResponse, error) {
		return client.ListAllWorkflows(ctx, e)
	})
	if err != nil {
		return err
	}
	if resp.GetStatus() == "error" {
		msg := resp.GetHint()
		if len(resp.GetWarnings()) > 0 {
			msg = resp.GetWarnings()[0]
		}
		return refuse("Error: %s", msg)
	}
	wfs := append([]*realmv1.WorkflowSummary(nil), resp.GetWorkflows()...)
	sort.Slice(wfs, func(i, j int) bool { return wfs[i].GetId() < wfs[j].GetId() })

	if asJSON {
		list := make([]any, 0, len(wfs))
		for _, w := range wfs {
			list = append(list, map[string]any{"id": w.GetId(), "name": w.GetName(), "version": w.GetVersion()})
		}
		unreadable := make([]any, 0, len(resp.GetUnreadable()))
		for _, u := range resp.GetUnreadable() {
			unreadable = append(unreadable, map[string]any{"id": u.GetId(), "reason": u.GetReason()})
		}
		return printJSON(a.env.Stdout, map[string]any{"workflows": list, "unreadable": unreadable, "mismatched": []any{}})
	}

	for _, w := range resp.GetWarnings() {
		fmt.Fprintln(a.env.Stderr, "⚠ "+w)
	}
	for _, u := range resp.GetUnreadable() {
		fmt.Fprintf(a.env.Stderr, "⚠ unreadable: %s — %s\n", u.GetId(), oneLine(u.GetReason()))
	}
	if len(wfs) > 0 {
		rows := make([][]string, 0, len(wfs))
		for _, w := range wfs {
			rows = append(rows, []string{w.GetId(), w.GetName(), number(w.GetVersion())})
		}
		printTable(a.env.Stdout, []string{"ID", "NAME", "VERSION"}, rows)
		fmt.Fprintln(a.env.Stdout)
	}
	fmt.Fprintf(a.env.Stdout, "%s registered.\n", plural(len(wfs), "workflow", "workflows"))
	return nil
}

// printText writes an engine-composed text, ending it with one newline.
func printText(w io.Writer, text string) {
	text = strings.TrimRight(text, "\n")
	if text == "" {
		return
	}
	fmt.Fprintln(w, text)
}

func stringList(in []string) []any {
	out := make([]any, 0, len(in))
	for _, s := range in {
		out = append(out, s)
	}
	return out
}
