package workflow

import (
	"fmt"
	"strconv"
	"strings"
)

// LoaderVersion is the loader's release line reported by `--json`.
const LoaderVersion = "0.46.0"

// Severities of a Diagnostic.
const (
	SeverityWarning = "warning"
	SeverityError   = "error"
)

// Diagnostic is one loader warning (spec §17.2). Codes escalated to errors by
// policy (unknown workflow/step keys) carry severity "error". Plain errors
// (missing fields, bad values) are not diagnostics; they are in Report.Errors.
type Diagnostic struct {
	Code       string `json:"code"`
	Severity   string `json:"severity"`
	Message    string `json:"message"`
	Scope      string `json:"scope"`
	Key        string `json:"key,omitempty"`
	Step       string `json:"step,omitempty"`
	DidYouMean string `json:"did_you_mean,omitempty"`
	Line       int    `json:"line,omitempty"`
	Column     int    `json:"column,omitempty"`
	EndLine    int    `json:"endLine,omitempty"`
	EndColumn  int    `json:"endColumn,omitempty"`
}

// Report is the outcome of Load: what `realm workflow validate` prints.
type Report struct {
	// Valid is true when the file was accepted (and, with Strict, had no
	// warning). Load returns a Definition exactly when Valid is true.
	Valid bool
	// Path is LoadOptions.Path, echoed for messages and --json.
	Path string

	WorkflowID  string
	Version     float64
	HasVersion  bool
	StepCount   int
	Description string

	Diagnostics []Diagnostic
	// Errors are the hard errors, each without the "Invalid workflow: "
	// prefix, in the order found.
	Errors []string
	// ExtensionKeys are the top-level x- keys in file order.
	ExtensionKeys []string
	// Notes are informational (ℹ) lines, printed after the Valid line.
	Notes []string

	// ParseError is set when the file is not YAML; nothing else is checked.
	ParseError *ParseError

	Strict       bool
	StrictFailed bool
}

// ParseError is a YAML syntax error with its position (0 when unknown).
type ParseError struct {
	Message string
	Line    int
	Column  int
}

// Warnings counts diagnostics of any severity: escalated ones are still
// warnings that the policy turned into errors.
func (r *Report) Warnings() int { return len(r.Diagnostics) }

// escalated lists the diagnostics the policy turned into errors.
func (r *Report) escalated() []Diagnostic {
	var out []Diagnostic
	for _, d := range r.Diagnostics {
		if d.Severity == SeverityError {
			out = append(out, d)
		}
	}
	return out
}

