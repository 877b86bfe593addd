package drive

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/realm-go/realm/agent-svc/internal/provider"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/identity"
	"github.com/realm-go/realm/pkg/reply"
)

// Codes of a schema refusal the repair loop answers.
const (
	codeInputSchema  = "VALIDATION_INPUT_SCHEMA"
	codeOutputSchema = "VALIDATION_OUTPUT_SCHEMA"
	codeClaimed      = "STATE_STEP_ALREADY_CLAIMED"
)

// driveStep asks the model for one agent step and hands its answer to the
// engine, repairing after schema refusals within the budget (§9).
func (d *driver) driveStep(ctx context.Context, st *realmv1.RunState, na *realmv1.NextAction) error {
	step := reply.Command(na.GetInstruction())
	info := d.steps[step]
	prompt := na.GetPrompt()
	if prompt == "" {
		prompt = info.description
	}
	schema := schemaJSON(na)
	lines := stdout("", "→ [agent] "+step, "  "+cut(info.description, 80))
	if note := d.strictNoteOnce(step, info); note != nil {
		lines = append(lines, stderr(note...)...)
	}
	if info.budgetNote != "" && !d.budgetWarned[step] {
		d.budgetWarned[step] = true
		lines = append(lines, stderr(info.budgetNote)...)
	}
	if err := d.send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_STEP_STARTED, Step: step,
		RunPhase: st.GetRunPhase(), Lines: lines}); err != nil {
		return err
	}
	version := st.GetRunVersion()
	user := prompt
	repairs := 0
	var billed []provider.Usage
	// The step's llm_timeout_seconds wins over --llm-timeout (§11).
	per := d.o.PerAttempt
	if info.llmTimeout > 0 {
		per = info.llmTimeout
	}
	var box *toolbox
	if info.tools != nil {
		// Discovery comes before any model call (§10.2).
		var err error
		if box, err = d.toolbox(ctx, step, info.tools); err != nil {
			return d.toolsFailed(ctx, step, err, nil)
		}
	}
	for {
		mctx := d.modelCtx
		if mctx == nil {
			mctx = ctx
		}
		req := provider.Request{
			Model: d.o.Model, Profile: info.profile, Prompt: user, Schema: schema, Strict: d.strictFor(step, info),
			PerAttempt: per, PerAttemptDeclared: per > 0, PerAttemptFromStep: info.llmTimeout > 0,
			PromptCache: d.o.PromptCache, RequestIndex: len(billed),
		}
		if box != nil {
			d.withTools(&req, step, info.tools, box)
		}
		res, err := d.o.Provider.Call(mctx, req)
		d.noteDowngrade(step, downgradeOf(res, err))
		if err != nil && mctx.Err() != nil && ctx.Err() == nil {
			return errSlotLost // cut by the limit, not by the caller
		}
		if err != nil && box != nil {
			return d.toolsFailed(ctx, step, err, billed)
		}
		if err != nil {
			ce := asCallError(err)
			ce.Usage = append(append([]provider.Usage{}, billed...), ce.Usage...)
			f := d.failure(step, ce)
			if ce.Downgrade != nil && info.strictRequested {
				// The resend after a downgrade failed: the downgrade is
				// still disclosed, on the failure (§8.4).
				f.StructuredOutput = toStruct(d.strictFields(step, info, false, ""))
			}
			return d.stop(f, step, fmt.Sprintf("✗ Step '%s' LLM call failed: %s", step, ce.Message), d.reattachLine())
		}
		billed = append(billed, res.Usage...)
		for _, u := range res.Usage {
			if err := d.send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_MODEL_CALL, Step: step,
				ModelCall: &realmv1.ModelCall{Provider: d.o.Provider.Name(), Model: d.o.Model, Usage: usageProto(u),
					AttemptsSdk: int32(res.Attempts), ElapsedMs: res.Elapsed.Milliseconds(), StrictSent: res.StrictSent}}); err != nil {
				return err
			}
		}
		params, encErr := []byte("{}"), error(nil)
		if res.Output != nil {
			params, encErr = json.Marshal(res.Output)
		}
		if encErr != nil {
			return d.stop(d.failure(step, &provider.CallError{Class: provider.ClassOther, Message: encErr.Error(), Usage: billed}), step,
				fmt.Sprintf("✗ Step '%s' failed: the model's answer cannot be sent: %s", step, encErr), d.reattachLine())
		}
		exec := &realmv1.ExecuteStepRequest{RunId: d.runID, Command: step, ParamsJson: params, Caller: d.o.Caller,
			StructuredOutput: d.strictRecord(step, info, res, box), ToolCalls: toolCallsProto(res.ToolCalls)}
		// The requests behind this answer (repairs included) are billed to
		// the attempt the engine records; it derives include_steps' cost.
		for _, u := range billed {
			exec.Usage = append(exec.Usage, usageProto(u))
		}
		if d.o.MintWriterNonce {
			exec.WriterNonce = newNonce()
		}
		resp, err := d.eng.ExecuteStep(ctx, exec)
		if err != nil {
			return err
		}
		r := resp.GetReply()
		switch {
		case r.GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_OK || r.GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_CONFIRM_REQUIRED:
			d.lastOK.step, d.lastOK.output = step, res.Output
			phase := r.GetRunPhase()
			if len(r.GetChainedAutoSteps()) > 0 {
				phase = realmv1.RunPhase_RUN_PHASE_RUNNING
			}
			if err := d.send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_OUTPUT_ACCEPTED, Step: step,
				RunPhase: r.GetRunPhase(), Lines: stdout("  ✓ → " + reply.PhaseWord(phase))}); err != nil {
				return err
			}
			return d.chained(r)
		case r.GetErrorCode() == codeInputSchema || r.GetErrorCode() == codeOutputSchema:
			// No repair after tool calls (§9, condition 3).
			if repairs < d.o.SchemaRetries && r.GetRunVersion() == version && len(res.ToolCalls) == 0 {
				repairs++
				errs := repairLines(r.GetErrorDetails())
				if err := d.send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_REPAIR, Step: step,
					RepairAttempt: int32(repairs), RepairMax: int32(d.o.SchemaRetries), Errors: errs,
					Lines: stderr(fmt.Sprintf("  ⚠ output rejected (%s); repairing (attempt %d/%d)", r.GetErrorCode(), repairs, d.o.SchemaRetries))}); err != nil {
					return err
				}
				user = prompt + repairSuffix(r.GetErrorCode(), errs)
				now, err := d.state(ctx)
				if err != nil {
					return err
				}
				version = now.GetRunVersion()
				continue
			}
			msg := strings.Join(r.GetErrors(), ", ")
			if repairs > 0 {
				msg += fmt.Sprintf(" after %d schema-repair attempts", repairs)
			}
			ce := &provider.CallError{Class: provider.ClassValidationRejected, Message: msg, Usage: billed, Attempts: 0}
			return d.stop(d.failure(step, ce), step, fmt.Sprintf("✗ Step '%s' failed: %s", step, msg), d.reattachLine())
		case r.GetErrorCode() == codeClaimed:
			program, at := identity.UnprintableName, "an unknown time"
			if now, err := d.state(ctx); err == nil {
				program, at, _ = claimOf(now, step)
			}
			return d.send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_BLOCKED, Step: step,
				Lines: stdout(takenLine(step, program, at))})
		case reply.Terminal(r.GetRunPhase()):
			// The answer ended the run (a guard, an exhausted step): the
			// loop reports the ending.
			return d.send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_BLOCKED, Step: step,
				RunPhase: r.GetRunPhase(), Lines: stderr(fmt.Sprintf("✗ Step '%s' failed: %s", step, replyMessage(r)))})
		default:
			return d.stop(nil, step, fmt.Sprintf("✗ Step '%s' failed: %s", step, replyMessage(r)), d.reattachLine())
		}
	}
}

