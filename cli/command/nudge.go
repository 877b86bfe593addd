package command

import (
	"fmt"
	"strings"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/workflow"
)

// noNudgeEnv silences the structured-output summary line (cli.md §2.2).
const noNudgeEnv = "REALM_NO_NUDGE"

// nudge prints the structured-output lines of an accepted workflow (cli.md
// §2.2, workflow-file §11.2), informational and never part of the exit
// code: the caveats of steps that opted in to `structured_output: strict`
// (always), then the agent steps that could opt in — one summary line, or
// one line each with --explain. The engine judged the workflow; this reads
// the same file with the same loader only to say what could be tightened.
func (a *app) nudge(src *realmv1.WorkflowSource, explain bool) {
	def, _ := workflow.Load(src.GetYaml(), workflow.LoadOptions{Path: src.GetPath(), Files: src.GetFiles()})
	if def == nil {
		return
	}
	out := a.env.Stdout
	ready, caveated := 0, 0
	var eligible []string
	for _, name := range def.StepOrder {
		st := def.Steps[name]
		if st == nil || st.Execution != workflow.KindAgent || st.StrictSchema() == nil {
			continue
		}
		v := workflow.CheckStrict(st.StrictSchema())
		if len(st.Tools) > 0 {
			v.Caveats = append(v.Caveats, "tools_runtime_assessed (with tools, strict applies to each tool call's arguments)")
		}
		if st.StructuredOutput == "strict" {
			if len(v.Caveats) > 0 {
				fmt.Fprintf(out, "ℹ Step '%s': structured_output caveat — %s\n", name, strings.Join(v.Caveats, "; "))
			}
			continue
		}
		if !v.Eligible() {
			continue
		}
		ready++
		if len(v.Caveats) > 0 {
			caveated++
		}
		eligible = append(eligible, name)
	}
	if explain {
		for _, name := range eligible {
			fmt.Fprintf(out, "ℹ Step '%s': eligible for structured_output: strict — add 'structured_output: strict' to opt in.\n", name)
		}
		return
	}
	if ready == 0 || a.env.Getenv(noNudgeEnv) == "1" {
		return
	}
	with := ""
	if caveated > 0 {
		with = fmt.Sprintf(" (%d with caveats)", caveated)
	}
	fmt.Fprintf(out, "ℹ %d steps ready for structured_output: strict%s — run 'realm workflow validate --explain' for detail (%s=1 to silence).\n", ready, with, noNudgeEnv)
}
