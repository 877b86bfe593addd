package server_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// ListRuns open_gates pages through the index of open gates, newest gate
// first: a run leaves it when its gate is answered, and runs that never
// opened a gate are never read.
func TestOpenGatesArePagedFromTheirIndex(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, readFile(t, "testdata/health_gated_no_expiry.yaml"))
		e.register(t, readFile(t, "testdata/triage.yaml"))
		var gated []string // oldest first
		for range 3 {
			gated = append(gated, start(t, e, "gated_open", nil).GetRunId())
			e.clock.Advance(time.Second)
		}
		start(t, e, "triage", map[string]any{"ticket": 1}) // open, at no gate
		list := func(token string) *realmv1.ListRunsResponse {
			t.Helper()
			resp, err := e.client.ListRuns(ctx(t), &realmv1.ListRunsRequest{OpenGates: true, Limit: 2, PageToken: token})
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		ids := func(r *realmv1.ListRunsResponse) (out []string) {
			for _, s := range r.GetRuns() {
				out = append(out, s.GetRunId())
			}
			return out
		}
		first := list("")
		if got := ids(first); len(got) != 2 || got[0] != gated[2] || got[1] != gated[1] || first.GetNextPageToken() == "" {
			t.Fatalf("first page %v (next %q), want %v then a next page", got, first.GetNextPageToken(), []string{gated[2], gated[1]})
		}
		if got := ids(list(first.GetNextPageToken())); len(got) != 1 || got[0] != gated[0] {
			t.Fatalf("second page %v, want [%s]", got, gated[0])
		}

		// Answered: out of the index.
		st := state(t, e, gated[1])
		if r, err := e.client.SubmitHumanResponse(ctx(t), &realmv1.SubmitHumanResponseRequest{RunId: gated[1], GateId: st.GetPendingGate().GetGateId(), Choice: "hold"}); err != nil || len(r.GetReply().GetErrors()) > 0 {
			t.Fatal(err, r.GetReply().GetErrors())
		}

		resp, err := e.client.ListRuns(ctx(t), &realmv1.ListRunsRequest{OpenGates: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(resp); len(got) != 2 || got[0] != gated[2] || got[1] != gated[0] || resp.GetRuns()[0].GetGateStep() != "approve" {
			t.Fatalf("after an answer: %v, want [%s %s]", got, gated[2], gated[0])
		}
	})
}

func TestOpenGatesRefusesWhatContradictsIt(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		for _, req := range []*realmv1.ListRunsRequest{
			{OpenGates: true, Stuck: true},
			{OpenGates: true, Phase: realmv1.RunPhase_RUN_PHASE_RUNNING},
		} {
			if _, err := e.client.ListRuns(ctx(t), req); status.Code(err) != codes.InvalidArgument {
				t.Errorf("%v: got %v, want InvalidArgument", req, err)
			}
		}
	})
}
