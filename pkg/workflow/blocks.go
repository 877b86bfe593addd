package workflow

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

var stepTrusts = []string{TrustAuto, TrustHumanConfirmed, TrustHumanReviewed}

// trust checks a step's trust value (spec §10.1): a typo must never
// silently remove a gate.
func (c *stepCheck) trust(p pair) {
	v := scalarText(p.Value)
	if s, ok := stringValue(p.Value); ok && oneOf(s, stepTrusts) {
		c.st.Trust = s
		return
	}
	switch v {
	case "engine_delivered", "engine_managed", "agent_provided":
		c.errf("'trust: \"%s\"' is a service trust label — it belongs on an entry of the top-level 'services' map, where it is copied into the adapter's config and never opens a gate. A step's 'trust' accepts auto, human_confirmed, human_reviewed.%s", v, lineOf(p.Key))
		return
	}
	msg := fmt.Sprintf("'trust: \"%s\"' is not a recognized value — refused at load: this workflow cannot create a run while the value is wrong, so no step of it — gated or not — ever executes under it. A step's 'trust' accepts auto, human_confirmed, human_reviewed.", v)
	if dym := suggest(v, stepTrusts); dym != "" {
		msg += fmt.Sprintf(" Did you mean '%s'?", dym)
	}
	msg += " Correct the value, or remove 'trust' for a step without a gate."
	c.errf("%s%s", msg, lineOf(p.Key))
}

var gateKeys = []string{"choices", "message", "owner", "resolution_messages", "timeout_seconds", "on_expiry", "default_choice", "reminder_seconds", "reminder_max", "before"}

