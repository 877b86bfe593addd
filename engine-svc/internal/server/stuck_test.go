package server_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

func stuckList(t *testing.T, e *env, olderThan time.Duration) map[string]string {
	t.Helper()
	secs := int64(olderThan / time.Second)
	resp, err := e.client.ListRuns(ctx(t), &realmv1.ListRunsRequest{Stuck: true, OlderThanSeconds: &secs})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range resp.GetRuns() {
		out[r.GetRunId()] = strings.Join(r.GetLabels(), "  ")
	}
	return out
}

// --stuck selects runs from the timer indexes: a stale claim, an expired
// gate, a capability block, an idle run; a healthy run is not listed.
func TestStuckListSelectsEachKindFromTheIndexes(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		release := make(chan struct{})
		hungDone := make(chan struct{})
		defer func() { close(release); <-hungDone }()
		startRunner(t, e, map[string]handlerFunc{"hang": func(ctx context.Context, _ *realmv1.ExecuteHandlerRequest) (*realmv1.ExecuteHandlerResponse, error) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &realmv1.ExecuteHandlerResponse{Data: value(t, map[string]any{})}, nil
		}})
		e.register(t, oneStep("hang", "    timeout_seconds: 30\n"))
		e.register(t, oneStep("missing", ""))
		e.register(t, readFile(t, "testdata/expiring.yaml"))
		e.register(t, readFile(t, "testdata/triage.yaml"))

		go func() {
			defer close(hungDone)
			_, _ = e.client.StartRun(context.Background(), &realmv1.StartRunRequest{WorkflowId: "one_hang"})
		}()
		blocked := start(t, e, "one_missing", nil).GetRunId()
		gated := start(t, e, "expiring", nil).GetRunId()
		idle := start(t, e, "triage", map[string]any{"ticket": 1}).GetRunId()
		var hung string
		for i := 0; i < 200 && hung == ""; i++ {
			list, _ := e.client.ListRuns(ctx(t), &realmv1.ListRunsRequest{WorkflowId: "one_hang"})
			if len(list.GetRuns()) == 1 {
				hung = list.GetRuns()[0].GetRunId()
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got := stuckList(t, e, 24*time.Hour); len(got) != 1 || got[blocked] != "work: needs handler 'missing'" {
			t.Errorf("before time passes: %v", got)
		}
		e.clock.Advance(25 * time.Hour)
		got := stuckList(t, e, 24*time.Hour)
		want := map[string]string{
			hung:    "work=claim_stale",
			blocked: "work: needs handler 'missing'",
			gated:   "approve=gate_expired(settle_default) (realm run advance)",
			idle:    "",
		}
		var keys []string
		for k := range want {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if g, ok := got[k]; !ok || g != want[k] {
				t.Errorf("run %s: labels %q (listed %v), want %q", k, g, ok, want[k])
			}
		}
		if len(got) != len(want) {
			t.Errorf("listed %d runs, want %d: %v", len(got), len(want), got)
		}
	})
}
