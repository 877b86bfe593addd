package client

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

type listServer struct {
	realmv1.UnimplementedEngineServiceServer
}

func (listServer) ListWorkflows(context.Context, *realmv1.ListWorkflowsRequest) (*realmv1.ListWorkflowsResponse, error) {
	return &realmv1.ListWorkflowsResponse{Status: "ok"}, nil
}

func TestDialEngineReachesARunningServer(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	realmv1.RegisterEngineServiceServer(srv, listServer{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	engine, conn, err := DialEngine(ctx, lis.Addr().String())
	if err != nil {
		t.Fatalf("DialEngine: %v", err)
	}
	defer conn.Close()
	resp, err := engine.ListWorkflows(ctx, &realmv1.ListWorkflowsRequest{})
	if err != nil || resp.GetStatus() != "ok" {
		t.Fatalf("ListWorkflows = %v, %v", resp, err)
	}
}

func TestDialReportsAServerThatIsNotRunning(t *testing.T) {
	t.Parallel()
	// Take a free port, then close it so nothing listens there.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Dial(ctx, addr)
	var u *UnreachableError
	if !errors.As(err, &u) {
		t.Fatalf("Dial error = %v, want *UnreachableError", err)
	}
	if !IsUnreachable(err) {
		t.Error("IsUnreachable = false for a dial failure")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "cannot reach engine-svc at "+addr+": ") || strings.Contains(msg, "\n") {
		t.Errorf("message = %q, want one line naming the address", msg)
	}
	if !strings.Contains(msg, "refused") {
		t.Errorf("message = %q, want the dial cause (connection refused)", msg)
	}
	if ctx.Err() != nil {
		t.Error("a refused connection should fail before the deadline")
	}
}

func TestEngineAddr(t *testing.T) {
	t.Setenv(EngineAddrEnv, "")
	if got := EngineAddr(); got != DefaultEngineAddr {
		t.Errorf("EngineAddr() = %q with the variable empty, want %q", got, DefaultEngineAddr)
	}
	t.Setenv(EngineAddrEnv, " 10.0.0.1:9000 ")
	if got := EngineAddr(); got != "10.0.0.1:9000" {
		t.Errorf("EngineAddr() = %q, want the trimmed variable", got)
	}
}

func TestCauseStripsGRPCWrapping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"status", status.Error(codes.Unavailable, "connection error:\n  refused"), "connection error: refused"},
		{"plain", errors.New("boom"), "boom"},
		{"dial wrapping", status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`), "dial tcp 127.0.0.1:1: connect: connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Cause(tt.err); got != tt.want {
				t.Errorf("Cause = %q, want %q", got, tt.want)
			}
		})
	}
}
