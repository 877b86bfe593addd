package client

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// countServer counts the ListWorkflows calls it answers.
type countServer struct {
	realmv1.UnimplementedEngineServiceServer
	calls atomic.Int64
}

func (s *countServer) ListWorkflows(context.Context, *realmv1.ListWorkflowsRequest) (*realmv1.ListWorkflowsResponse, error) {
	s.calls.Add(1)
	return &realmv1.ListWorkflowsResponse{Status: "ok"}, nil
}

// serveCounting starts an engine stand-in and returns it, its address and
// a function that stops it.
func serveCounting(t *testing.T) (*countServer, string, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cs := &countServer{}
	srv := grpc.NewServer()
	realmv1.RegisterEngineServiceServer(srv, cs)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return cs, lis.Addr().String(), srv.Stop
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

func TestDialSpreadsCallsOverEveryListedReplica(t *testing.T) {
	t.Parallel()
	a, addrA, _ := serveCounting(t)
	b, addrB, _ := serveCounting(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	engine, conn, err := DialEngine(ctx, addrA+", "+addrB)
	if err != nil {
		t.Fatalf("DialEngine: %v", err)
	}
	defer conn.Close()
	// Round-robin starts once both subchannels are ready; until then calls
	// may all go to the first one up, so call until both have answered.
	for i := 0; i < 400 && (a.calls.Load() == 0 || b.calls.Load() == 0); i++ {
		if _, err := engine.ListWorkflows(ctx, &realmv1.ListWorkflowsRequest{}); err != nil {
			t.Fatalf("ListWorkflows: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if a.calls.Load() == 0 || b.calls.Load() == 0 {
		t.Fatalf("calls: %d to %s, %d to %s; want both replicas used", a.calls.Load(), addrA, b.calls.Load(), addrB)
	}
}

func TestDialToleratesADeadReplicaInTheList(t *testing.T) {
	t.Parallel()
	live, addr, _ := serveCounting(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	engine, conn, err := DialEngine(ctx, freeAddr(t)+","+addr)
	if err != nil {
		t.Fatalf("DialEngine: %v", err)
	}
	defer conn.Close()
	for i := 0; i < 10; i++ {
		if _, err := engine.ListWorkflows(ctx, &realmv1.ListWorkflowsRequest{}); err != nil {
			t.Fatalf("call %d: %v (the live replica should answer every call)", i, err)
		}
	}
	if got := live.calls.Load(); got != 10 {
		t.Errorf("live replica answered %d calls, want 10", got)
	}
}

func TestCallsMoveToTheReplicaLeftWhenOneStops(t *testing.T) {
	t.Parallel()
	a, addrA, _ := serveCounting(t)
	b, addrB, stopB := serveCounting(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	engine, conn, err := DialEngine(ctx, addrA+","+addrB)
	if err != nil {
		t.Fatalf("DialEngine: %v", err)
	}
	defer conn.Close()
	for i := 0; i < 400 && b.calls.Load() == 0; i++ {
		_, _ = engine.ListWorkflows(ctx, &realmv1.ListWorkflowsRequest{})
		time.Sleep(5 * time.Millisecond)
	}
	stopB()
	before := a.calls.Load()
	// Calls already routed to the stopped replica may fail while the
	// connection notices; afterwards every call reaches the other.
	ok := 0
	for i := 0; i < 400 && ok < 10; i++ {
		if _, err := engine.ListWorkflows(ctx, &realmv1.ListWorkflowsRequest{}); err == nil {
			ok++
		} else {
			ok = 0
			time.Sleep(5 * time.Millisecond)
		}
	}
	if ok < 10 || a.calls.Load()-before < 10 {
		t.Fatalf("after one replica stopped: %d calls in a row succeeded, %d reached the live one", ok, a.calls.Load()-before)
	}
}

func TestDialReportsEveryReplicaDown(t *testing.T) {
	t.Parallel()
	list := freeAddr(t) + "," + freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Dial(ctx, list)
	var u *UnreachableError
	if !errors.As(err, &u) {
		t.Fatalf("Dial error = %v, want *UnreachableError", err)
	}
	if !strings.HasPrefix(err.Error(), "cannot reach engine-svc at "+list+": ") {
		t.Errorf("message = %q, want it to name the list", err.Error())
	}
	if ctx.Err() != nil {
		t.Error("refused connections should fail before the deadline")
	}
}

func TestSplitAddrs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     string
		target   bool
	}{
		{"one address", "127.0.0.1:7070", "127.0.0.1:7070", false},
		{"a list with blanks", " a:1 , ,b:2,", "a:1|b:2", false},
		{"host names", "engine-0.engine:7070,engine-1.engine:7070", "engine-0.engine:7070|engine-1.engine:7070", false},
		{"a gRPC ipv4 target is kept", "ipv4:10.0.0.1:1,10.0.0.2:1", "ipv4:10.0.0.1:1|10.0.0.2:1", true},
		{"a dns target is kept", "dns:///engine:7070", "dns:///engine:7070", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := strings.Join(splitAddrs(tt.in), "|"); got != tt.want {
				t.Errorf("splitAddrs(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got := isTarget(tt.in); got != tt.target {
				t.Errorf("isTarget(%q) = %v, want %v", tt.in, got, tt.target)
			}
		})
	}
}