// gate checks the gate block (spec §10.2). It is read only when the step's
// trust opens a gate; otherwise the block is inert and only warned about.
func (c *stepCheck) gate(p pair) {
	if isNull(p.Value) {
		return
	}
	if !isMap(p.Value) {
		c.errf("'gate' must be an object (keys: %s)%s", strings.Join(gateKeys, ", "), lineOf(p.Key))
		return
	}
	gated := c.st.Gated()
	if !gated {
		c.warnf("DEAD_GATE_CONFIG", p.Key, "gate", "the 'gate:' block is inert — this step declares no gate trust, so no gate ever opens; set 'trust: human_confirmed', or remove 'gate:'.")
	}
	// errf reports only for gated steps: an inert block is not read.
	errf := func(format string, args ...any) {
		if gated {
			c.errf(format, args...)
		}
	}
	g := &Gate{}
	keys := map[string]pair{}
	for _, f := range pairs(p.Value) {
		k := f.Key.Value
		keys[k] = f
		at := lineOf(f.Key)
		switch k {
		case "choices":
			if !isSeq(f.Value) {
				continue // a non-list choices is silently ignored (spec §10.2)
			}
			items := deref(f.Value).Content
			if len(items) == 0 {
				errf("'gate.choices', when declared, must be non-empty — an empty list leaves the gate with no answer anyone could give. Declare at least one choice, or remove the key to fall back to 'input_schema.properties.choice.enum' or the default pair (approve/reject).%s", at)
				continue
			}
			for _, it := range items {
				g.Choices = append(g.Choices, scalarText(it))
			}
		case "message", "owner", "default_choice":
			s, ok := stringValue(f.Value)
			if !ok && !isNull(f.Value) {
				errf("'gate.%s' must be a string%s", k, at)
			}
			switch k {
			case "message":
				g.Message = s
			case "owner":
				g.Owner = s
			default:
				g.DefaultChoice = s
			}
		case "resolution_messages":
			m, ok := stringMap(f.Value)
			if !ok && !isNull(f.Value) {
				errf("'gate.resolution_messages' must map each choice to a string%s", at)
			}
			if len(m) > 0 {
				g.ResolutionMessages = m
			}
		case "timeout_seconds":
			if n, ok := positiveInt(f.Value); ok {
				g.TimeoutSeconds = n
			} else {
				errf("'gate.timeout_seconds' must be a positive integer%s", c.at())
			}
		case "on_expiry":
			s, _ := stringValue(f.Value)
			if s != "settle_default" && s != "abort" {
				errf("'gate.on_expiry' must be 'settle_default' or 'abort' (got: \"%s\")%s", scalarText(f.Value), at)
				continue
			}
			g.OnExpiry = s
		case "before":
			b, ok := boolean(f.Value)
			if !ok {
				errf("'gate.before' must be true or false%s", at)
				continue
			}
			g.Before = b
		case "reminder_seconds", "reminder_max":
			n, ok := positiveInt(f.Value)
			if !ok {
				errf("'gate.%s' must be a positive integer%s", k, at)
				continue
			}
			if k == "reminder_seconds" {
				g.ReminderSeconds = n
			} else {
				g.ReminderMax = n
			}
		default:
			if gated {
				c.nestedUnknown("UNKNOWN_GATE_KEY", "gate", f.Key, gateKeys)
			}
		}
	}
	c.st.Gate = g
	if !gated {
		return
	}
	if g.Before && (c.kind != KindAuto || c.st.Handler == "" && c.st.UsesService == "") {
		c.errf("'gate.before: true' applies to an auto step whose work is a handler or a service: the person approves before that work is called. This step calls none — remove 'gate.before'.%s", c.at())
	}
	if g.OnExpiry == "settle_default" && g.DefaultChoice == "" {
		c.errf("'gate.on_expiry: settle_default' requires 'gate.default_choice' (nothing to resolve the gate with on expiry)%s", c.at())
	}
	if g.DefaultChoice != "" {
		choices := c.st.EffectiveChoices()
		if !oneOf(g.DefaultChoice, choices) {
			c.errf("'gate.default_choice' (\"%s\") is not one of the step's effective choices: %s%s", g.DefaultChoice, strings.Join(choices, ", "), c.at())
		}
	}
	if f, ok := keys["on_expiry"]; ok && g.OnExpiry != "" && g.TimeoutSeconds == 0 {
		c.warnf("DEAD_GATE_CONFIG", f.Key, "on_expiry", "'gate.on_expiry' is ignored without 'gate.timeout_seconds' — set a timeout, or remove 'gate.on_expiry'.")
	}
	if f, ok := keys["default_choice"]; ok && g.DefaultChoice != "" && g.OnExpiry != "settle_default" {
		c.warnf("DEAD_GATE_CONFIG", f.Key, "default_choice", "'gate.default_choice' is ignored without 'gate.on_expiry: settle_default' — set it, or remove 'gate.default_choice'.")
	}
	if f, ok := keys["reminder_seconds"]; ok && g.ReminderSeconds > 0 && g.TimeoutSeconds > 0 && g.ReminderSeconds >= g.TimeoutSeconds {
		c.warnf("DEAD_GATE_CONFIG", f.Key, "reminder_seconds", "'gate.reminder_seconds' (%d) >= 'gate.timeout_seconds' (%d) — the first reminder would never fire before the gate expires.", g.ReminderSeconds, g.TimeoutSeconds)
	}
}

// nestedUnknown warns about an unknown key inside a step block.
func (c *stepCheck) nestedUnknown(code, block string, key *yaml.Node, known []string) {
	dym := suggest(key.Value, known)
	tail := fmt.Sprintf("ignored (not a recognized %s field).", strings.ReplaceAll(block, "_", " "))
	if dym != "" {
		tail = fmt.Sprintf("ignored (did you mean '%s'?)", dym)
	}
	c.l.warn(Diagnostic{
		Code:       code,
		Message:    fmt.Sprintf("Step '%s': %s: unknown key '%s'%s — %s", c.s.name, block, key.Value, lineOf(key), tail),
		Scope:      "step",
		Step:       c.s.name,
		Key:        key.Value,
		DidYouMean: dym,
	}, key)
}

// positiveInt decodes an integer > 0.
func positiveInt(n *yaml.Node) (int, bool) {
	f, ok := number(n)
	if !ok || f <= 0 || f != float64(int64(f)) || f > 1<<31-1 {
		return 0, false
	}
	return int(f), true
}

// MaxAttempts bounds retry.max_attempts.
const MaxAttempts = 100

var retryKeys = []string{"max_attempts", "backoff", "base_delay_ms", "max_delay_ms", "on_timeout", "total_timeout_seconds"}

