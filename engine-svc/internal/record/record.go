// Package record holds the run record: the small JSON document kept per run
// (its step lists, claims, seal, open gate) and the evidence entries appended
// beside it. Step outputs are kept apart from the document (one hash field
// per step) so the document stays small as a run grows.
//
// The phase is derived from the record, never trusted from run_phase
// (run-record spec §5.1); Phase() is that derivation.
package record

import (
	"maps"
	"slices"
	"time"
)

// Phases.
const (
	PhaseRunning     = "running"
	PhaseGateWaiting = "gate_waiting"
	PhaseCompleted   = "completed"
	PhaseFailed      = "failed"
	PhaseAborted     = "aborted"
	PhaseAbandoned   = "abandoned"
)

// Arm is how a run was sealed (run-record spec §5.2): a value the engine
// branches on, never a sentence.
type Arm string

// Seal arms.
const (
	ArmComplete               Arm = "complete"
	ArmGateResolutionComplete Arm = "gate_resolution_complete"
	ArmGuardPassComplete      Arm = "guard_pass_complete"
	ArmGateExpiryDefault      Arm = "gate_expiry_default"
	ArmStepFailure            Arm = "step_failure"
	ArmGuardResolutionError   Arm = "guard_resolution_error"
	ArmSpawnFailure           Arm = "spawn_failure"
	ArmExtensionsLoadFailure  Arm = "extensions_load_failure"
	ArmHandlerAbort           Arm = "handler_abort"
	ArmGuardAbort             Arm = "guard_abort"
	ArmGateExpiryAbort        Arm = "gate_expiry_abort"
	ArmAbandonRequested       Arm = "abandon_requested"
	ArmCleanupSweep           Arm = "cleanup_sweep"
)

// ArmPhase is the phase each arm ends in.
var ArmPhase = map[Arm]string{
	ArmComplete:               PhaseCompleted,
	ArmGateResolutionComplete: PhaseCompleted,
	ArmGuardPassComplete:      PhaseCompleted,
	ArmGateExpiryDefault:      PhaseCompleted,
	ArmStepFailure:            PhaseFailed,
	ArmGuardResolutionError:   PhaseFailed,
	ArmSpawnFailure:           PhaseFailed,
	ArmExtensionsLoadFailure:  PhaseFailed,
	ArmHandlerAbort:           PhaseAborted,
	ArmGuardAbort:             PhaseAborted,
	ArmGateExpiryAbort:        PhaseAborted,
	ArmAbandonRequested:       PhaseAbandoned,
	ArmCleanupSweep:           PhaseAbandoned,
}

// NamesStep reports whether readers name the seal's step with the arm:
// the guard, gate and handler-abort arms (cli spec §3.2). step_failure
// records its step too, but run-record spec §5.2 leaves it unnamed.
func (a Arm) NamesStep() bool {
	switch a {
	case ArmGuardPassComplete, ArmGuardAbort, ArmGuardResolutionError,
		ArmGateResolutionComplete, ArmGateExpiryDefault, ArmGateExpiryAbort, ArmHandlerAbort:
		return true
	}
	return false
}

// TimeFormat is how every time in a record is written: UTC with milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// FormatTime writes t as the record does.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// ParseTime reads a record time; the zero time when empty or malformed.
func ParseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// DefinitionCarried is Run.DefinitionSource of a run that carries its own
// definition.
const DefinitionCarried = "run"

