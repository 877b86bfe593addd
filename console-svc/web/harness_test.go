package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/realm-go/realm/console-svc/identity"
	"github.com/realm-go/realm/console-svc/web"
	"github.com/realm-go/realm/engine-svc/enginetest"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// testCtx is a test's deadline for one engine call.
func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startEngine serves a real engine (miniredis) over gRPC and registers the
// test workflows.
func startEngine(t testing.TB) realmv1.EngineServiceClient {
	t.Helper()
	return startEngineWith(t, enginetest.Options{})
}

// startEngineWith is startEngine with the engine's options (its clock).
func startEngineWith(t testing.TB, o enginetest.Options) realmv1.EngineServiceClient {
	t.Helper()
	addr := enginetest.StartWith(t, "miniredis", o)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	eng := realmv1.NewEngineServiceClient(conn)
	for _, name := range []string{"payout", "review", "expiring"} {
		y, err := os.ReadFile(filepath.Join("testdata", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := eng.RegisterWorkflow(testCtx(t), &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: y, Path: name + ".yaml"}})
		if err != nil || !resp.GetRegistered() {
			t.Fatalf("register %s: %v %s", name, err, resp.GetReport().GetText())
		}
	}
	return eng
}

// startRun starts a run of wf and returns its id; both test workflows stop
// at their gate at once.
func startRun(t testing.TB, eng realmv1.EngineServiceClient, wf string, params map[string]any) string {
	t.Helper()
	p, err := structpb.NewStruct(params)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := eng.StartRun(testCtx(t), &realmv1.StartRunRequest{WorkflowId: wf, Params: p, Caller: &realmv1.Caller{By: "test", BySource: "stated"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetReply().GetRunPhase() != realmv1.RunPhase_RUN_PHASE_GATE_WAITING {
		t.Fatalf("start %s: want gate_waiting, got %v %v", wf, resp.GetReply().GetRunPhase(), resp.GetReply().GetErrors())
	}
	return resp.GetReply().GetRunId()
}

// pendingGate is a run's open gate (nil when none).
func pendingGate(t testing.TB, eng realmv1.EngineServiceClient, runID string) *realmv1.PendingGate {
	t.Helper()
	st, err := eng.GetRunState(testCtx(t), &realmv1.GetRunStateRequest{RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetState().GetTerminalState() {
		return nil
	}
	return st.GetState().GetPendingGate()
}

// proxyHeader is the identity header the tests' reverse proxy would set.
const proxyHeader = "X-Forwarded-User"

// loopbackProxy trusts the identity header from this machine: the tests'
// requests are the proxy's.
var loopbackProxy = identity.Proxy{Header: proxyHeader, Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}

// startConsole serves the console over eng on a loopback port.
func startConsole(t testing.TB, eng realmv1.EngineServiceClient, src identity.Source, poll time.Duration) *httptest.Server {
	t.Helper()
	s, err := web.New(web.Options{Engine: eng, Identity: src, Poll: poll, PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// noRedirect is a client that shows the console's redirects instead of
// following them.
var noRedirect = &http.Client{
	Timeout:       20 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}
