package runner_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
)

// With MetricsAddr the runner serves /metrics, counting the engine's
// handler calls.
func TestMetricsCountHandlerCalls(t *testing.T) {
	t.Parallel()
	// A free port: the metrics listener binds it by address.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := setup(t, &fakeRegistry{}, runner.Options{MetricsAddr: addr},
		runner.Registration{Name: "ok", Handler: returns(handler.Empty(), nil)})
	for range 2 {
		if _, err := s.client.ExecuteHandler(context.Background(), &realmv1.ExecuteHandlerRequest{Handler: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `grpc_server_handled_total{grpc_code="OK",grpc_method="ExecuteHandler",grpc_service="realm.v1.RunnerService",grpc_type="unary"} 2`
	if !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %q", want)
	}
}