// Run is the run document.
type Run struct {
	ID              string         `json:"id"`
	WorkflowID      string         `json:"workflow_id"`
	WorkflowVersion float64        `json:"workflow_version"`
	Params          map[string]any `json:"params"`
	CreatedAt       string         `json:"created_at"`
	UpdatedAt       string         `json:"updated_at"`
	// Version is run_version: it rises by one on every write.
	Version        int64  `json:"version"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	RerunOf        string `json:"rerun_of,omitempty"`
	ParentRunID    string `json:"parent_run_id,omitempty"`
	// DefinitionSource is DefinitionCarried when the run was started from a
	// workflow file without registering it: its steps are decided by the
	// copy stored with the run, never by the registered copy of its id.
	// Absent: the registered copy (re-read as the run moves).
	DefinitionSource string `json:"definition_source,omitempty"`

	CompletedSteps       []string                    `json:"completed_steps"`
	InProgressSteps      []string                    `json:"in_progress_steps"`
	FailedSteps          []string                    `json:"failed_steps"`
	SkippedSteps         []string                    `json:"skipped_steps"`
	SkipDetails          map[string]*SkipDetail      `json:"skip_details,omitempty"`
	Claims               map[string]*Claim           `json:"claims,omitempty"`
	Settled              map[string]*Settled         `json:"settled,omitempty"`
	CapabilityBlocks     map[string]*CapabilityBlock `json:"capability_blocks,omitempty"`
	ValidationRejections map[string]int              `json:"validation_rejections,omitempty"`
	DefaultedSteps       []string                    `json:"defaulted_steps,omitempty"`
	PendingGate          *PendingGate                `json:"pending_gate,omitempty"`
	StepErrors           map[string]string           `json:"step_errors,omitempty"`
	FinalizerLedger      map[string]*FinalizerStatus `json:"finalizer_ledger,omitempty"`
	// ResolvedGates remembers every answered gate by id, so a repeat of an
	// answer and a late answer to a settled question can be told apart.
	ResolvedGates map[string]*ResolvedGate `json:"resolved_gates,omitempty"`
	DriveFailures *DriveFailures           `json:"drive_failures,omitempty"`
	// WorkflowContextSnapshots are the workflow_context texts the run's
	// prompts, gate messages and displays read: copied from the registered
	// definition when the run is created, so every step sees the same text
	// (run-record §2.4).
	WorkflowContextSnapshots map[string]*ContextSnapshot `json:"workflow_context_snapshots,omitempty"`

	RunPhase       string     `json:"run_phase"`
	TerminalState  bool       `json:"terminal_state"`
	TerminalReason string     `json:"terminal_reason,omitempty"`
	SealedBy       *Seal      `json:"sealed_by,omitempty"`
	AbortedAt      *AbortedAt `json:"aborted_at,omitempty"`
	AbandonedAt    string     `json:"abandoned_at,omitempty"`

	// EvidenceCount and LastStep mirror the evidence list, so readers of
	// the document need not read the list.
	EvidenceCount int64  `json:"evidence_count"`
	LastStep      string `json:"last_step,omitempty"`

	// settledShared: Settled is the map of the run this one was cloned
	// from, copied on the first change (most writes settle one step, and
	// copying the whole map every write was two allocations).
	settledShared bool
}

// ContextSnapshot is one workflow_context entry as the run keeps it: the
// text and its hash, or, for a file that could not be read, an empty text
// and the reader's error (its expressions then stay as written).
type ContextSnapshot struct {
	SourcePath  string `json:"source_path"`
	Content     string `json:"content"`
	ContentHash string `json:"content_hash,omitempty"`
	LoadedAt    string `json:"loaded_at"`
	Error       string `json:"error,omitempty"`
}

// CapabilityBlock marks a step this engine reached but could not run: no
// live runner served its handler or adapter (the step is blocked, not
// failed). The field order is the order the JSON has always had.
type CapabilityBlock struct {
	At          string      `json:"at,omitempty"`
	Code        string      `json:"code,omitempty"`
	Requirement Requirement `json:"requirement"`
}

// Requirement is what a blocked step needs: a handler or an adapter.
type Requirement struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// Requirement kinds.
const (
	RequireHandler = "handler"
	RequireAdapter = "adapter"
)

// SkipDetail says why a step was skipped (run-record spec §4.5).
type SkipDetail struct {
	Kind         string `json:"kind"`
	Expression   string `json:"expression,omitempty"`
	Leaves       []Leaf `json:"leaves,omitempty"`
	Rule         string `json:"rule,omitempty"`
	BlockingDeps []Dep  `json:"blocking_deps,omitempty"`
	GateID       string `json:"gate_id,omitempty"`
}

// Leaf is one evaluated condition.
type Leaf struct {
	Leaf          string `json:"leaf"`
	LHSPresent    bool   `json:"lhs_present"`
	ResolvedValue any    `json:"resolved_value"`
	Passed        bool   `json:"passed"`
}

// Dep is a dependency and the state that decided a trigger rule.
type Dep struct {
	Step  string `json:"step"`
	State string `json:"state"`
}

// Claim is the mark on a step in progress (run-record spec §6).
type Claim struct {
	Token    string  `json:"token"`
	Deadline *string `json:"deadline"`
	Holder   *Holder `json:"holder,omitempty"`
	Since    string  `json:"since,omitempty"`
}

// Holder is the program that took a step.
type Holder struct {
	By       string `json:"by,omitempty"`
	BySource string `json:"by_source,omitempty"`
	Channel  string `json:"channel,omitempty"`
}

// Settled records how a step settled (run-record spec §4.2). One is never
// changed once a run holds it: runs share them (Completed, Clone).
type Settled struct {
	Token      *string `json:"token"`
	Outcome    string  `json:"outcome"`
	Choice     string  `json:"choice,omitempty"`
	ResolvedBy string  `json:"resolved_by,omitempty"`
}

var completed = &Settled{Outcome: "complete"}

// Completed is the settlement of a step that completed with no more to
// say, one value shared by every run.
func Completed() *Settled { return completed }

// PendingGate is the open gate (run-record spec §4.1).
type PendingGate struct {
	GateID             string            `json:"gate_id"`
	StepName           string            `json:"step_name"`
	Preview            any               `json:"preview"`
	Choices            []string          `json:"choices"`
	OpenedAt           string            `json:"opened_at"`
	Owner              string            `json:"owner,omitempty"`
	ResolvedMessage    string            `json:"resolved_message,omitempty"`
	ResolutionMessages map[string]string `json:"resolution_messages,omitempty"`
	ExpiresAt          string            `json:"expires_at,omitempty"`
	OnExpiry           string            `json:"on_expiry,omitempty"`
	DefaultChoice      string            `json:"default_choice,omitempty"`
	ReminderSeconds    int               `json:"reminder_seconds,omitempty"`
	ReminderMax        int               `json:"reminder_max,omitempty"`
}

// DriveFailures are the failed drives `realm agent` recorded (the last 5
// entries kept; run-record spec §4.7).
type DriveFailures struct {
	FirstFailedAt string         `json:"first_failed_at"`
	Total         int64          `json:"total"`
	Entries       []DriveFailure `json:"entries"`
}

// DriveFailure is one failed drive by `realm agent`.
type DriveFailure struct {
	At                   string `json:"at"`
	Step                 string `json:"step,omitempty"`
	Provider             string `json:"provider,omitempty"`
	ErrorClass           string `json:"error_class"`
	Message              string `json:"message,omitempty"`
	ElapsedMS            int64  `json:"elapsed_ms"`
	AttemptsSDK          *int64 `json:"attempts_sdk,omitempty"`
	DeclaredPerAttemptMS *int64 `json:"declared_per_attempt_ms,omitempty"`
	DerivedCeilingMS     *int64 `json:"derived_ceiling_ms,omitempty"`
	LastObservedStatus   *int64 `json:"last_observed_status,omitempty"`
	RetryAfterObservedMS *int64 `json:"retry_after_observed_ms,omitempty"`
	Usage                []any  `json:"usage,omitempty"`
	// Code is the catalogue code of a failure that has one (not in the
	// original's record).
	Code string `json:"code,omitempty"`
	// StructuredOutput discloses a strict request downgraded before the
	// call failed (agent-driver §8.4), as the evidence would have.
	StructuredOutput map[string]any `json:"structured_output,omitempty"`
}

// ResolvedGate is a gate that was answered or settled by its expiry.
type ResolvedGate struct {
	Step       string `json:"step"`
	Choice     string `json:"choice,omitempty"`
	ResolvedBy string `json:"resolved_by,omitempty"`
	ExpiredAt  string `json:"expired_at,omitempty"`
	Token      string `json:"token,omitempty"`
	// EnactedVia names the act that carried out an expired question
	// (respond, advance, timer, sweeper, …).
	EnactedVia string `json:"enacted_via,omitempty"`
	// ApprovesWork: the question came before the step's work (gate.before)
	// and its answer lets the work run.
	ApprovesWork bool `json:"approves_work,omitempty"`
	// OpenedBy and OpenedSince are the question's claim holder and since
	// when it held it: who opened the question, named to a replayed answer.
	OpenedBy    *Holder `json:"opened_by,omitempty"`
	OpenedSince string  `json:"opened_since,omitempty"`
}

// Seal is the machine-readable ending of a run.
type Seal struct {
	Arm        Arm    `json:"arm"`
	Step       string `json:"step,omitempty"`
	Classified bool   `json:"classified,omitempty"`
	// Adjudicated is an operator's ruling on the arm (run-record spec
	// §5.3); kept so no rewrite drops it.
	Adjudicated *Adjudication `json:"adjudicated,omitempty"`
}

// Adjudication is an operator's ruling on a seal.
type Adjudication struct {
	By          string `json:"by"`
	At          string `json:"at"`
	PreviousArm string `json:"previous_arm"`
	Reason      string `json:"reason,omitempty"`
}

// AbortedAt records a guard or handler abort.
type AbortedAt struct {
	StepID       string          `json:"step_id"`
	Conditions   []ConditionEval `json:"conditions,omitempty"`
	AbortMessage string          `json:"abort_message,omitempty"`
}

// ConditionEval is a guard condition as recorded in its output.
type ConditionEval struct {
	Condition     string `json:"condition"`
	ResolvedValue any    `json:"resolved_value"`
	Passed        bool   `json:"passed"`
}

// FinalizerStatus is a finalizer's ledger entry.
type FinalizerStatus struct {
	Status        string `json:"status"`
	Rank          int    `json:"rank"`
	LeaseToken    string `json:"lease_token,omitempty"`
	LeaseDeadline string `json:"lease_deadline,omitempty"`
}

// Entry is one evidence entry (run-record spec §3).
type Entry struct {
	StepID         string         `json:"step_id"`
	Kind           string         `json:"kind,omitempty"`
	Status         string         `json:"status"`
	StartedAt      string         `json:"started_at"`
	CompletedAt    string         `json:"completed_at"`
	DurationMS     int64          `json:"duration_ms"`
	Attempt        int            `json:"attempt,omitempty"`
	InputSummary   any            `json:"input_summary"`
	ResolvedParams any            `json:"resolved_params,omitempty"`
	OutputSummary  any            `json:"output_summary"`
	OutputSource   string         `json:"output_source,omitempty"`
	EvidenceHash   string         `json:"evidence_hash"`
	Error          string         `json:"error,omitempty"`
	Warn           string         `json:"warn,omitempty"`
	Diagnostics    map[string]any `json:"diagnostics,omitempty"`
	GateMessage    string         `json:"gate_message,omitempty"`
	RespondedBy    string         `json:"responded_by,omitempty"`
	// RespondedByVouchedBy is the front door that signed the answerer in
	// and vouched for RespondedBy (beyond the original, whose name is
	// always as stated); empty for a stated name.
	RespondedByVouchedBy string         `json:"responded_by_vouched_by,omitempty"`
	DrivenBy             *Holder        `json:"driven_by,omitempty"`
	ClaimProof           map[string]any `json:"claim_proof,omitempty"`
	Resolution           string         `json:"resolution,omitempty"`
	Trace                []any          `json:"trace,omitempty"`
	TraceSummary         map[string]any `json:"trace_summary,omitempty"`
	EffectiveTimeut      int            `json:"effective_timeout_seconds,omitempty"`
	// ClippedToMS is an attempt's timeout cut to what was left of
	// retry.total_timeout_seconds; ExhaustedBy marks the last attempt of
	// a step whose budget ran out ("total_timeout").
	ClippedToMS int64  `json:"clipped_to_ms,omitempty"`
	ExhaustedBy string `json:"exhausted_by,omitempty"`
	// ToolCalls are the model's tool calls behind an agent step's answer
	// when Realm's driver made them (run-record §3, agent-driver §10.4).
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// DefinitionVersion and DefinitionHash name the definition the engine
	// held when it wrote the entry: its version label and the SHA-256 (hex)
	// of the definition as stored. A re-registration mid-run shows as a
	// change between entries (beyond the original: docs/realm-vs-original.md).
	DefinitionVersion *float64 `json:"definition_version,omitempty"`
	DefinitionHash    string   `json:"definition_hash,omitempty"`
}

// ToolCall is one model tool call of an attempt: result is null when the
// call failed, and error says why.
type ToolCall struct {
	ServerID   string `json:"server_id"`
	Tool       string `json:"tool"`
	Args       any    `json:"args"`
	Result     any    `json:"result"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"`
}

