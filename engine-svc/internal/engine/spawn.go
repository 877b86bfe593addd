package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// SealSpawnFailure ends an open run failed with the spawn_failure arm: the
// webhook listener made it and no driver could take it (spec §6.7). A run
// that has already ended keeps its ending.
func (e *Engine) SealSpawnFailure(ctx context.Context, req *realmv1.SealSpawnFailureRequest) (*realmv1.SealSpawnFailureResponse, error) {
	t, err := e.update(ctx, req.GetRunId(), func(t *txn) error {
		if t.run.Terminal() {
			return nil
		}
		for _, s := range t.run.InProgressSteps {
			delete(t.run.Claims, s)
		}
		t.run.InProgressSteps = []string{}
		t.run.PendingGate = nil
		t.run.Seal(record.ArmSpawnFailure, "", fmt.Sprintf("spawn_failure: %s", req.GetReason()))
		t.touch()
		return nil
	})
	if errors.Is(err, errRunNotFound) {
		return nil, errcode.New(errcode.StateRunNotFound, "Run not found: "+req.GetRunId())
	}
	if err != nil {
		return nil, err
	}
	return &realmv1.SealSpawnFailureResponse{RunPhase: phaseEnum(t.run.Phase())}, nil
}
