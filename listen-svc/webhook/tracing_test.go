package webhook_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/realm-go/realm/listen-svc/webhook"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/tracing"
)

// traceAgent is an AgentService that keeps the traceparent each drive
// arrives with and answers one started event.
type traceAgent struct {
	realmv1.UnimplementedAgentServiceServer
	got chan string
}

func (a *traceAgent) DriveRun(_ *realmv1.DriveRunRequest, s grpc.ServerStreamingServer[realmv1.DriveRunResponse]) error {
	md, _ := metadata.FromIncomingContext(s.Context())
	a.got <- strings.Join(md.Get("traceparent"), ",")
	return s.Send(&realmv1.DriveRunResponse{Event: &realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_STARTED}})
}

// The drive a webhook hands to agent-svc outlives the request, yet it
// stays in the webhook's trace: with tracing set up as listen-svc's main
// does it (no exporter), the traceparent a delivery carries reaches
// agent-svc.
func TestADriveContinuesTheWebhookTrace(t *testing.T) {
	for _, k := range []string{tracing.EnvEndpoint, tracing.EnvTracesEndpoint} {
		t.Setenv(k, "")
	}
	shutdown, err := tracing.Setup(context.Background(), "listen-svc")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()

	fake := &traceAgent{got: make(chan string, 1)}
	gs := grpc.NewServer()
	realmv1.RegisterAgentServiceServer(gs, fake)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), append(tracing.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	agent := webhook.NewAgent(realmv1.NewAgentServiceClient(conn), &realmv1.DriveOptions{}, nil)
	defer agent.Close()

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	h := tracing.Handler("webhook", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := agent.Dispatch(r.Context(), "run-1"); err != nil {
			t.Errorf("dispatch: %v", err)
		}
	}))
	req := httptest.NewRequest(http.MethodPost, "/hooks/tickets", nil)
	req.Header.Set("traceparent", parent)
	h.ServeHTTP(httptest.NewRecorder(), req)
	if got := <-fake.got; got != parent {
		t.Errorf("agent-svc got traceparent %q, want the delivery's %q", got, parent)
	}
}