// IsTerminalPhase reports whether p is a terminal phase.
func IsTerminalPhase(p string) bool {
	switch p {
	case PhaseCompleted, PhaseFailed, PhaseAborted, PhaseAbandoned:
		return true
	}
	return false
}

// Phase derives the run's phase from the record (run-record spec §5.1).
func (r *Run) Phase() string {
	if r.AbandonedAt != "" {
		return PhaseAbandoned
	}
	if r.SealedBy != nil {
		if p, ok := ArmPhase[r.SealedBy.Arm]; ok {
			return p
		}
	}
	if r.TerminalState {
		switch {
		case r.AbortedAt != nil:
			return PhaseAborted
		case len(r.FailedSteps) > 0:
			return PhaseFailed
		default:
			return PhaseCompleted
		}
	}
	if r.PendingGate != nil {
		return PhaseGateWaiting
	}
	return PhaseRunning
}

// Terminal reports whether the run has ended.
func (r *Run) Terminal() bool { return IsTerminalPhase(r.Phase()) }

// Step states within a run.
const (
	StatePending    = "pending"
	StateInProgress = "in_progress"
	StateCompleted  = "completed"
	StateFailed     = "failed"
	StateSkipped    = "skipped"
)

// StateOf returns the state of a step.
func (r *Run) StateOf(step string) string {
	switch {
	case slices.Contains(r.CompletedSteps, step):
		return StateCompleted
	case slices.Contains(r.FailedSteps, step):
		return StateFailed
	case slices.Contains(r.SkippedSteps, step):
		return StateSkipped
	case slices.Contains(r.InProgressSteps, step):
		return StateInProgress
	}
	return StatePending
}

