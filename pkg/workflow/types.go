// Package workflow holds the workflow definition: its Go types, the YAML
// loader that builds them from a workflow file (with every problem named at
// once, positioned by line), and the report `realm workflow validate` prints.
//
// A Definition is what the engine stores as the registered copy. It is plain
// JSON: schemas, configs and input maps stay JSON values (any), never re-typed.
package workflow

// Kind is a step's execution kind.
type Kind string

// The four step kinds.
const (
	KindAuto      Kind = "auto"
	KindAgent     Kind = "agent"
	KindGuard     Kind = "guard"
	KindFinalizer Kind = "finalizer"
)

// Trigger rules (spec §6.3).
const (
	RuleAllSuccess = "all_success"
	RuleAllFailed  = "all_failed"
	RuleAllDone    = "all_done"
	RuleOneFailed  = "one_failed"
	RuleOneSuccess = "one_success"
	RuleNoneFailed = "none_failed"
)

// Trust values for steps (spec §10.1).
const (
	TrustAuto           = "auto"
	TrustHumanConfirmed = "human_confirmed"
	TrustHumanReviewed  = "human_reviewed"
)

// DefaultValidationThreshold is the refusal limit of every agent step that
// has a schema (spec §11.1).
const DefaultValidationThreshold = 6

// SchemaVersion is the version of the registered-copy layout we write.
const SchemaVersion = 1

// Definition is a loaded, validated workflow: the registered copy.
type Definition struct {
	ID           string  `json:"id"`
	Name         string  `json:"name"`
	Description  string  `json:"description,omitempty"`
	Version      float64 `json:"version"`
	ParamsSchema any     `json:"params_schema,omitempty"`

	Protocol        *Protocol               `json:"protocol,omitempty"`
	Services        map[string]*Service     `json:"services,omitempty"`
	MCPServers      []MCPServer             `json:"mcp_servers,omitempty"`
	Steps           map[string]*Step        `json:"steps"`
	ProfilesDir     string                  `json:"profiles_dir,omitempty"`
	Extensions      []string                `json:"extensions,omitempty"`
	WorkflowContext map[string]ContextEntry `json:"workflow_context,omitempty"`
	ContextWrapper  string                  `json:"context_wrapper,omitempty"`
	Trigger         map[string]any          `json:"trigger,omitempty"`

	// StepOrder is the steps' order in the file (after template expansion).
	// Order carries no meaning for execution; it breaks ties in messages.
	StepOrder []string `json:"step_order"`

	// ExtensionKeys are the top-level x- keys, kept verbatim, never read.
	ExtensionKeys map[string]any `json:"extension_keys,omitempty"`

	// Realm-written fields (never accepted from a file).
	SourceDir        string            `json:"source_dir,omitempty"`
	ResolvedProfiles map[string]string `json:"resolved_profiles,omitempty"`
	// ResolvedContext holds each workflow_context entry's text as whoever
	// registered the workflow read it beside the file: an engine replica
	// cannot read the author's files, so the texts travel with the
	// registered copy, and each run snapshots them when it is created.
	ResolvedContext map[string]ContextText `json:"resolved_context,omitempty"`
	SchemaVersion   int                    `json:"schema_version"`
	Origin          string                 `json:"origin,omitempty"`
	Model           string                 `json:"model,omitempty"`
	Agent           string                 `json:"agent,omitempty"`
}

// Protocol overrides what get_workflow_protocol returns (spec §3.3).
type Protocol struct {
	QuickStart string   `json:"quick_start,omitempty"`
	Rules      []string `json:"rules,omitempty"`
}

// Service is one entry of the top-level services map (spec §3.4).
type Service struct {
	Adapter   string         `json:"adapter"`
	Trust     string         `json:"trust,omitempty"`
	RateLimit map[string]any `json:"rate_limit,omitempty"`
}

