package server_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/realm-go/realm/engine-svc/internal/store"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// A run reads the latest registered copy each time it moves, so pruning
// the versions past the keep limit never takes away one a run uses: a run
// started on the first version still ends once its workflow has been
// registered far past the limit, and `realm workflow migrate` walks only
// the versions still stored.
func TestRunUnderWayOutlivesThePruningOfItsFirstVersion(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, []byte(answerWorkflow))
		run := start(t, e, "answer", nil).GetRunId()
		const regs = store.DefaultKeepWorkflowVersions + 5
		for i := 2; i <= regs; i++ {
			wf := strings.Replace(answerWorkflow, "description: Answer.", fmt.Sprintf("description: Answer (%d).", i), 1)
			if r := e.register(t, []byte(wf)); !r.GetRegistered() || r.GetStoredVersion() != int64(i) {
				t.Fatalf("registration %d: %v", i, r)
			}
		}
		if _, err := e.st.GetWorkflowVersion(ctx(t), "answer", 1); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("v1 after %d registrations: %v, want pruned", regs, err)
		}
		if r := step(t, e, run, "answer", map[string]any{"text": "hi"}); r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
			t.Fatalf("answer on a run started on a pruned version: %v", r)
		}
		if _, d := e.doc(t, run); d["workflow_version"] != float64(1) {
			t.Errorf("run record workflow_version = %v, want the label 1", d["workflow_version"])
		}

		// Migrate finds the one copy left without an origin among the kept ones.
		latest, err := e.st.GetWorkflow(ctx(t), "answer")
		if err != nil {
			t.Fatal(err)
		}
		var def map[string]any
		_ = json.Unmarshal(latest.Definition, &def)
		delete(def, "origin")
		b, _ := json.Marshal(def)
		if err := e.rc.HSet(ctx(t), e.prefix+":wf:answer", fmt.Sprintf("v%d", latest.Version), b).Err(); err != nil {
			t.Fatal(err)
		}
		resp, err := e.client.MigrateWorkflows(ctx(t), &realmv1.MigrateWorkflowsRequest{})
		if err != nil || resp.GetMigrated() != 1 {
			t.Fatalf("migrate = %v, %v; want 1 migrated", resp, err)
		}
	})
}