// FormatVersion renders a version label: 1 → "1", 1.5 → "1.5".
func FormatVersion(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// EscalationLine is `Invalid: <w> warning, <e> escalated to an error by
// policy: <CODE> '<key>'`, or "" when nothing was escalated.
func (r *Report) EscalationLine() string {
	esc := r.escalated()
	if len(esc) == 0 {
		return ""
	}
	names := make([]string, len(esc))
	for i, d := range esc {
		names[i] = fmt.Sprintf("%s '%s'", d.Code, d.Key)
	}
	return fmt.Sprintf("Invalid: %s, %d escalated to an error by policy: %s",
		plural(r.Warnings(), "warning", "warnings"), len(esc), strings.Join(names, ", "))
}

// ParseErrorLine is `Invalid: YAML parse error: <msg> (<line>:<col>)`.
func (r *Report) ParseErrorLine() string {
	if r.ParseError == nil {
		return ""
	}
	s := "Invalid: YAML parse error: " + r.ParseError.Message
	if r.ParseError.Line > 0 {
		s += fmt.Sprintf(" (%d:%d)", r.ParseError.Line, max(r.ParseError.Column, 1))
	}
	return s
}

// ValidLine is `Valid: <id> v<version> (<n> steps)` with its suffixes.
func (r *Report) ValidLine() string {
	s := fmt.Sprintf("Valid: %s v%s (%s)", r.WorkflowID, FormatVersion(r.Version), plural(r.StepCount, "step", "steps"))
	if n := len(r.ExtensionKeys); n > 0 {
		s += fmt.Sprintf(" — %s carried, never read by realm: %s",
			plural(n, "extension key", "extension keys"), strings.Join(r.ExtensionKeys, ", "))
	}
	if r.StrictFailed {
		s += fmt.Sprintf(" — %s; failing due to --strict", plural(r.Warnings(), "warning", "warnings"))
	}
	return s
}

// Text renders the report exactly as `realm workflow validate` prints it
// (spec §17.1), ending with a newline.
func (r *Report) Text() string {
	var b strings.Builder
	if r.ParseError != nil {
		b.WriteString(r.ParseErrorLine())
		b.WriteByte('\n')
		return b.String()
	}
	for _, d := range r.Diagnostics {
		b.WriteString("⚠ " + d.Message + "\n")
	}
	switch len(r.Errors) {
	case 0:
	case 1:
		b.WriteString("Invalid workflow: " + r.Errors[0] + "\n")
	default:
		fmt.Fprintf(&b, "Invalid workflow — %d errors:\n", len(r.Errors))
		for _, e := range r.Errors {
			// Continuation lines (the and/or list) keep their shape under
			// the two-space indent.
			b.WriteString("  " + strings.ReplaceAll(e, "\n", "\n  ") + "\n")
		}
	}
	if line := r.EscalationLine(); line != "" {
		b.WriteString(line + "\n")
	}
	if len(r.Errors) > 0 || r.EscalationLine() != "" {
		return b.String()
	}
	b.WriteString(r.ValidLine() + "\n")
	if r.Description != "" {
		for _, l := range strings.Split(strings.TrimRight(r.Description, "\n"), "\n") {
			b.WriteString("  " + l + "\n")
		}
	}
	for _, n := range r.Notes {
		b.WriteString("ℹ " + n + "\n")
	}
	return b.String()
}

// ErrorLines are the `errors` of the --json output: hard errors, the YAML
// parse error, and the escalation summary.
func (r *Report) ErrorLines() []string {
	out := []string{}
	if r.ParseError != nil {
		out = append(out, strings.TrimPrefix(r.ParseErrorLine(), "Invalid: "))
	}
	out = append(out, r.Errors...)
	if line := r.EscalationLine(); line != "" {
		out = append(out, line)
	}
	return out
}

// JSON is the `realm workflow validate --json` object (spec §17.3), in file
// mode.
func (r *Report) JSON() map[string]any {
	var id any
	if r.WorkflowID != "" {
		id = r.WorkflowID
	}
	diags := make([]any, 0, len(r.Diagnostics))
	for _, d := range r.Diagnostics {
		m := map[string]any{
			"code":     d.Code,
			"severity": d.Severity,
			"message":  d.Message,
			"scope":    d.Scope,
		}
		if d.Key != "" {
			m["key"] = d.Key
		}
		if d.Step != "" {
			m["step"] = d.Step
		}
		if d.DidYouMean != "" {
			m["did_you_mean"] = d.DidYouMean
		}
		if d.Line > 0 {
			m["line"], m["column"], m["endLine"], m["endColumn"] = d.Line, d.Column, d.EndLine, d.EndColumn
		}
		diags = append(diags, m)
	}
	errs := r.ErrorLines()
	errAny := make([]any, len(errs))
	for i, e := range errs {
		errAny[i] = e
	}
	ext := make([]any, len(r.ExtensionKeys))
	for i, k := range r.ExtensionKeys {
		ext[i] = k
	}
	return map[string]any{
		"valid":          r.Valid,
		"mode":           "file",
		"path":           r.Path,
		"workflow_id":    id,
		"loader_version": LoaderVersion,
		"schema_version": nil,
		"error_count":    len(errs),
		"warning_count":  r.Warnings(),
		"strict":         map[string]any{"requested": r.Strict, "failed": r.StrictFailed},
		"diagnostics":    diags,
		"errors":         errAny,
		"checks_not_run": []any{},
		"extension_keys": ext,
	}
}
