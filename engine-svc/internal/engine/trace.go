package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/workflow"
)

// Trace limits (seed "append_trace").
const (
	traceBufferCount = 200
	traceBufferBytes = 102400
	traceFinalCount  = 100
	traceFinalBytes  = 51200
	traceFileCount   = 400
	traceFileBytes   = 204800
)

// traceField is where a step's buffered trace entries live in the run's
// output hash: beside the outputs, written by the same compare-and-set, so
// adopting them is atomic with recording the step. The NUL byte keeps the
// field apart from every step name.
const traceField = "\x00trace:"

// traceEntry is one buffered entry.
type traceEntry struct {
	Event       string         `json:"event"`
	Timestamp   string         `json:"timestamp,omitempty"`
	Data        map[string]any `json:"data,omitempty"`
	WriterNonce string         `json:"writer_nonce,omitempty"`
}

func (e traceEntry) size() int {
	b, _ := json.Marshal(traceEntry{Event: e.Event, Timestamp: e.Timestamp, Data: e.Data})
	return len(b)
}

// entriesFrom keeps the fields a trace entry takes; data values must be
// text, numbers, booleans or null (anything else is dropped).
func entriesFrom(in []*realmv1.TraceEntry, nonce string) []traceEntry {
	out := make([]traceEntry, 0, len(in))
	for _, e := range in {
		te := traceEntry{Event: e.GetEvent(), Timestamp: e.GetTimestamp(), WriterNonce: nonce}
		for k, v := range e.GetData().AsMap() {
			switch v.(type) {
			case string, float64, bool, nil:
				if te.Data == nil {
					te.Data = map[string]any{}
				}
				te.Data[k] = v
			}
		}
		out = append(out, te)
	}
	return out
}

// buffered returns a step's buffered entries.
func (t *txn) buffered(step string) []traceEntry {
	raw, ok := t.traces[step]
	if !ok {
		return nil
	}
	var out []traceEntry
	_ = json.Unmarshal(raw, &out)
	return out
}

// setBuffered replaces a step's buffer (nil removes it) in this write.
func (t *txn) setBuffered(step string, entries []traceEntry) {
	if t.newTraces == nil {
		t.newTraces = map[string][]byte{}
	}
	t.traces = owned(t.traces, &t.ownTraces)
	if len(entries) == 0 {
		t.newTraces[step] = nil
		delete(t.traces, step)
	} else {
		b, _ := json.Marshal(entries)
		t.newTraces[step] = b
		t.traces[step] = b
	}
	t.touch()
}

func counts(entries []traceEntry, nonce string) (bufN, bufB, fileN, fileB int) {
	for _, e := range entries {
		n := e.size()
		fileN++
		fileB += n
		if e.WriterNonce == nonce {
			bufN++
			bufB += n
		}
	}
	return
}

// AppendTrace buffers trace entries for an agent step that has not been
// done; execute_step attaches them to the step's record.
func (e *Engine) AppendTrace(ctx context.Context, req *realmv1.AppendTraceRequest) (*realmv1.AppendTraceResponse, error) {
	const command = "append_trace"
	var out traced
	t, err := e.update(ctx, req.GetRunId(), func(t *txn) error {
		out = t.appendTrace(req.GetStepId(), req.GetWriterNonce(), req.GetEntries())
		return nil
	})
	if errors.Is(err, errRunNotFound) {
		return &realmv1.AppendTraceResponse{Refusal: refusal(command, req.GetRunId(), errcode.StateRunNotFound, "Run not found: "+req.GetRunId(), nil)}, nil
	}
	if ce, ok := errcode.As(err); ok && ce.Code == errcode.EngineStoreFailed {
		return &realmv1.AppendTraceResponse{Refusal: refusal(command, req.GetRunId(), errcode.EngineInternal, ce.Message, nil)}, nil
	}
	if err != nil {
		return nil, err
	}
	return t.traceReply(command, out), nil
}

// tracedKind is what append_trace decided.
type tracedKind int

const (
	traceBuffered        tracedKind = iota // the entries were buffered
	traceRunEnded                          // the run has ended: no step will adopt them
	traceWorkflowMissing                   // the run's workflow cannot be read
	traceNoSuchStep                        // the workflow has no such step
	traceUncallable                        // the step cannot take a trace now
	traceNotAgent                          // only an agent step's trace is recorded
	traceFull                              // the buffer would pass a limit: nothing was added
)

// traced is append_trace's decision, with what its reply needs.
type traced struct {
	kind       tracedKind
	step       string
	uncallable *uncallable
	// The buffer's counts as the entries leave it (traceBuffered) or
	// would have left it (traceFull): this writer's, then the step's.
	bufN, bufB, fileN, fileB int
}

