package health

import (
	"fmt"
	"slices"
	"strings"
)

// StuckLabel is one finding as `realm run list --stuck` shows it. Text is
// empty for never_claimed_idle: its line ends after `idle: <age>`.
type StuckLabel struct {
	Kind   string
	Step   string
	Family string
	Text   string
}

// labelOrder is the order of labels on a `--stuck` line. cli spec §3.1
// fixes only that a stale gate comes before gate corruption in its family;
// the rest is ours: what blocks everything first, then what an operator
// command clears.
var labelOrder = []string{
	KindNeverClaimedIdle,
	KindDefinitionUnresolvable,
	KindStaleClaim,
	KindWedgedGateSibling,
	KindGateExpiredAwaitingDrive,
	KindDriveFailing,
	KindCapabilityBlock,
	KindTerminalPendingFinalizer,
	KindTerminalWithStaleGate,
	KindGateCorruption,
}

// Stuck returns the labels that put a run on `realm run list --stuck`;
// none means the run is not stuck. It judges as list does: from the record
// alone (no capability of this server, no workflow read beyond whether it
// can be read — Def nil is definition_unresolvable), and leaves out the
// findings that do not select a run.
func Stuck(in Input) []StuckLabel {
	in.Capable = nil
	fs := classify(in, true)
	var out []StuckLabel
	for _, f := range fs {
		e, ok := lookup(f.Kind)
		if !ok || !e.selects {
			continue
		}
		out = append(out, StuckLabel{Kind: f.Kind, Step: f.Step, Family: e.family, Text: labelText(f, in.Run.ID)})
	}
	slices.SortStableFunc(out, func(a, b StuckLabel) int {
		return slices.Index(labelOrder, a.Kind) - slices.Index(labelOrder, b.Kind)
	})
	return out
}

// labelText writes a finding's label (cli spec §3.1). A corrupt enum value
// renders `unknown` (in its own parentheses when it has none).
func labelText(f Finding, runID string) string {
	str := func(k string) string { s, _ := f.Evidence[k].(string); return s }
	switch f.Kind {
	case KindStaleClaim, KindWedgedGateSibling:
		return f.Step + "=" + f.Reason
	case KindCapabilityBlock:
		req, _ := f.Evidence["requirement"].(map[string]any)
		kind, _ := req["kind"].(string)
		name, _ := req["name"].(string)
		if kind != "handler" && kind != "adapter" {
			kind = "(unknown)"
		}
		return fmt.Sprintf("%s: needs %s '%s'", f.Step, kind, name)
	case KindTerminalPendingFinalizer:
		return fmt.Sprintf("%s=%s (realm run drain)", f.Step, f.Reason)
	case KindDriveFailing:
		class := str("error_class")
		if class == "" {
			class = "unknown"
		}
		if f.Step == "" { // a failure before any step was chosen
			return fmt.Sprintf("drive_failing(%s)", class)
		}
		return fmt.Sprintf("%s=drive_failing(%s)", f.Step, class)
	case KindGateExpiredAwaitingDrive:
		switch d := str("disposition"); d {
		case dispSettleDefault, dispAbort:
			return fmt.Sprintf("%s=gate_expired(%s) (realm run advance)", f.Step, d)
		case dispFindingOnly:
			return fmt.Sprintf("%s=gate_expired(finding_only) (realm run respond)", f.Step)
		default:
			return fmt.Sprintf("%s=gate_expired(unknown) (realm run advance)", f.Step)
		}
	case KindGateCorruption:
		return f.Step + "=gate_corruption"
	case KindTerminalWithStaleGate:
		return f.Step + "=stale_gate (realm run purge)"
	case KindDefinitionUnresolvable:
		// <why> is ours: the spec names the slot, not its words.
		why := "not_found"
		if str("code") != "STATE_WORKFLOW_NOT_FOUND" {
			why = "unreadable"
		}
		return fmt.Sprintf("definition_unresolvable (%s) (realm run inspect %s)", why, runID)
	}
	return "" // never_claimed_idle: nothing after `idle:`
}

// StuckSuffix renders the labels as they end a `--stuck` line, after
// `idle: <age>`: same-family labels joined with ", ", families separated by
// two spaces, the whole led by two spaces; "" when no label has text.
func StuckSuffix(ls []StuckLabel) string {
	var groups []string
	var fams []string
	for _, l := range ls {
		if l.Text == "" {
			continue
		}
		if i := slices.Index(fams, l.Family); i >= 0 {
			groups[i] += ", " + l.Text
			continue
		}
		fams = append(fams, l.Family)
		groups = append(groups, l.Text)
	}
	if len(groups) == 0 {
		return ""
	}
	return "  " + strings.Join(groups, "  ")
}

// InspectBlock renders the `Run Health (N finding(s)):` block of `realm run
// inspect`, one `  <kind>[ [<step>]]: <reason>` line per finding, each
// ending in a newline; "" when there are none (the block is then left out).
func InspectBlock(fs []Finding) string {
	if len(fs) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Run Health (%d finding(s)):\n", len(fs))
	for _, f := range fs {
		b.WriteString("  " + f.Kind)
		if f.Step != "" {
			b.WriteString(" [" + f.Step + "]")
		}
		b.WriteString(": " + f.Reason + "\n")
	}
	return b.String()
}
