package server_test

import (
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/realm-go/realm/agent-svc/internal/provider"
	"github.com/realm-go/realm/agent-svc/internal/server"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// countingListener is a server on 127.0.0.1 that counts the connections
// made to it and closes each at once.
func countingListener(t *testing.T) (url string, conns *atomic.Int64) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	conns = &atomic.Int64{}
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	return "http://" + lis.Addr().String() + "/v1", conns
}

func TestADriveNamingABaseURLNotAllowedIsRefusedBeforeAnyConnection(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	url, conns := countingListener(t)
	agent := startAgent(t, server.Config{Engine: eng, Services: provider.Services{OpenAI: provider.Config{APIKey: "test-key"}}})
	for _, base := range []string{url, url + "/chat"} {
		evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "triage", Params: params(t, map[string]any{"ticket": 7}),
			Options: &realmv1.DriveOptions{Provider: "openai", Model: "test-model", BaseUrl: base}}, nil)
		want := "Error: base URL '" + base + "' is not allowed: agent-svc sends its API keys only to the providers' official endpoints, " +
			"its own OPENAI_BASE_URL/ANTHROPIC_BASE_URL and the URLs it was started with --allow-base-url; start agent-svc with --allow-base-url " +
			base + " to allow it. Nothing was sent."
		if len(evs) != 1 || evs[0].GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_REFUSED || evs[0].GetExitCode() != 1 ||
			strings.TrimSuffix(texts(evs), "\n") != want {
			t.Errorf("events = %v\nwant one refusal %q", evs, want)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the refused base URL saw %d connection(s), want 0", n)
	}
	runs, err := eng.ListRuns(ctx(t), &realmv1.ListRunsRequest{WorkflowId: "triage"})
	if err != nil || len(runs.GetRuns()) != 0 {
		t.Errorf("runs %v (%v), want none started", runs.GetRuns(), err)
	}
}

func TestADriveNamingAnAllowedBaseURLIsDrivenThere(t *testing.T) {
	t.Parallel()
	eng := startEngine(t)
	st := newStub(t, "openai", triageAnswers)
	allow, err := provider.NewAllowlist(st.URL())
	if err != nil {
		t.Fatal(err)
	}
	agent := startAgent(t, server.Config{Engine: eng, Services: provider.Services{OpenAI: provider.Config{APIKey: "test-key"}}, AllowBaseURLs: allow})
	evs := drive(t, agent, &realmv1.DriveRunRequest{WorkflowId: "triage", Params: params(t, map[string]any{"ticket": 7}),
		Options: &realmv1.DriveOptions{Provider: "openai", Model: "test-model", BaseUrl: st.URL() + "/"}}, nil)
	end := last(evs)
	if end.GetOutcome() != realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
		t.Fatalf("last event = %v\n%s", end, texts(evs))
	}
	if n := len(st.seen()); n != 2 {
		t.Errorf("the allowed base URL saw %d model request(s), want 2", n)
	}
}
