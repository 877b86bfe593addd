package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/workflow"
)

// refusal is a reply that names no run's state (run_id "", run_version 0).
func refusal(command, runID string, code errcode.Code, msg string, details map[string]any) *realmv1.Reply {
	zero := int64(0)
	r := &realmv1.Reply{
		Command:     command,
		RunId:       runID,
		RunVersion:  &zero,
		Status:      realmv1.ReplyStatus_REPLY_STATUS_ERROR,
		ContextHint: msg,
		Errors:      []string{msg},
		ErrorCode:   string(code),
		AgentAction: agentAction(code),
	}
	if details != nil {
		r.ErrorDetails = toStruct(details)
	}
	return r
}

// agentAction is a code's default agent_action from the catalogue.
func agentAction(code errcode.Code) realmv1.AgentAction {
	if info, ok := code.Info(); ok {
		return errcode.AgentActionEnum(string(info.AgentAction))
	}
	return realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER
}

// StartRun creates a run, runs every auto step that is ready, and replies
// at the first step for the agent, a gate, or the end. With a workflow
// source the run carries that definition instead of reading the registered
// copy (carried.go); the loader's report comes back with the reply.
func (e *Engine) StartRun(ctx context.Context, req *realmv1.StartRunRequest) (*realmv1.Reply, *workflow.Report, error) {
	const command = "start_run"
	def, carried, rep, ref, err := e.startDefinition(ctx, req)
	if err != nil || ref != nil {
		return ref, rep, err
	}
	params := req.GetParams().AsMap()
	if def.params != nil {
		if errs := def.params.Validate(params); len(errs) > 0 {
			msg := fmt.Sprintf("Invalid params for workflow '%s': %s", def.Def.ID, errs[0].RootedText())
			return refusal(command, "", errcode.ValidationInputSchema, msg, map[string]any{"errors": schemaErrors(errs)}), rep, nil
		}
	}
	t, deduped, ref, err := e.createOrMatch(ctx, def, params, createOpts{
		key: req.GetIdempotencyKey(), onLive: req.GetOnLiveMatch(), onTerminal: req.GetOnTerminalMatch(),
		chain: true, caller: req.GetCaller(), carried: carried,
	})
	if err != nil || ref != nil {
		return ref, rep, err
	}
	if deduped {
		return t.matchedReply("start_run"), rep, nil
	}
	if err := e.drive(ctx, t); err != nil {
		return nil, rep, err
	}
	r := t.finish(t.createdReply(command))
	r.Deduped = ptr(false)
	return r, rep, nil
}

// startDefinition is the definition start_run creates a run of: the
// workflow source's (with its bytes, to be carried, and the loader's
// report), else the registered copy. A refusal creates nothing.
func (e *Engine) startDefinition(ctx context.Context, req *realmv1.StartRunRequest) (*compiled, []byte, *workflow.Report, *realmv1.Reply, error) {
	const command = "start_run"
	if src := req.GetWorkflowSource(); src != nil {
		def, b, rep, err := e.sourceDefinition(ctx, src)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if def == nil {
			return nil, nil, rep, invalidSource(rep), nil
		}
		return def, b, rep, nil, nil
	}
	def, err := e.definition(ctx, req.GetWorkflowId())
	var missing *errWorkflowMissing
	if errors.As(err, &missing) {
		return nil, nil, nil, refusal(command, "", errcode.StateWorkflowNotFound,
			fmt.Sprintf("Workflow '%s' not found.", req.GetWorkflowId()), nil), nil
	}
	return def, nil, nil, nil, err
}

// createOpts say how a run is created.
type createOpts struct {
	key, onLive, onTerminal, parent string
	// chain runs ready auto steps (start_run); a batch runs none.
	chain  bool
	caller *realmv1.Caller
	// carried is the definition the run carries (nil: the registered copy).
	carried []byte
}

// keyOf scopes an idempotency key to its workflow: the same key under
// another workflow is unrelated (mcp spec §6).
func keyOf(workflowID, key string) string {
	if key == "" {
		return ""
	}
	return workflowID + "\x1f" + key
}