// MCPServer is one entry of mcp_servers (spec §3.5). Transport stdio
// starts Command with Args and Env; transport http (streamable HTTP, not
// in the original) reaches URL with Headers. '${NAME}' in Env and Headers
// values is expanded from the driver's environment when it connects.
type MCPServer struct {
	ID        string            `json:"id"`
	Transport string            `json:"transport"`
	Command   string            `json:"command,omitempty"`
	Args      []string          `json:"args,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	URL       string            `json:"url,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
}

// ContextEntry is one entry of workflow_context (spec §3.8).
type ContextEntry struct {
	Path        string `json:"path"`
	Description string `json:"description,omitempty"`
}

// ContextText is one workflow_context file as it was read at registration:
// its text, or the reader's error (then Content is empty, spec §3.8).
type ContextText struct {
	SourcePath string `json:"source_path"`
	Content    string `json:"content"`
	Error      string `json:"error,omitempty"`
}

// Step is one step of a workflow. Conditions are kept as written; the
// engine parses them with package condition (the loader has already
// checked that they parse).
type Step struct {
	// Name is the step's key under steps. Set by the loader.
	Name string `json:"name"`
	// Line is where the step starts in the file (0 when unknown).
	Line int `json:"line,omitempty"`

	Description string `json:"description"`
	Execution   Kind   `json:"execution"`

	DependsOn     []string `json:"depends_on,omitempty"`
	TriggerRule   string   `json:"trigger_rule,omitempty"`
	When          []string `json:"when,omitempty"`
	Preconditions []string `json:"preconditions,omitempty"`

	UsesService    string         `json:"uses_service,omitempty"`
	ServiceMethod  string         `json:"service_method,omitempty"`
	Operation      string         `json:"operation,omitempty"`
	InputMap       map[string]any `json:"input_map,omitempty"`
	Handler        string         `json:"handler,omitempty"`
	Config         map[string]any `json:"config,omitempty"`
	TimeoutSeconds int            `json:"timeout_seconds,omitempty"`
	Retry          *Retry         `json:"retry,omitempty"`
	Idempotent     bool           `json:"idempotent,omitempty"`

	Prompt               string                `json:"prompt,omitempty"`
	Instructions         string                `json:"instructions,omitempty"`
	AgentProfile         string                `json:"agent_profile,omitempty"`
	InputSchema          any                   `json:"input_schema,omitempty"`
	OutputSchema         any                   `json:"output_schema,omitempty"`
	StructuredOutput     string                `json:"structured_output,omitempty"`
	ValidationExhaustion *ValidationExhaustion `json:"validation_exhaustion,omitempty"`
	LLMTimeoutSeconds    int                   `json:"llm_timeout_seconds,omitempty"`
	Tools                []string              `json:"tools,omitempty"`
	MaxToolCalls         int                   `json:"max_tool_calls,omitempty"`
	MaxFanOut            int                   `json:"max_fan_out,omitempty"`
	ToolTimeout          int                   `json:"tool_timeout,omitempty"`
	TraceSchema          any                   `json:"trace_schema,omitempty"`
	TraceValidationMode  string                `json:"trace_validation_mode,omitempty"`

	Trust   string `json:"trust,omitempty"`
	Gate    *Gate  `json:"gate,omitempty"`
	Display string `json:"display,omitempty"`

	AbortUnless  []string `json:"abort_unless,omitempty"`
	AbortMessage string   `json:"abort_message,omitempty"`

	OnOutcome []string `json:"on_outcome,omitempty"`
}

// Retry is a step's retry block (spec §12.2).
type Retry struct {
	MaxAttempts         int     `json:"max_attempts,omitempty"`
	Backoff             string  `json:"backoff,omitempty"`
	BaseDelayMS         float64 `json:"base_delay_ms,omitempty"`
	MaxDelayMS          float64 `json:"max_delay_ms,omitempty"`
	OnTimeout           bool    `json:"on_timeout,omitempty"`
	TotalTimeoutSeconds int     `json:"total_timeout_seconds,omitempty"`
}