// downgradeOf is the live strict downgrade a call reports, on its answer
// or on its failure; nil for none.
func downgradeOf(res *provider.Result, err error) *provider.Downgrade {
	if err != nil {
		if ce, ok := err.(*provider.CallError); ok {
			return ce.Downgrade
		}
		return nil
	}
	return res.Downgrade
}

func asCallError(err error) *provider.CallError {
	if ce, ok := err.(*provider.CallError); ok {
		return ce
	}
	return &provider.CallError{Class: provider.ClassOther, Message: oneLine(err.Error())}
}

// repairLines are the refusal's errors as the model is shown them: path,
// message and keyword, never the submitted values; at most 10, each field
// cut to 200 characters.
func repairLines(details *structpb.Struct) []string {
	list := details.GetFields()["errors"].GetListValue().GetValues()
	var out []string
	for _, v := range list {
		if len(out) == 10 {
			break
		}
		e := v.GetStructValue().GetFields()
		path := e["instancePath"].GetStringValue()
		if path == "" {
			path = "(root)"
		}
		line := fmt.Sprintf("- %s: %s [%s]", cut(path, 200), cut(e["message"].GetStringValue(), 200), cut(e["keyword"].GetStringValue(), 200))
		p := e["params"].GetStructValue().GetFields()
		if a := p["additionalProperty"].GetStringValue(); a != "" {
			line += fmt.Sprintf(" (additional property: '%s')", cut(a, 200))
		}
		if m := p["missingProperty"].GetStringValue(); m != "" {
			line += fmt.Sprintf(" (missing property: '%s')", cut(m, 200))
		}
		out = append(out, line)
	}
	return out
}

