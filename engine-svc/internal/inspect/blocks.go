package inspect

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/realm-go/realm/engine-svc/internal/record"
)

// topEvents is how many trace events the Trace Summary names.
const topEvents = 5

// num reads a JSON number (float64 once decoded; an int in a hand-built
// record).
func num(v any) (int64, bool) {
	switch n := v.(type) {
	case float64:
		return int64(n), true
	case int:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}

// usageTotals sums the token counters over a list of per-request usage
// records; a counter no request reported is absent (never 0).
type usageTotals struct {
	requests                int
	prompt, output          int64
	hasPrompt, hasOutput    bool
	cacheRead, cacheWrite   int64
	hasCacheRead, hasCacheW bool
}

func sumUsage(reqs []any) usageTotals {
	t := usageTotals{requests: len(reqs)}
	for _, q := range reqs {
		m, _ := q.(map[string]any)
		if n, ok := num(m["prompt_tokens"]); ok {
			t.prompt, t.hasPrompt = t.prompt+n, true
		}
		if n, ok := num(m["output_tokens"]); ok {
			t.output, t.hasOutput = t.output+n, true
		}
		if n, ok := num(m["cache_read_input_tokens"]); ok {
			t.cacheRead, t.hasCacheRead = t.cacheRead+n, true
		}
		for _, k := range []string{"cache_creation_input_tokens", "cache_write_tokens"} {
			if n, ok := num(m[k]); ok {
				t.cacheWrite, t.hasCacheW = t.cacheWrite+n, true
			}
		}
	}
	return t
}

// across is the parenthesis a summed figure carries.
func across(n int) string { return fmt.Sprintf("(totals across %d requests)", n) }

// diagnostics writes the Diagnostics line's parts, those the entry holds
// (agent-driver spec §13.2): the estimate, the measured tokens, the
// preconditions, the cache.
func diagnostics(d map[string]any) string {
	if d == nil {
		return ""
	}
	var parts []string
	if n, ok := num(d["input_token_estimate"]); ok {
		parts = append(parts, fmt.Sprintf("~%d tokens (estimate, step input)", n))
	}
	cache, hasCache := d["cache"].(map[string]any)
	reqs, _ := cache["requests"].([]any)
	u := sumUsage(reqs)
	if u.hasPrompt {
		if u.requests == 1 {
			parts = append(parts, fmt.Sprintf("%d prompt tokens (measured, first request)", u.prompt))
		} else {
			parts = append(parts, fmt.Sprintf("%d prompt tokens (measured, totals across %d requests)", u.prompt, u.requests))
		}
	}
	if u.hasOutput {
		if u.requests == 1 {
			parts = append(parts, fmt.Sprintf("%d output tokens", u.output))
		} else {
			parts = append(parts, fmt.Sprintf("%d output tokens %s", u.output, across(u.requests)))
		}
	}
	if tr, ok := d["precondition_trace"]; ok {
		parts = append(parts, preconditions(tr))
	}
	if hasCache {
		parts = append(parts, "cache: "+cacheWords(cache, u))
	}
	return strings.Join(parts, " | ")
}

// preconditions is `no preconditions` or `preconditions: <expr> → <true|false>
// (<resolved value>)`; several are joined with "; " (the spec shows one).
func preconditions(tr any) string {
	items, _ := tr.([]any)
	if len(items) == 0 {
		return "no preconditions"
	}
	var out []string
	for _, it := range items {
		m, _ := it.(map[string]any)
		expr := ""
		for _, k := range []string{"precondition", "condition", "expression", "leaf"} {
			if s, ok := m[k].(string); ok {
				expr = s
				break
			}
		}
		passed, _ := m["passed"].(bool)
		out = append(out, fmt.Sprintf("%s → %t (%s)", clean(expr), passed, jsonText(m["resolved_value"])))
	}
	return "preconditions: " + strings.Join(out, "; ")
}

// cacheWords is the cache part. Only the unobservable wording is in the
// spec; other states name the state and the counters reported, in the
// same voice.
func cacheWords(cache map[string]any, u usageTotals) string {
	if _, ok := cache["requests"].([]any); !ok {
		return "unreadable — the recorded usage is not a list"
	}
	count := ""
	switch {
	case u.requests == 1:
		count = " (1 request)"
	case u.requests > 1:
		count = " " + across(u.requests)
	}
	state, _ := cache["state"].(string)
	if state == "" || state == "unobservable" {
		return "not reported by the provider" + count
	}
	text := clean(state)
	var figs []string
	if u.hasCacheRead {
		figs = append(figs, fmt.Sprintf("%d tokens read", u.cacheRead))
	}
	if u.hasCacheW {
		figs = append(figs, fmt.Sprintf("%d tokens written", u.cacheWrite))
	}
	if len(figs) > 0 {
		text += ", " + strings.Join(figs, ", ")
	}
	return text + count
}

// driveFailures writes the Drive failures block (agent-driver spec §12.3).
func (r *renderer) driveFailures() string {
	df := r.run.DriveFailures
	if df == nil || len(df.Entries) == 0 {
		return ""
	}
	var b strings.Builder
	line(&b, "Drive failures:")
	for _, f := range df.Entries {
		step := clean(f.Step)
		if step == "" {
			// A failure before any step was chosen (agent-driver spec
			// §12.2) has no step; the column says so.
			step = "(no step)"
		}
		text := fmt.Sprintf("  %s  %s  %s  %s after %dms: %s", isoTime(f.At), step, clean(f.Provider), clean(f.ErrorClass), f.ElapsedMS, clean(f.Message))
		if f.DeclaredPerAttemptMS != nil {
			text += fmt.Sprintf(" (declared %dms)", *f.DeclaredPerAttemptMS)
		}
		if f.DerivedCeilingMS != nil {
			text += fmt.Sprintf(" (ceiling %dms)", *f.DerivedCeilingMS)
		}
		if f.AttemptsSDK != nil {
			text += fmt.Sprintf(" (attempt %d)", *f.AttemptsSDK)
		}
		line(&b, "%s", text)
		if len(f.Usage) > 0 {
			line(&b, "    usage: %s", usageWords(f))
		}
	}
	return b.String()
}

// usageWords is the usage line: what a failed drive was billed. The spec
// gives the rejected-output case for several requests; one request drops
// the totals parenthesis, and a drive that failed otherwise says so.
func usageWords(f record.DriveFailure) string {
	u := sumUsage(f.Usage)
	when := "billed before the output was rejected"
	if f.ErrorClass != "validation_rejected" {
		when = "billed before the drive failed"
	}
	var figs []string
	tail := ""
	if u.requests > 1 {
		tail = " " + across(u.requests)
	}
	if u.hasPrompt {
		figs = append(figs, fmt.Sprintf("%d prompt tokens%s", u.prompt, tail))
	}
	if u.hasOutput {
		figs = append(figs, fmt.Sprintf("%d output tokens%s", u.output, tail))
	}
	switch {
	case u.hasCacheRead || u.hasCacheW:
		figs = append(figs, fmt.Sprintf("cache: %d tokens read, %d tokens written", u.cacheRead, u.cacheWrite))
	default:
		figs = append(figs, "cache not reported")
	}
	return fmt.Sprintf("%d %s %s — %s", u.requests, plural(u.requests, "request", "requests"), when, strings.Join(figs, ", "))
}

// traceSummary writes the Trace Summary block over every attempt that
// kept a trace. The column layout is the spec's, byte for byte.
func (r *renderer) traceSummary() string {
	var withTrace int
	unique := map[string]bool{}
	var stored, discarded, truncated int64
	events := map[string]int{}
	for _, e := range r.in.Entries {
		if e == nil || (len(e.Trace) == 0 && e.TraceSummary == nil) {
			continue
		}
		withTrace++
		unique[e.StepID] = true
		if n, ok := num(e.TraceSummary["stored_entries"]); ok {
			stored += n
		} else {
			stored += int64(len(e.Trace))
		}
		if n, ok := num(e.TraceSummary["discarded_entries"]); ok {
			discarded += n
		}
		if t, _ := e.TraceSummary["truncated"].(bool); t {
			truncated++
		}
		for _, t := range e.Trace {
			if m, ok := t.(map[string]any); ok {
				if ev, ok := m["event"].(string); ok {
					events[ev]++
				}
			}
		}
	}
	if withTrace == 0 {
		return ""
	}
	names := make([]string, 0, len(events))
	for ev := range events {
		names = append(names, ev)
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(events[b]-events[a], strings.Compare(a, b))
	})
	var top []string
	for _, ev := range names[:min(len(names), topEvents)] {
		top = append(top, fmt.Sprintf("%s (%d)", clean(ev), events[ev]))
	}
	topText := "(none)"
	if len(top) > 0 {
		topText = strings.Join(top, ", ")
	}
	var b strings.Builder
	line(&b, "Trace Summary:")
	line(&b, "  steps_with_trace:        %d", withTrace)
	line(&b, "  steps_with_trace_unique: %d", len(unique))
	line(&b, "  stored_entries_total:   %d", stored)
	line(&b, "  discarded_entries_total:%d", discarded)
	line(&b, "  truncated_steps:        %d", truncated)
	line(&b, "  top_events:             %s", topText)
	return b.String()
}