// ValidationExhaustion is an agent step's refusal budget (spec §11.1).
type ValidationExhaustion struct {
	Threshold     int    `json:"threshold,omitempty"`
	Mode          string `json:"mode,omitempty"`
	DefaultOutput any    `json:"default_output,omitempty"`
	// HasDefaultOutput tells a declared null default from none.
	HasDefaultOutput bool `json:"has_default_output,omitempty"`
}

// Gate is a step's gate block (spec §10.2).
type Gate struct {
	Choices            []string          `json:"choices,omitempty"`
	Message            string            `json:"message,omitempty"`
	Owner              string            `json:"owner,omitempty"`
	ResolutionMessages map[string]string `json:"resolution_messages,omitempty"`
	TimeoutSeconds     int               `json:"timeout_seconds,omitempty"`
	OnExpiry           string            `json:"on_expiry,omitempty"`
	DefaultChoice      string            `json:"default_choice,omitempty"`
	ReminderSeconds    int               `json:"reminder_seconds,omitempty"`
	ReminderMax        int               `json:"reminder_max,omitempty"`
	// Before puts the question before the step's handler or service call
	// (beyond the original, which asks after the work ran): the work is
	// called only when the answer is the first effective choice.
	Before bool `json:"before,omitempty"`
}

// GatedBefore reports whether the step's question comes before its work.
func (s *Step) GatedBefore() bool { return s.Gated() && s.Gate != nil && s.Gate.Before }

// Gated reports whether the step opens a human gate.
func (s *Step) Gated() bool {
	return s.Trust == TrustHumanConfirmed || s.Trust == TrustHumanReviewed
}

// Rule returns the step's trigger rule, defaulting to all_success.
func (s *Step) Rule() string {
	if s.TriggerRule == "" {
		return RuleAllSuccess
	}
	return s.TriggerRule
}

// BuildsInput reports whether an auto step's input is what its input_map
// builds (spec §8.1): only code — a handler or a service's adapter —
// receives it; a bare auto step records its pass-through output whatever
// the map says. Its input_schema checks that input.
func (s *Step) BuildsInput() bool {
	return len(s.InputMap) > 0 && (s.Handler != "" || s.UsesService != "")
}

// HasSchema reports whether an agent step's answer is checked.
func (s *Step) HasSchema() bool { return s.InputSchema != nil || s.OutputSchema != nil }

// Threshold is the refusal count that ends the step.
func (s *Step) Threshold() int {
	if s.ValidationExhaustion != nil && s.ValidationExhaustion.Threshold > 0 {
		return s.ValidationExhaustion.Threshold
	}
	return DefaultValidationThreshold
}

// EffectiveChoices are the answers a gate on this step accepts: gate.choices,
// else input_schema.properties.choice.enum, else approve/reject (spec §10.2).
func (s *Step) EffectiveChoices() []string {
	if s.Gate != nil && len(s.Gate.Choices) > 0 {
		return s.Gate.Choices
	}
	if m, ok := s.InputSchema.(map[string]any); ok {
		if props, ok := m["properties"].(map[string]any); ok {
			if choice, ok := props["choice"].(map[string]any); ok {
				if enum, ok := choice["enum"].([]any); ok && len(enum) > 0 {
					out := make([]string, 0, len(enum))
					for _, e := range enum {
						if s, ok := e.(string); ok {
							out = append(out, s)
						}
					}
					if len(out) > 0 {
						return out
					}
				}
			}
		}
	}
	return []string{"approve", "reject"}
}

// Ordered returns the steps in file order.
func (d *Definition) Ordered() []*Step {
	out := make([]*Step, 0, len(d.Steps))
	for _, name := range d.StepOrder {
		if s, ok := d.Steps[name]; ok {
			out = append(out, s)
		}
	}
	return out
}

// HasFinalizers reports whether any step is a finalizer.
func (d *Definition) HasFinalizers() bool {
	for _, s := range d.Steps {
		if s.Execution == KindFinalizer {
			return true
		}
	}
	return false
}
