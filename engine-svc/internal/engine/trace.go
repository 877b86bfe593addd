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
	var resp *realmv1.AppendTraceResponse
	_, err := e.update(ctx, req.GetRunId(), func(t *txn) error {
		resp = nil
		refuse := func(code errcode.Code, msg string) {
			r := t.envelope(command)
			t.refuse(r, code, msg)
			r.NextActions = nil
			resp = &realmv1.AppendTraceResponse{Refusal: r}
		}
		step := req.GetStepId()
		switch {
		case t.run.Terminal():
			refuse(errcode.StateStepNotEligible, fmt.Sprintf("Run '%s' is terminal (phase: '%s') — trace entries can no longer be adopted by any step.", t.run.ID, t.run.Phase()))
			resp.Refusal.AgentAction = realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER
			return nil
		case t.def == nil:
			refuse(errcode.StateWorkflowNotFound, t.defErr.Error())
			return nil
		}
		s := t.stepOf(step)
		if s == nil {
			refuse(errcode.StepNotFound, fmt.Sprintf("Step '%s' not found in workflow '%s'.", step, t.run.WorkflowID))
			return nil
		}
		// A step still waiting on its dependencies may gather a trace.
		if u := t.notCallable(s); u != nil && u.kind != callWaiting {
			refuse(errcode.StateStepNotEligible, fmt.Sprintf("Step '%s' %s.", step, u.afterStep()))
			return nil
		}
		if s.Execution != workflow.KindAgent {
			refuse(errcode.StateStepNotEligible, fmt.Sprintf("Step '%s' is not an agent step; only an agent step's trace is recorded.", step))
			return nil
		}
		nonce := req.GetWriterNonce()
		all := append(t.buffered(step), entriesFrom(req.GetEntries(), nonce)...)
		bufN, bufB, fileN, fileB := counts(all, nonce)
		if bufN > traceBufferCount || bufB > traceBufferBytes || fileN > traceFileCount || fileB > traceFileBytes {
			refuse(errcode.BufferFull, fmt.Sprintf("The trace buffer of step '%s' is full (%d entries, %d bytes for this writer; %d entries, %d bytes in all); nothing was added.", step, bufN, bufB, fileN, fileB))
			return nil
		}
		t.setBuffered(step, all)
		resp = &realmv1.AppendTraceResponse{Counts: &realmv1.TraceCounts{
			BufferCount: int32(bufN), BufferBytes: int32(bufB), LimitCount: traceBufferCount, LimitBytes: traceBufferBytes,
			FinalLimitEntries: traceFinalCount, FinalLimitBytes: traceFinalBytes,
			FileCount: int32(fileN), FileBytes: int32(fileB), FileLimitCount: traceFileCount, FileLimitBytes: traceFileBytes,
		}}
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
	return resp, nil
}

// adoptTrace builds the trace recorded with an agent step: buffered
// entries of this writer (own) and of no writer (anonymous), then the
// call's own entries, cut to the final limits; another writer's entries
// stay buffered (preserved). It returns the counts the reply carries.
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