// retry decodes the retry block (spec §12.2).
func (c *stepCheck) retry(p pair) {
	if isNull(p.Value) {
		return
	}
	if !isMap(p.Value) {
		c.errf("'retry' must be an object (keys: %s)%s", strings.Join(retryKeys, ", "), lineOf(p.Key))
		return
	}
	r := &Retry{}
	for _, f := range pairs(p.Value) {
		at := lineOf(f.Key)
		switch f.Key.Value {
		case "max_attempts", "total_timeout_seconds":
			n, ok := positiveInt(f.Value)
			if !ok {
				c.errf("'retry.%s' must be a positive integer%s", f.Key.Value, at)
				continue
			}
			if f.Key.Value == "max_attempts" {
				if n > MaxAttempts {
					// An attempt costs a handler call and a record entry:
					// a number past this is a typo or a denial of service.
					c.errf("'retry.max_attempts' must be at most %d (got %d)%s", MaxAttempts, n, at)
					continue
				}
				r.MaxAttempts = n
			} else {
				r.TotalTimeoutSeconds = n
			}
		case "backoff":
			s, _ := stringValue(f.Value)
			if s != "fixed" && s != "linear" && s != "exponential" {
				c.errf("'retry.backoff' must be 'fixed', 'linear', or 'exponential'%s", at)
				continue
			}
			r.Backoff = s
		case "base_delay_ms", "max_delay_ms":
			v, ok := number(f.Value)
			if !ok || v < 0 || v != v || v > 1e15 {
				c.errf("'retry.%s' must be a non-negative number%s", f.Key.Value, at)
				continue
			}
			if f.Key.Value == "base_delay_ms" {
				r.BaseDelayMS = v
			} else {
				r.MaxDelayMS = v
			}
		case "on_timeout":
			b, ok := boolean(f.Value)
			if !ok {
				c.errf("'retry.on_timeout' must be true or false%s", at)
				continue
			}
			r.OnTimeout = b
		default:
			c.nestedUnknown("UNKNOWN_RETRY_KEY", "retry", f.Key, retryKeys)
		}
	}
	c.st.Retry = r
}

// retryRules applies the retry rules that need the rest of the step.
func (c *stepCheck) retryRules(p pair) {
	st, r := c.st, c.st.Retry
	if r == nil {
		return
	}
	if c.kind != KindAuto {
		c.warnf("RETRY_INERT_NON_AUTO", p.Key, "retry", "'retry' is inert on execution: '%s' steps — the built-in dispatch path never throws for %s steps, so this block can never mint a second attempt here (for schema-repair budgets, use the CLI drive's '--schema-retries' flag instead). An embedder-supplied throwing dispatcher may still consume this config — a deliberate public-API capability, not an invalid one.", c.kind, c.kind)
		if r.TotalTimeoutSeconds > 0 {
			c.warnf("TOTAL_TIMEOUT_NON_AUTO", p.Key, "total_timeout_seconds", "'retry.total_timeout_seconds' has no effect on execution: '%s' steps — only auto-step attempts are timed and retried.", c.kind)
		}
		return
	}
	if r.OnTimeout && !st.Idempotent {
		c.errf("'retry.on_timeout: true' requires 'idempotent: true' declared on the step — a timeout-retry can run concurrently with the still-in-flight original attempt, so the step must explicitly attest that any partial prior application is harmless to re-apply. Declare 'idempotent: true' or remove 'on_timeout'.%s", c.at())
	}
	if st.TimeoutSeconds == 0 {
		c.warnf("RETRY_NO_TIMEOUT", p.Key, "retry", "declares 'retry' but no 'timeout_seconds' — each attempt is bounded by the default execution timeout (3600s), so a hung attempt holds the step for an hour before the next one starts; set 'timeout_seconds' to bound each attempt.")
	}
	if r.OnTimeout && r.MaxAttempts <= 1 {
		c.warnf("ON_TIMEOUT_SINGLE_ATTEMPT", p.Key, "on_timeout", "'retry.on_timeout: true' has no effect with an effective 'max_attempts' of 1 — there is no second attempt to retry into.")
	}
	if r.TotalTimeoutSeconds > 0 && st.TimeoutSeconds > 0 && r.TotalTimeoutSeconds <= st.TimeoutSeconds {
		c.warnf("TOTAL_TIMEOUT_BELOW_ATTEMPT", p.Key, "total_timeout_seconds", "'retry.total_timeout_seconds: %d' is at or below its per-attempt timeout (%ds) — each attempt is bounded by what remains of the cap, so no retry can ever get a full attempt; raise the cap above 'timeout_seconds' or remove it.", r.TotalTimeoutSeconds, st.TimeoutSeconds)
	}
}

