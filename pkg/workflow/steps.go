package workflow

import (
	"fmt"
	"math"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/realm-go/realm/pkg/schema"
)

// stepCheck carries one step's checks across the loader's passes.
type stepCheck struct {
	l    *loader
	s    *stepSrc
	st   *Step
	kind Kind // "" when execution is missing or invalid
	// use holds the fields the step's kind accepts, by name.
	use map[string]pair
	// schemaVals are the decoded schema blocks; nullSchemas the blocks
	// written as null.
	schemaVals  map[string]any
	nullSchemas map[string]bool
	compiled    map[string]*schema.Schema
}

func (c *stepCheck) errf(format string, args ...any) {
	c.l.errf("Step '%s': "+format, append([]any{c.s.name}, args...)...)
}

// at is the `(step at line N)` suffix.
func (c *stepCheck) at() string {
	if c.s.key == nil || c.s.key.Line <= 0 {
		return ""
	}
	return fmt.Sprintf(" (step at line %d)", c.s.key.Line)
}

// warnf records a step-scoped warning; the message gets the step prefix and
// the key's line.
func (c *stepCheck) warnf(code string, key *yaml.Node, keyName, format string, args ...any) {
	c.l.warn(Diagnostic{
		Code:    code,
		Message: fmt.Sprintf("Step '%s': ", c.s.name) + fmt.Sprintf(format, args...) + lineOf(key),
		Scope:   "step",
		Step:    c.s.name,
		Key:     keyName,
	}, key)
}

var triggerRules = []string{RuleAllSuccess, RuleAllFailed, RuleAllDone, RuleOneFailed, RuleOneSuccess, RuleNoneFailed}

var onOutcomes = []string{"complete", "fail", "abort", "always", "completed_with_failed_steps"}

// checkStep runs the per-step checks of spec §4 (and the value checks of
// §7, §10, §11, §12 that need only the step itself).
func (l *loader) checkStep(s *stepSrc) {
	st := &Step{Name: s.name}
	if s.key != nil {
		st.Line = s.key.Line
	}
	l.def.Steps[s.name] = st
	c := &stepCheck{l: l, s: s, st: st, use: map[string]pair{}, schemaVals: map[string]any{}, nullSchemas: map[string]bool{}, compiled: map[string]*schema.Schema{}}
	if l.checks == nil {
		l.checks = map[string]*stepCheck{}
	}
	l.checks[s.name] = c

	for _, r := range reservedStepNames {
		if s.name == r {
			l.errf("Step name '%s' is reserved and cannot be used as a step identifier%s", r, c.at())
		}
	}
	if !isMap(s.node) {
		c.errf("must be an object of step fields (found %s)%s", kindName(s.node), c.at())
		return
	}
	fields := map[string]pair{}
	order := pairs(s.node)
	for _, p := range order {
		fields[p.Key.Value] = p
	}

	if p, ok := fields["description"]; !ok || isNull(p.Value) {
		c.errf("missing required field 'description'%s", c.at())
	} else if d, ok := stringValue(p.Value); ok {
		st.Description = d
	} else {
		c.errf("'description' must be a string%s", lineOf(p.Key))
	}
	if p, ok := fields["execution"]; !ok || isNull(p.Value) {
		c.errf("missing required field 'execution'%s", c.at())
	} else {
		v := scalarText(p.Value)
		if s, ok := stringValue(p.Value); ok && kindIndex(Kind(s)) >= 0 {
			c.kind = Kind(s)
			st.Execution = c.kind
		} else {
			c.errf("invalid execution value '%s'; must be 'auto', 'agent', 'guard', or 'finalizer'%s", v, c.at())
		}
	}

	for _, p := range order {
		k := p.Key.Value
		cells, known := matrix[k]
		if !known {
			c.unknownKey(p.Key)
			continue
		}
		if k == "use_template" {
			c.errf("'use_template' cannot be used inside a template's steps — templates do not nest%s", lineOf(p.Key))
			continue
		}
		if c.kind == "" || k == "description" || k == "execution" {
			continue
		}
		if cells[kindIndex(c.kind)] == no {
			if k == "timeout_seconds" && c.kind == KindAgent {
				c.errf("%s%s", timeoutOnAgent, lineOf(p.Key))
			} else {
				c.errf("'%s' is not valid on execution: %s steps — %s%s", k, c.kind, refusalReason(k, c.kind), lineOf(p.Key))
			}
			continue
		}
		c.use[k] = p
	}
	if c.kind == "" {
		return
	}
	for _, p := range order {
		if _, ok := c.use[p.Key.Value]; ok {
			c.field(p)
		}
	}
	c.kindRequirements()
	c.crossFields()
	c.conditions()
}