// repairSuffix follows the pristine prompt on a repair attempt.
func repairSuffix(code string, errs []string) string {
	which := "input"
	if code == codeOutputSchema {
		which = "output"
	}
	return "\n\nYour previous output was rejected by the " + which + " schema validator:\n" +
		strings.Join(errs, "\n") + "\nEmit corrected JSON only, matching the schema exactly."
}

// cut shortens s to n runes, marking the cut.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

func usageProto(u provider.Usage) *realmv1.ModelUsage {
	return &realmv1.ModelUsage{
		RequestIndex: int32(u.RequestIndex), RequestStart: u.RequestStart.UTC().Format("2006-01-02T15:04:05.000Z"),
		PromptTokens: u.PromptTokens, UncachedInputTokens: u.UncachedInputTokens,
		CacheReadInputTokens: u.CacheReadInputTokens, CacheCreationInputTokens: u.CacheCreationInputTokens,
		OutputTokens: u.OutputTokens,
	}
}

// failure is the drive_failures entry for a failed step (§12.2); the
// message is redacted (§18) and cut to 500 characters.
func (d *driver) failure(step string, ce *provider.CallError) *realmv1.DriveFailure {
	f := &realmv1.DriveFailure{
		At: d.o.Now().UTC().Format("2006-01-02T15:04:05.000Z"), Step: step, ErrorClass: ce.Class,
		Message: cut(d.redactor().String(ce.Message), 500), ElapsedMs: ce.Elapsed.Milliseconds(), AttemptsSdk: int32(ce.Attempts),
	}
	if d.o.Provider != nil {
		f.Provider = d.o.Provider.Name()
	}
	if ce.DeclaredMS > 0 {
		f.DeclaredPerAttemptMs = &ce.DeclaredMS
	}
	if ce.CeilingMS > 0 {
		f.DerivedCeilingMs = &ce.CeilingMS
	}
	if ce.Status > 0 {
		s := int32(ce.Status)
		f.LastObservedStatus = &s
	}
	if ce.HasRetry {
		ms := ce.RetryAfter.Milliseconds()
		f.RetryAfterObservedMs = &ms
	}
	for _, u := range ce.Usage {
		f.Usage = append(f.Usage, usageProto(u))
	}
	return f
}