// createOrMatch creates a run, or finds the run an idempotency key already
// names. It returns the run's transaction (created or matched), whether it
// was matched, or a refusal.
func (e *Engine) createOrMatch(ctx context.Context, def *compiled, params map[string]any, o createOpts) (*txn, bool, *realmv1.Reply, error) {
	key := keyOf(def.Def.ID, o.key)
	for attempt := 0; attempt < maxWriteAttempts; attempt++ {
		var rerunOf, expect string
		if key != "" {
			held, err := e.st.LookupKey(ctx, key)
			if err != nil {
				return nil, false, nil, errcode.Wrap(errcode.EngineStoreFailed, err, "Failed to read idempotency key: "+err.Error())
			}
			if held != "" {
				matched, ref, rerun, err := e.matchKey(ctx, o, held)
				if err != nil || ref != nil {
					return nil, false, ref, err
				}
				if matched != nil {
					return matched, true, nil, nil
				}
				rerunOf, expect = rerun, held
			}
		}
		t := e.newRun(ctx, def, params)
		t.caller = o.caller
		t.run.IdempotencyKey = o.key
		t.run.RerunOf = rerunOf
		t.run.ParentRunID = o.parent
		if o.carried != nil {
			t.carry(o.carried)
		}
		if key != "" {
			t.run.ID = e.st.NewRunID(key)
			t.idemKey, t.idemExpect = key, expect
		}
		t.index = append(t.index, indexOp(store.IndexRuns, t.run.ID, t.now))
		if o.chain {
			t.startChain()
		}
		err := e.commit(ctx, t)
		if store.IsConflict(err) {
			// Another caller took the key first: match it (after a pause
			// when this keeps happening).
			if attempt > 0 {
				if err := e.conflictPause(ctx, attempt-1); err != nil {
					return nil, false, nil, err
				}
			}
			continue
		}
		if err != nil {
			return nil, false, nil, err
		}
		return t, false, nil, nil
	}
	return nil, false, nil, errcode.Newf(errcode.StateSnapshotMismatch, "idempotency key %q kept changing under this call", o.key)
}

// newRun builds the transaction that creates a run.
func (e *Engine) newRun(ctx context.Context, def *compiled, params map[string]any) *txn {
	now := e.now()
	ts := record.FormatTime(now)
	r := &record.Run{
		ID:              e.st.NewRunID(""),
		WorkflowID:      def.Def.ID,
		WorkflowVersion: def.Def.Version,
		Params:          params,
		CreatedAt:       ts,
		UpdatedAt:       ts,
		RunPhase:        record.PhaseRunning,
	}
	r.WorkflowContextSnapshots = contextSnapshots(def.Def, ts)
	r.Normalize()
	t := &txn{e: e, snap: snap{run: r, def: def, outputs: map[string]any{}, traces: map[string][]byte{}, ownOutputs: true, ownTraces: true, now: now, base: &store.Snapshot{Version: -1}}, pending: pending{create: true}}
	t.caps = e.readCapabilities(ctx, def, r)
	t.touch()
	return t
}

// contextSnapshots copies the workflow_context texts of the registered
// definition into a new run (spec §3.8, run-record §2.4). The original
// reads the files when the run's first step executes; here the texts
// travel with the definition and are taken at creation, so even the first
// prompt start_run returns is rendered with them.
func contextSnapshots(def *workflow.Definition, at string) map[string]*record.ContextSnapshot {
	if len(def.ResolvedContext) == 0 {
		return nil
	}
	out := make(map[string]*record.ContextSnapshot, len(def.ResolvedContext))
	for name, ct := range def.ResolvedContext {
		s := &record.ContextSnapshot{SourcePath: ct.SourcePath, Content: ct.Content, LoadedAt: at, Error: ct.Error}
		if ct.Error == "" {
			sum := sha256.Sum256([]byte(ct.Content))
			s.ContentHash = hex.EncodeToString(sum[:])
		}
		out[name] = s
	}
	return out
}

// startChain runs what start_run's creation of a run may run: auto steps
// that are ready, and the guards that are ready — also one ready at
// creation: "a run that start_run creates never has" an undecided guard
// (seed 001; the spec digest's older §5.3 says otherwise, and the seed
// wins). start_run_batch runs nothing, so its runs may owe a guard.
func (t *txn) startChain() {
	t.advance(advanceOpts{decideGuards: true, chain: true})
}

// createdReply is start_run's reply for a run it created.
func (t *txn) createdReply(command string) *realmv1.Reply {
	if r := t.overridingReply(command); r != nil {
		return r
	}
	r := t.envelope(command)
	v := t.view()
	r.NextActions = t.nextActions(v)
	switch {
	case t.endedBy != nil && t.endedBy.arm != record.ArmGuardPassComplete:
		r.ContextHint = t.guardSentence()
	case t.lastAuto != "":
		r.ContextHint = t.completedHint(t.lastAuto, v)
	default:
		r.ContextHint = fmt.Sprintf("Run '%s' created for workflow '%s'. %s", t.run.ID, t.run.WorkflowID, t.afterHint(v))
	}
	if t.run.RerunOf != "" {
		r.ContextHint += fmt.Sprintf(" This run supersedes run '%s' under the same idempotency key (on_terminal_match).", t.run.RerunOf)
	}
	return r
}

