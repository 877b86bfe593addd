package workflow

// cell is one entry of the field × kind matrix (spec §4.2).
type cell byte

const (
	yes   cell = 'y' // used
	no    cell = 'n' // refused at load
	inert cell = '-' // accepted, no effect
	na    cell = 'x' // replaced before the kind is looked at (use_template)
)

// kinds in matrix column order.
var kinds = []Kind{KindAuto, KindAgent, KindGuard, KindFinalizer}

func kindIndex(k Kind) int {
	for i, x := range kinds {
		if x == k {
			return i
		}
	}
	return -1
}

// stepFields are the 36 step fields in the spec's order.
var stepFields = []string{
	"description", "execution", "use_template", "depends_on", "trigger_rule", "when",
	"preconditions", "uses_service", "service_method", "operation", "input_map",
	"handler", "config", "timeout_seconds", "retry", "idempotent", "prompt",
	"instructions", "agent_profile", "input_schema", "output_schema",
	"structured_output", "validation_exhaustion", "llm_timeout_seconds", "tools",
	"max_tool_calls", "max_fan_out", "tool_timeout", "trace_schema",
	"trace_validation_mode", "trust", "gate", "display", "abort_unless",
	"abort_message", "on_outcome",
}

// matrix says which kinds accept each field: auto, agent, guard, finalizer.
var matrix = map[string][4]cell{
	"description":           {yes, yes, yes, yes},
	"execution":             {yes, yes, yes, yes},
	"use_template":          {na, na, na, na},
	"depends_on":            {yes, yes, yes, no},
	"trigger_rule":          {yes, yes, no, no},
	"when":                  {yes, yes, yes, no},
	"preconditions":         {yes, yes, no, inert},
	"uses_service":          {yes, inert, no, no},
	"service_method":        {yes, inert, no, no},
	"operation":             {yes, inert, no, no},
	"input_map":             {yes, no, no, no},
	"handler":               {yes, yes, no, yes},
	"config":                {yes, inert, inert, yes},
	"timeout_seconds":       {yes, no, no, yes},
	"retry":                 {yes, inert, inert, no},
	"idempotent":            {yes, no, no, no},
	"prompt":                {yes, yes, inert, inert},
	"instructions":          {yes, yes, inert, inert},
	"agent_profile":         {no, yes, no, no},
	"input_schema":          {yes, yes, no, inert},
	"output_schema":         {no, yes, no, no},
	"structured_output":     {no, yes, no, no},
	"validation_exhaustion": {no, yes, no, no},
	"llm_timeout_seconds":   {no, yes, no, no},
	"tools":                 {no, yes, no, no},
	"max_tool_calls":        {inert, yes, inert, inert},
	"max_fan_out":           {inert, yes, inert, inert},
	"tool_timeout":          {no, yes, no, no},
	"trace_schema":          {no, yes, no, no},
	"trace_validation_mode": {no, yes, no, no},
	"trust":                 {yes, yes, no, no},
	"gate":                  {yes, yes, inert, inert},
	"display":               {yes, yes, inert, inert},
	"abort_unless":          {no, no, yes, no},
	"abort_message":         {no, no, yes, no},
	"on_outcome":            {no, no, no, yes},
}

// timeoutOnAgent is the one refusal the docs publish verbatim (spec §4.2).
const timeoutOnAgent = "'timeout_seconds' is not valid on execution: agent steps — the engine never enforces it there (agent dispatch is never wrapped in a timeout), so the step would LOOK time-bounded while nothing enforced the bound. In realm's own drive the model request is bounded by 'llm_timeout_seconds' (or --llm-timeout) and tool calls by 'tool_timeout'."

// refusalReason explains a 'no' cell. The docs publish only the
// timeout_seconds-on-agent text; the others follow its shape (spec §4.2).
func refusalReason(field string, k Kind) string {
	if r, ok := kindReasons[field+"/"+string(k)]; ok {
		return r
	}
	if r, ok := fieldReasons[field]; ok {
		return r
	}
	switch k {
	case KindGuard:
		return "a guard only evaluates its conditions inside the write that makes it ready; it runs no code, calls no service and takes no answer, so the field would never be read."
	case KindFinalizer:
		return "a finalizer runs its handler once after the run has been sealed, outside the step graph, so the field would never be read."
	}
	return "the engine never reads it on this kind of step."
}

var fieldReasons = map[string]string{
	"depends_on":            "finalizers run after the run has been sealed, chosen by 'on_outcome' rather than by the step graph, so there is nothing to wait for.",
	"trigger_rule":          "the step is not scheduled by its dependencies' outcomes, so the rule would never be applied.",
	"when":                  "finalizers run after the run has been sealed, chosen by 'on_outcome'; a 'when' would never be evaluated.",
	"input_map":             "only auto steps build an input for a handler or service; an agent step's input is the agent's answer.",
	"idempotent":            "it attests that re-running the step is harmless, and only auto steps are ever retried or reclaimed.",
	"agent_profile":         "a profile is text for the model that performs an agent step; no model performs this step.",
	"output_schema":         "only an agent step has an answer to check; use 'input_schema' on auto steps.",
	"structured_output":     "only an agent step's answer is generated by a model that could be constrained.",
	"validation_exhaustion": "only an agent step's answers are refused and counted against a budget.",
	"llm_timeout_seconds":   "only an agent step driven by 'realm agent' makes model requests.",
	"tools":                 "only a model performing an agent step can call tools.",
	"tool_timeout":          "only a model performing an agent step can call tools.",
	"trace_schema":          "only an agent step records trace entries.",
	"trace_validation_mode": "only an agent step records trace entries.",
	"trust":                 "guards and finalizers never open a human gate, so a gate declared here would silently never open.",
	"abort_unless":          "only a guard aborts the run on a condition; put the condition on a guard step that depends on this one.",
	"abort_message":         "only a guard aborts the run on a condition; put the message on a guard step that depends on this one.",
	"on_outcome":            "only finalizers are chosen by the run's outcome; use 'depends_on' with 'trigger_rule' to run a step after another settles.",
	"retry":                 "a finalizer runs once after the run has been sealed; nothing ever retries it.",
}

var kindReasons = map[string]string{
	"trigger_rule/guard":       "a guard is decided when its dependencies have completed; under any other rule it could be decided on data that was never produced.",
	"preconditions/guard":      "a guard's conditions belong in 'abort_unless' (or 'when'); a precondition would block the run instead of deciding it.",
	"timeout_seconds/guard":    "a guard runs no code and is decided inside a write, so there is nothing to bound.",
	"input_schema/guard":       "a guard takes no input.",
	"uses_service/guard":       "a guard runs no code and calls no service.",
	"service_method/guard":     "a guard runs no code and calls no service.",
	"operation/guard":          "a guard runs no code and calls no service.",
	"handler/guard":            "a guard runs no code; its decision is its 'abort_unless' conditions.",
	"uses_service/finalizer":   "finalizers run a handler only (handler-only in v1).",
	"service_method/finalizer": "finalizers run a handler only (handler-only in v1).",
	"operation/finalizer":      "finalizers run a handler only (handler-only in v1).",
	"input_map/finalizer":      "finalizers run a handler only and receive no built input in v1.",
	"input_map/guard":          "a guard runs no code, so no input is built for it.",
}