// unknownKey records UNKNOWN_STEP_KEY, escalated to an error by policy.
func (c *stepCheck) unknownKey(key *yaml.Node) {
	k := key.Value
	dym := suggest(k, stepFields[:2])
	if dym == "" {
		dym = suggest(k, stepFields)
	}
	if dym == "use_template" {
		dym = ""
	}
	tail := "ignored (not a recognized step field)."
	if dym != "" {
		tail = fmt.Sprintf("ignored (did you mean '%s'?)", dym)
	}
	c.l.warn(Diagnostic{
		Code:       "UNKNOWN_STEP_KEY",
		Severity:   SeverityError,
		Message:    fmt.Sprintf("step '%s': unknown key '%s'%s — %s", c.s.name, k, lineOf(key), tail),
		Scope:      "step",
		Key:        k,
		Step:       c.s.name,
		DidYouMean: dym,
	}, key)
}

// str decodes an optional string field; null counts as absent.
func (c *stepCheck) str(p pair) string {
	if isNull(p.Value) {
		return ""
	}
	s, ok := stringValue(p.Value)
	if !ok {
		c.errf("'%s' must be a string%s", p.Key.Value, lineOf(p.Key))
	}
	return s
}

// posInt decodes an integer > 0; name is the field as messages spell it.
func (c *stepCheck) posInt(p pair, name, suffix string) int {
	f, ok := number(p.Value)
	if !ok || f <= 0 || f != math.Trunc(f) || f > math.MaxInt32 {
		c.errf("'%s' must be a positive integer%s", name, suffix)
		return 0
	}
	return int(f)
}

// condList decodes a condition or a non-empty list of conditions.
func (c *stepCheck) condList(p pair) []string {
	k := p.Key.Value
	if s, ok := stringValue(p.Value); ok {
		return []string{s}
	}
	if isSeq(p.Value) {
		l, ok := stringList(p.Value)
		if !ok {
			c.errf("'%s' must be a condition or a list of conditions (strings)%s", k, lineOf(p.Key))
			return nil
		}
		if len(l) == 0 {
			c.errf("'%s' array must not be empty%s", k, lineOf(p.Key))
		}
		return l
	}
	c.errf("'%s' must be a condition or a non-empty list of conditions (found %s)%s", k, kindName(p.Value), lineOf(p.Key))
	return nil
}

func oneOf(v string, allowed []string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}

func quoteAlternatives(vals []string) string {
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = "'" + v + "'"
	}
	if len(q) <= 2 {
		return strings.Join(q, " or ")
	}
	return strings.Join(q[:len(q)-1], ", ") + ", or " + q[len(q)-1]
}

