package engine

import (
	"context"
	"errors"

	"github.com/realm-go/realm/engine-svc/internal/health"
	"github.com/realm-go/realm/engine-svc/internal/inspect"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// InspectRun renders `realm run inspect`: the whole run as a person reads
// it. Capability blocks are judged from the record alone (seed 001).
func (e *Engine) InspectRun(ctx context.Context, req *realmv1.InspectRunRequest) (*realmv1.InspectRunResponse, error) {
	t, err := e.read(ctx, req.GetRunId())
	if errors.Is(err, errRunNotFound) {
		return nil, errcode.New(errcode.StateRunNotFound, "Run not found: "+req.GetRunId())
	}
	if err != nil {
		return nil, err
	}
	entries, err := e.evidence(ctx, t.run.ID)
	if err != nil {
		return nil, err
	}
	in := inspect.Input{Run: t.run, Outputs: t.outputs, Entries: entries, Now: t.now, Verbose: req.GetVerbose()}
	hin := health.Input{Run: t.run, DefErr: t.defErr, Now: t.now, Entries: entries}
	if t.def != nil {
		in.Def, hin.Def = t.def.Def, t.def.Def
		v := t.view()
		for _, s := range v.owed {
			in.Owed = append(in.Owed, s.Name)
		}
		for _, s := range v.agents {
			in.AgentsReady = append(in.AgentsReady, s.Name)
		}
		for _, c := range v.refused {
			in.CannotRun = append(in.CannotRun, inspect.Refusal{Step: c.step.Name, Check: string(c.check), Why: c.why})
		}
		in.WaitingOnAnswer = t.waitingOnAnswer()
	}
	in.Findings = health.Classify(hin)
	return &realmv1.InspectRunResponse{Text: inspect.Render(in)}, nil
}