// IsSettled reports whether a step has completed, failed or been skipped.
func (r *Run) IsSettled(step string) bool {
	switch r.StateOf(step) {
	case StateCompleted, StateFailed, StateSkipped:
		return true
	}
	return false
}

func remove(list []string, s string) []string {
	return slices.DeleteFunc(list, func(x string) bool { return x == s })
}

func add(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// MarkInProgress claims a step.
func (r *Run) MarkInProgress(step string, c *Claim) {
	r.InProgressSteps = add(r.InProgressSteps, step)
	if r.Claims == nil {
		r.Claims = map[string]*Claim{}
	}
	r.Claims[step] = c
}

// MarkCompleted settles a step as completed, releasing its claim.
func (r *Run) MarkCompleted(step string, s *Settled) {
	r.release(step)
	r.CompletedSteps = add(r.CompletedSteps, step)
	r.settle(step, s)
}

// MarkFailed settles a step as failed.
func (r *Run) MarkFailed(step, msg string, s *Settled) {
	r.release(step)
	r.FailedSteps = add(r.FailedSteps, step)
	if r.StepErrors == nil {
		r.StepErrors = map[string]string{}
	}
	r.StepErrors[step] = msg
	r.settle(step, s)
}

// MarkSkipped settles a step as skipped.
func (r *Run) MarkSkipped(step string, d *SkipDetail) {
	r.release(step)
	r.SkippedSteps = add(r.SkippedSteps, step)
	if r.SkipDetails == nil {
		r.SkipDetails = map[string]*SkipDetail{}
	}
	r.SkipDetails[step] = d
}

// Release frees a step's claim and returns it to pending (a question
// before the work was approved: the work is still to run).
func (r *Run) Release(step string) { r.release(step) }

func (r *Run) release(step string) {
	r.InProgressSteps = remove(r.InProgressSteps, step)
	delete(r.Claims, step)
}

func (r *Run) settle(step string, s *Settled) {
	if s == nil {
		return
	}
	r.ownSettled()
	if r.Settled == nil {
		r.Settled = map[string]*Settled{}
	}
	r.Settled[step] = s
}

// Unsettle forgets how a step settled (resume_run reopens it).
func (r *Run) Unsettle(step string) {
	if _, ok := r.Settled[step]; ok {
		r.ownSettled()
		delete(r.Settled, step)
	}
}

// ownSettled copies Settled before its first change when it is shared.
func (r *Run) ownSettled() {
	if r.settledShared {
		r.Settled, r.settledShared = maps.Clone(r.Settled), false
	}
}

// Seal ends the run with an arm.
func (r *Run) Seal(arm Arm, step, reason string) {
	r.SealedBy = &Seal{Arm: arm, Step: step}
	r.TerminalState = true
	r.TerminalReason = reason
	r.RunPhase = r.Phase()
}

// Normalize gives nil lists their empty form so the JSON always has them.
func (r *Run) Normalize() {
	if r.CompletedSteps == nil {
		r.CompletedSteps = []string{}
	}
	if r.InProgressSteps == nil {
		r.InProgressSteps = []string{}
	}
	if r.FailedSteps == nil {
		r.FailedSteps = []string{}
	}
	if r.SkippedSteps == nil {
		r.SkippedSteps = []string{}
	}
	if r.Params == nil {
		r.Params = map[string]any{}
	}
}

// Clone returns a copy of the run that a transaction may change without
// touching r: lists and maps are copied (Settled on its first change,
// ownSettled); the values they hold are replaced, never changed in place,
// by every writer in the engine.
func (r *Run) Clone() *Run {
	c := *r
	// Room for the step a write most often completes.
	c.CompletedSteps = append(make([]string, 0, len(r.CompletedSteps)+1), r.CompletedSteps...)
	c.InProgressSteps = slices.Clone(r.InProgressSteps)
	c.FailedSteps = slices.Clone(r.FailedSteps)
	c.SkippedSteps = slices.Clone(r.SkippedSteps)
	c.DefaultedSteps = slices.Clone(r.DefaultedSteps)
	c.SkipDetails = maps.Clone(r.SkipDetails)
	c.Claims = maps.Clone(r.Claims)
	c.settledShared = r.Settled != nil // copied on its first change (ownSettled)
	c.CapabilityBlocks = maps.Clone(r.CapabilityBlocks)
	c.ValidationRejections = maps.Clone(r.ValidationRejections)
	c.StepErrors = maps.Clone(r.StepErrors)
	c.FinalizerLedger = maps.Clone(r.FinalizerLedger)
	c.ResolvedGates = maps.Clone(r.ResolvedGates)
	return &c
}