// appendTrace buffers a writer's entries for an agent step, or says why it
// does not.
func (t *txn) appendTrace(step, nonce string, entries []*realmv1.TraceEntry) traced {
	out := traced{step: step}
	switch {
	case t.run.Terminal():
		out.kind = traceRunEnded
		return out
	case t.def == nil:
		out.kind = traceWorkflowMissing
		return out
	}
	s := t.stepOf(step)
	if s == nil {
		out.kind = traceNoSuchStep
		return out
	}
	// A step still waiting on its dependencies may gather a trace.
	if u := t.notCallable(s); u != nil && u.kind != callWaiting && u.kind != callDepCannotRun {
		out.kind, out.uncallable = traceUncallable, u
		return out
	}
	if s.Execution != workflow.KindAgent {
		out.kind = traceNotAgent
		return out
	}
	all := append(t.buffered(step), entriesFrom(entries, nonce)...)
	out.bufN, out.bufB, out.fileN, out.fileB = counts(all, nonce)
	if out.bufN > traceBufferCount || out.bufB > traceBufferBytes || out.fileN > traceFileCount || out.fileB > traceFileBytes {
		out.kind = traceFull
		return out
	}
	t.setBuffered(step, all)
	out.kind = traceBuffered
	return out
}

// traceRefusal is a refused append_trace's code and sentence (ok false when the
// entries were buffered).
func (t *txn) traceRefusal(out traced) (errcode.Code, string, bool) {
	switch out.kind {
	case traceRunEnded:
		return errcode.StateStepNotEligible, fmt.Sprintf("Run '%s' is terminal (phase: '%s') — trace entries can no longer be adopted by any step.", t.run.ID, t.run.Phase()), true
	case traceWorkflowMissing:
		return errcode.StateWorkflowNotFound, t.defErr.Error(), true
	case traceNoSuchStep:
		return errcode.StepNotFound, fmt.Sprintf("Step '%s' not found in workflow '%s'.", out.step, t.run.WorkflowID), true
	case traceUncallable:
		return errcode.StateStepNotEligible, fmt.Sprintf("Step '%s' %s.", out.step, out.uncallable.afterStep()), true
	case traceNotAgent:
		return errcode.StateStepNotEligible, fmt.Sprintf("Step '%s' is not an agent step; only an agent step's trace is recorded.", out.step), true
	case traceFull:
		return errcode.BufferFull, fmt.Sprintf("The trace buffer of step '%s' is full (%d entries, %d bytes for this writer; %d entries, %d bytes in all); nothing was added.", out.step, out.bufN, out.bufB, out.fileN, out.fileB), true
	}
	return "", "", false
}

// traceReply composes append_trace's reply from its decision and the run
// as the call leaves it.
func (t *txn) traceReply(command string, out traced) *realmv1.AppendTraceResponse {
	if code, msg, refused := t.traceRefusal(out); refused {
		r := t.envelope(command)
		t.refuse(r, code, msg)
		r.NextActions = nil
		if out.kind == traceRunEnded {
			r.AgentAction = realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER
		}
		return &realmv1.AppendTraceResponse{Refusal: r}
	}
	return &realmv1.AppendTraceResponse{Counts: &realmv1.TraceCounts{
		BufferCount: int32(out.bufN), BufferBytes: int32(out.bufB), LimitCount: traceBufferCount, LimitBytes: traceBufferBytes,
		FinalLimitEntries: traceFinalCount, FinalLimitBytes: traceFinalBytes,
		FileCount: int32(out.fileN), FileBytes: int32(out.fileB), FileLimitCount: traceFileCount, FileLimitBytes: traceFileBytes,
	}}
}

// adoptTrace builds the trace recorded with an agent step: buffered
// entries of this writer (own) and of no writer (anonymous), then the
// call's own entries, cut to the final limits; another writer's entries
// stay buffered (preserved). It returns the counts the reply carries.
// adoptable is the buffered entries of step that a call with nonce would
// adopt (its own and the anonymous ones), without adopting them.
func (t *txn) adoptable(step, nonce string) []traceEntry {
	var out []traceEntry
	for _, e := range t.buffered(step) {
		if e.WriterNonce == "" || e.WriterNonce == nonce {
			out = append(out, e)
		}
	}
	return out
}

func (t *txn) adoptTrace(step, nonce string, call []*realmv1.TraceEntry) (trace []any, summary map[string]any, own, anon, foreign int) {
	var keep []traceEntry
	var adopted []traceEntry
	for _, e := range t.buffered(step) {
		switch {
		case e.WriterNonce == "":
			anon++
			adopted = append(adopted, e)
		case e.WriterNonce == nonce:
			own++
			adopted = append(adopted, e)
		default:
			foreign++
			keep = append(keep, e)
		}
	}
	submitted := entriesFrom(call, nonce)
	adopted = append(adopted, submitted...)
	if own+anon > 0 || foreign > 0 {
		t.setBuffered(step, keep)
	}
	if len(adopted) == 0 {
		return nil, nil, own, anon, foreign
	}
	bytes, overflow := 0, 0
	for i, e := range adopted {
		n := e.size()
		if i >= traceFinalCount || bytes+n > traceFinalBytes {
			overflow = len(adopted) - i
			break
		}
		bytes += n
		m := map[string]any{"seq": i + 1, "event": e.Event}
		if e.Timestamp != "" {
			m["timestamp"] = e.Timestamp
		}
		if e.Data != nil {
			m["data"] = e.Data
		}
		trace = append(trace, m)
	}
	summary = map[string]any{
		"submitted_entries":          len(submitted),
		"stored_entries":             len(trace),
		"discarded_entries":          overflow,
		"discarded_overflow_entries": overflow,
		"truncated":                  overflow > 0,
		"buffered_lines_adopted":     own + anon,
	}
	return trace, summary, own, anon, foreign
}