var validationExhaustionKeys = []string{"threshold", "mode", "default_output"}

// validationExhaustion decodes the refusal budget (spec §11.1).
func (c *stepCheck) validationExhaustion(p pair) {
	if isNull(p.Value) {
		return
	}
	if !isMap(p.Value) {
		c.errf("'validation_exhaustion' must be an object (keys: threshold, mode, default_output)%s", lineOf(p.Key))
		return
	}
	ve := &ValidationExhaustion{}
	for _, f := range pairs(p.Value) {
		at := lineOf(f.Key)
		switch f.Key.Value {
		case "threshold":
			n, ok := positiveInt(f.Value)
			if !ok {
				c.errf("'validation_exhaustion.threshold' must be a positive integer%s", at)
				continue
			}
			ve.Threshold = n
		case "mode":
			s, _ := stringValue(f.Value)
			if s != "fail" && s != "default" {
				c.errf("'validation_exhaustion.mode' must be 'fail' or 'default' (found: '%s')%s", scalarText(f.Value), at)
				continue
			}
			ve.Mode = s
		case "default_output":
			ve.DefaultOutput = c.l.jsonOf(f.Value, fmt.Sprintf("Step '%s': 'validation_exhaustion.default_output'", c.s.name))
			ve.HasDefaultOutput = true
		default:
			c.nestedUnknown("UNKNOWN_VALIDATION_EXHAUSTION_KEY", "validation_exhaustion", f.Key, validationExhaustionKeys)
		}
	}
	c.st.ValidationExhaustion = ve
}

// maxInputMapDepth is the deepest nesting input_map accepts (spec §8.1).
const maxInputMapDepth = 10

// inputMap checks and decodes input_map (spec §8.1).
func (c *stepCheck) inputMap(p pair) {
	if isNull(p.Value) {
		return
	}
	if !isMap(p.Value) {
		c.errf("'input_map' must be an object mapping input names to context paths, nested maps, or {$literal: …}%s", lineOf(p.Key))
		return
	}
	ok := true
	budget := maxNodes // aliases can multiply what a small file names
	var walk func(n *yaml.Node, path string, depth int)
	walk = func(n *yaml.Node, path string, depth int) {
		budget--
		if !ok || budget < 0 {
			return
		}
		if depth > maxInputMapDepth {
			c.errf("input_map path \"%s\": exceeded maximum nesting depth of %d%s", path, maxInputMapDepth, c.at())
			ok = false
			return
		}
		if isString(n) {
			return
		}
		if !isMap(n) {
			c.errf("input_map path \"%s\": expected a string or object, got %s%s", path, kindName(n), c.at())
			ok = false
			return
		}
		entries := pairs(n)
		for _, e := range entries {
			if e.Key.Value == "$literal" {
				if len(entries) > 1 {
					c.errf("input_map path \"%s\": $literal node must have exactly one key ($literal); found sibling keys%s", path, c.at())
					ok = false
				}
				return
			}
		}
		for _, e := range entries {
			k := e.Key.Value
			sub := k
			if path != "" {
				sub = path + "." + k
			}
			if strings.HasPrefix(k, "$") {
				c.errf("input_map path \"%s\": unknown directive '%s' — supported directives: $literal. Did you mean '$literal'? To pass literal data containing $-keys, wrap the subtree in $literal. input_map values are context paths, nested maps, or $literal — templated strings are not supported.%s", sub, k, c.at())
				ok = false
				return
			}
			walk(e.Value, sub, depth+1)
		}
	}
	for _, e := range pairs(p.Value) {
		if strings.HasPrefix(e.Key.Value, "$") {
			walk(p.Value, "", 1)
			break
		}
		walk(e.Value, e.Key.Value, 1)
	}
	if !ok {
		return
	}
	if m, _ := c.l.jsonOf(p.Value, fmt.Sprintf("Step '%s': 'input_map'", c.s.name)).(map[string]any); len(m) > 0 {
		c.st.InputMap = m
	}
}
