package record

import (
	"github.com/realm-go/realm/pkg/jsonenc"
)

// The run document and its evidence entries are written on every
// transition; encoding/json spent most of its time and allocations on
// reflection over them (a boxed key and value per map entry). These are
// their fields in declaration order, written as json.Marshal writes them:
// TestAppendJSONIsWhatJSONMarshalWrites fills every field, a new one
// included, and holds the two to the same bytes. Fields rarely set are
// left to encoding/json (Value), which keeps this list short.

// AppendJSON appends json.Marshal(r) to b.
func (r *Run) AppendJSON(b []byte) ([]byte, error) {
	o := jsonenc.Open(b)
	o.String("id", r.ID)
	o.String("workflow_id", r.WorkflowID)
	o.Float("workflow_version", r.WorkflowVersion)
	o.Value("params", r.Params)
	o.String("created_at", r.CreatedAt)
	o.String("updated_at", r.UpdatedAt)
	o.Int("version", r.Version)
	o.OmitString("idempotency_key", r.IdempotencyKey)
	o.OmitString("rerun_of", r.RerunOf)
	o.OmitString("parent_run_id", r.ParentRunID)
	o.OmitString("definition_source", r.DefinitionSource)
	o.Strings("completed_steps", r.CompletedSteps)
	o.Strings("in_progress_steps", r.InProgressSteps)
	o.Strings("failed_steps", r.FailedSteps)
	o.Strings("skipped_steps", r.SkippedSteps)
	if len(r.SkipDetails) > 0 {
		o.Value("skip_details", r.SkipDetails)
	}
	if len(r.Claims) > 0 {
		jsonenc.Map(&o, "claims", r.Claims, appendClaim)
	}
	if len(r.Settled) > 0 {
		jsonenc.Map(&o, "settled", r.Settled, appendSettled)
	}
	if len(r.CapabilityBlocks) > 0 {
		o.Value("capability_blocks", r.CapabilityBlocks)
	}
	if len(r.ValidationRejections) > 0 {
		jsonenc.Map(&o, "validation_rejections", r.ValidationRejections, jsonenc.IntValue)
	}
	o.OmitStrings("defaulted_steps", r.DefaultedSteps)
	if r.PendingGate != nil {
		o.Value("pending_gate", r.PendingGate)
	}
	if len(r.StepErrors) > 0 {
		jsonenc.Map(&o, "step_errors", r.StepErrors, jsonenc.StringValue)
	}
	if len(r.FinalizerLedger) > 0 {
		o.Value("finalizer_ledger", r.FinalizerLedger)
	}
	if len(r.ResolvedGates) > 0 {
		o.Value("resolved_gates", r.ResolvedGates)
	}
	if r.DriveFailures != nil {
		o.Value("drive_failures", r.DriveFailures)
	}
	if len(r.WorkflowContextSnapshots) > 0 {
		o.Value("workflow_context_snapshots", r.WorkflowContextSnapshots)
	}
	o.String("run_phase", r.RunPhase)
	o.Bool("terminal_state", r.TerminalState)
	o.OmitString("terminal_reason", r.TerminalReason)
	if r.SealedBy != nil {
		o.Value("sealed_by", r.SealedBy)
	}
	if r.AbortedAt != nil {
		o.Value("aborted_at", r.AbortedAt)
	}
	o.OmitString("abandoned_at", r.AbandonedAt)
	o.Int("evidence_count", r.EvidenceCount)
	o.OmitString("last_step", r.LastStep)
	return o.Close()
}

func appendClaim(b []byte, c *Claim) ([]byte, error) {
	if c == nil {
		return append(b, "null"...), nil
	}
	o := jsonenc.Open(b)
	o.String("token", c.Token)
	o.StringPtr("deadline", c.Deadline)
	if c.Holder != nil {
		o.Key("holder")
		o.B = c.Holder.appendJSON(o.B)
	}
	o.OmitString("since", c.Since)
	return o.Close()
}

func (h *Holder) appendJSON(b []byte) []byte {
	o := jsonenc.Open(b)
	o.OmitString("by", h.By)
	o.OmitString("by_source", h.BySource)
	o.OmitString("channel", h.Channel)
	b, _ = o.Close() // strings only: never an error
	return b
}

func appendSettled(b []byte, s *Settled) ([]byte, error) {
	if s == nil {
		return append(b, "null"...), nil
	}
	o := jsonenc.Open(b)
	o.StringPtr("token", s.Token)
	o.String("outcome", s.Outcome)
	o.OmitString("choice", s.Choice)
	o.OmitString("resolved_by", s.ResolvedBy)
	return o.Close()
}

// AppendJSON appends json.Marshal(e) to b.
func (e *Entry) AppendJSON(b []byte) ([]byte, error) {
	return e.AppendJSONWith(b, nil, nil)
}

// AppendJSONWith is AppendJSON with the input and output summaries' bytes
// given, when not nil: json.Marshal of the summary, written as they are.
func (e *Entry) AppendJSONWith(b, input, output []byte) ([]byte, error) {
	o := jsonenc.Open(b)
	o.String("step_id", e.StepID)
	o.OmitString("kind", e.Kind)
	o.String("status", e.Status)
	o.String("started_at", e.StartedAt)
	o.String("completed_at", e.CompletedAt)
	o.Int("duration_ms", e.DurationMS)
	o.OmitInt("attempt", int64(e.Attempt))
	if input != nil {
		o.Raw("input_summary", input)
	} else {
		o.Value("input_summary", e.InputSummary)
	}
	o.OmitValue("resolved_params", e.ResolvedParams)
	if output != nil {
		o.Raw("output_summary", output)
	} else {
		o.Value("output_summary", e.OutputSummary)
	}
	o.OmitString("output_source", e.OutputSource)
	o.String("evidence_hash", e.EvidenceHash)
	o.OmitString("error", e.Error)
	o.OmitString("warn", e.Warn)
	o.OmitMap("diagnostics", e.Diagnostics)
	o.OmitString("gate_message", e.GateMessage)
	o.OmitString("responded_by", e.RespondedBy)
	o.OmitString("responded_by_vouched_by", e.RespondedByVouchedBy)
	if e.DrivenBy != nil {
		o.Key("driven_by")
		o.B = e.DrivenBy.appendJSON(o.B)
	}
	o.OmitMap("claim_proof", e.ClaimProof)
	o.OmitString("resolution", e.Resolution)
	if len(e.Trace) > 0 {
		o.Value("trace", e.Trace)
	}
	o.OmitMap("trace_summary", e.TraceSummary)
	o.OmitInt("effective_timeout_seconds", int64(e.EffectiveTimeut))
	o.OmitInt("clipped_to_ms", e.ClippedToMS)
	o.OmitString("exhausted_by", e.ExhaustedBy)
	if len(e.ToolCalls) > 0 {
		o.Value("tool_calls", e.ToolCalls)
	}
	if e.DefinitionVersion != nil {
		o.Float("definition_version", *e.DefinitionVersion)
	}
	o.OmitString("definition_hash", e.DefinitionHash)
	return o.Close()
}