// field decodes one accepted field into the Step.
func (c *stepCheck) field(p pair) {
	st := c.st
	k := p.Key.Value
	at := lineOf(p.Key)
	switch k {
	case "depends_on":
		if isNull(p.Value) {
			return
		}
		deps, ok := stringList(p.Value)
		if !ok {
			c.errf("'depends_on' must be a list of step names%s", at)
			return
		}
		seen := map[string]bool{}
		for _, d := range deps {
			if !seen[d] {
				seen[d] = true
				st.DependsOn = append(st.DependsOn, d)
			}
		}
	case "trigger_rule":
		v, _ := stringValue(p.Value)
		if !oneOf(v, triggerRules) {
			c.errf("invalid trigger_rule value '%s'; must be %s%s", scalarText(p.Value), quoteAlternatives(triggerRules), at)
			return
		}
		st.TriggerRule = v
	case "when":
		st.When = c.condList(p)
	case "abort_unless":
		st.AbortUnless = c.condList(p)
	case "preconditions":
		l, ok := stringList(p.Value)
		if !ok {
			c.errf("'preconditions' must be an array of strings%s", at)
			return
		}
		st.Preconditions = l
	case "uses_service":
		st.UsesService = c.str(p)
	case "service_method":
		v, _ := stringValue(p.Value)
		if !oneOf(v, []string{"fetch", "create", "update", "delete"}) {
			c.errf("invalid service_method value '%s'; must be 'fetch', 'create', 'update', or 'delete'%s", scalarText(p.Value), at)
			return
		}
		st.ServiceMethod = v
	case "operation":
		st.Operation = c.str(p)
	case "handler":
		st.Handler = c.str(p)
	case "prompt":
		st.Prompt = c.str(p)
	case "instructions":
		st.Instructions = c.str(p)
	case "agent_profile":
		st.AgentProfile = c.str(p)
	case "display":
		st.Display = c.str(p)
	case "abort_message":
		st.AbortMessage = c.str(p)
	case "input_map":
		c.inputMap(p)
	case "config":
		if isNull(p.Value) {
			return
		}
		if !isMap(p.Value) {
			c.errf("'config' must be an object%s", at)
			return
		}
		if m, _ := c.l.jsonOf(p.Value, fmt.Sprintf("Step '%s': 'config'", c.s.name)).(map[string]any); len(m) > 0 {
			st.Config = m
		}
	case "timeout_seconds":
		st.TimeoutSeconds = c.posInt(p, k, at)
	case "llm_timeout_seconds":
		st.LLMTimeoutSeconds = c.posInt(p, k, at)
	case "max_tool_calls":
		st.MaxToolCalls = c.posInt(p, k, at)
	case "max_fan_out":
		st.MaxFanOut = c.posInt(p, k, at)
	case "tool_timeout":
		st.ToolTimeout = c.posInt(p, k, at)
	case "idempotent":
		b, ok := boolean(p.Value)
		if !ok {
			c.errf("'idempotent' must be true or false%s", at)
		}
		st.Idempotent = b
	case "retry":
		c.retry(p)
	case "input_schema", "output_schema", "trace_schema":
		if isNull(p.Value) {
			c.nullSchemas[k] = true
			return
		}
		v := c.l.jsonOf(p.Value, fmt.Sprintf("Step '%s': '%s'", c.s.name, k))
		c.schemaVals[k] = v
		switch k {
		case "input_schema":
			st.InputSchema = v
		case "output_schema":
			st.OutputSchema = v
		default:
			st.TraceSchema = v
		}
	case "structured_output":
		v, _ := stringValue(p.Value)
		if v != "strict" {
			c.errf("'structured_output' accepts only 'strict' (found: '%s'); remove the field to leave it off%s", scalarText(p.Value), at)
			return
		}
		st.StructuredOutput = v
	case "validation_exhaustion":
		c.validationExhaustion(p)
	case "tools":
		l, ok := stringList(p.Value)
		if !ok {
			c.errf("'tools' must be a list of '<server>:<tool>' names%s", at)
			return
		}
		st.Tools = l
	case "trace_validation_mode":
		v, _ := stringValue(p.Value)
		if v != "warn" && v != "enforce" {
			c.errf("'trace_validation_mode' must be 'warn' or 'enforce' (found: '%s')%s", scalarText(p.Value), at)
			return
		}
		st.TraceValidationMode = v
	case "trust":
		c.trust(p)
	case "gate":
		// Checked in crossFields: it needs trust and input_schema.
	case "on_outcome":
		var vals []string
		if s, ok := stringValue(p.Value); ok {
			vals = []string{s}
		} else if l, ok := stringList(p.Value); ok && len(l) > 0 {
			vals = l
		} else {
			c.errf("'on_outcome' must be one of %s, or a non-empty list of them%s", quoteAlternatives(onOutcomes), at)
			return
		}
		for _, v := range vals {
			if !oneOf(v, onOutcomes) {
				c.errf("invalid on_outcome value '%s'; must be %s%s", v, quoteAlternatives(onOutcomes), at)
				return
			}
		}
		st.OnOutcome = vals
	}
}