// completedHint is the context hint after step completed: the sentence
// and what the run waits on next, built in one buffer.
func (t *txn) completedHint(step string, v view) string {
	var b strings.Builder
	b.Grow(128)
	b.WriteString("Step '")
	b.WriteString(step)
	b.WriteString("' completed. ")
	t.writeAfterHint(&b, v)
	return b.String()
}

// afterHint says what comes next, or how the run ended.
func (t *txn) afterHint(v view) string {
	var b strings.Builder
	t.writeAfterHint(&b, v)
	return b.String()
}

func (t *txn) writeAfterHint(b *strings.Builder, v view) {
	if !t.run.Terminal() {
		t.writeWhatNext(b, v)
		return
	}
	switch {
	case t.endedBy != nil:
		b.WriteString(t.guardSentence())
	case t.run.Phase() == record.PhaseCompleted:
		b.WriteString("Workflow completed.")
	default:
		fmt.Fprintf(b, "Run phase: '%s'.", t.run.Phase())
	}
}

// guardSentence is the context_hint of a guard that ended the run.
func (t *txn) guardSentence() string {
	switch t.endedBy.arm {
	case record.ArmGuardAbort:
		return fmt.Sprintf("Guard step '%s' aborted the run.", t.endedBy.step)
	case record.ArmGuardResolutionError:
		return fmt.Sprintf("Guard step '%s' failed with a resolution error. Run is terminated.", t.endedBy.step)
	default:
		return fmt.Sprintf("Guard step '%s' passed and completed the run.", t.endedBy.step)
	}
}

// matchKey decides what a repeat of an idempotency key does (mcp spec §6).
// It returns the matched run, a refusal, or the run a new run reruns.
func (e *Engine) matchKey(ctx context.Context, o createOpts, held string) (*txn, *realmv1.Reply, string, error) {
	t, err := e.read(ctx, held)
	if errors.Is(err, errRunNotFound) {
		return nil, nil, "", nil // the run was purged; the key is free to reuse
	}
	if err != nil {
		return nil, nil, "", err
	}
	phase := t.run.Phase()
	if !record.IsTerminalPhase(phase) {
		if o.onLive == "fail" {
			msg := fmt.Sprintf("Idempotency key for workflow '%s' is owned by an active run '%s' (phase '%s').", t.run.WorkflowID, held, phase)
			return nil, refusal("start_run", "", errcode.StateRunAlreadyActive, msg, map[string]any{"run_id": held}), "", nil
		}
		t.warnings = append(t.warnings, fmt.Sprintf("Idempotency key matched a run still in phase '%s'.", phase))
		return t, nil, "", nil
	}
	switch o.onTerminal {
	case "reject":
		msg := fmt.Sprintf("Idempotency key for workflow '%s' was already used by run '%s', which ended in phase '%s' (on_terminal_match: reject).", t.run.WorkflowID, held, phase)
		return nil, refusal("start_run", "", errcode.StateIdempotencyKeyUsed, msg, map[string]any{"run_id": held}), "", nil
	case "rerun":
		return nil, nil, held, nil
	case "rerun_if_failed":
		if phase != record.PhaseCompleted {
			return nil, nil, held, nil
		}
	}
	return t, nil, "", nil
}

// matchedReply is start_run's reply for a repeat that matched a run.
func (t *txn) matchedReply(command string) *realmv1.Reply {
	r := t.envelope(command)
	v := t.view()
	r.NextActions = t.nextActions(v)
	r.Deduped = ptr(true)
	hint := fmt.Sprintf("Matched existing run '%s' (idempotent) in phase '%s'; no new run created.", t.run.ID, t.run.Phase())
	if next := t.afterHint(v); next != "" {
		hint += " " + next
	}
	if tail := t.terminalTail(); tail != "" {
		hint += " " + tail
	}
	r.ContextHint = hint
	return r
}

func ptr[T any](v T) *T { return &v }

// schemaErrors turns validation errors into error_details JSON.
func schemaErrors[E any](errs []E) []any {
	out := make([]any, 0, len(errs))
	for _, e := range errs {
		out = append(out, normalizeJSON(e))
	}
	return out
}

var _ = structpb.NewNullValue