// kindRequirements checks the fields each kind requires (spec §4.3).
func (c *stepCheck) kindRequirements() {
	st := c.st
	switch c.kind {
	case KindGuard:
		if _, ok := c.use["abort_unless"]; !ok {
			c.errf("execution: guard requires 'abort_unless'%s", c.at())
		}
	case KindFinalizer:
		if _, ok := c.use["on_outcome"]; !ok {
			c.errf("execution: finalizer requires 'on_outcome'%s", c.at())
		}
		if st.Handler == "" {
			c.errf("execution: finalizer requires 'handler' (handler-only in v1)%s", c.at())
		}
	}
}

// crossFields checks rules that join several fields of one step.
func (c *stepCheck) crossFields() {
	st := c.st
	if st.UsesService != "" {
		if _, ok := c.l.def.Services[st.UsesService]; !ok {
			c.errf("uses_service '%s' is not defined in 'services'%s", st.UsesService, c.at())
		}
		if c.kind == KindAuto && st.Handler != "" {
			c.errf("declares both 'handler' and 'uses_service' — an auto step runs a handler or calls a service, not both; split the work into two steps%s", c.at())
		}
	}
	if p, ok := c.use["tools"]; ok && st.Tools != nil {
		if _, ok := c.use["input_schema"]; !ok {
			c.errf("'tools' requires an 'input_schema' on the step (the answer the model produces after its tool calls)%s", lineOf(p.Key))
		}
		if len(c.l.def.MCPServers) == 0 {
			c.errf("'tools' requires a top-level 'mcp_servers' block declaring the servers the tools come from%s", lineOf(p.Key))
		} else {
			for _, t := range st.Tools {
				server, tool, found := strings.Cut(t, ":")
				switch {
				case !found || server == "" || tool == "":
					c.errf("tool '%s' must be written '<server>:<tool>'%s", t, lineOf(p.Key))
				case !c.l.mcpIDs[server]:
					c.errf("tool '%s' names MCP server '%s', which is not declared in 'mcp_servers'%s", t, server, lineOf(p.Key))
				}
			}
		}
	}
	if p, ok := c.use["tool_timeout"]; ok && len(st.Tools) == 0 {
		c.errf("'tool_timeout' requires 'tools' — it bounds each tool call%s", lineOf(p.Key))
	}
	if p, ok := c.use["retry"]; ok {
		c.retryRules(p)
	}
	if p, ok := c.use["validation_exhaustion"]; ok && st.ValidationExhaustion != nil {
		ve := st.ValidationExhaustion
		if ve.Mode == "default" && !ve.HasDefaultOutput {
			c.errf("'validation_exhaustion.mode: default' requires 'default_output' (nothing to substitute on exhaustion)%s", c.at())
		}
		if ve.HasDefaultOutput {
			if _, ok := c.use["output_schema"]; !ok {
				c.errf("'validation_exhaustion.default_output' requires the step to declare 'output_schema' (an undeclared schema makes the default unvalidatable)%s", c.at())
			}
			if ve.Mode != "default" {
				c.warnf("DEAD_VALIDATION_EXHAUSTION_CONFIG", p.Key, "default_output", "'validation_exhaustion.default_output' is ignored without 'validation_exhaustion.mode: default' — set it, or remove 'default_output'.")
			}
		}
	}
	if c.kind == KindAgent {
		_, in := c.use["input_schema"]
		p, out := c.use["output_schema"]
		if in && out {
			c.warnf("DUAL_SCHEMA_DECLARED", p.Key, "output_schema", "declares both 'input_schema' and 'output_schema' — every answer must fit both; declare one schema unless both checks are intended.")
		}
	}
	if p, ok := c.use["gate"]; ok {
		c.gate(p)
	}
}
