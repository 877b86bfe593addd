package replicas

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

// gRPC server reflection hands anyone who can connect a map of every call
// a service takes: the engine-svc and agent-svc binaries serve it only
// with --reflection.
func TestReflectionIsOffUnlessAskedFor(t *testing.T) {
	t.Parallel()
	bins := buildBinaries(t)
	url := redisURL()
	prefix := isolatedPrefix(t, url)
	for _, on := range []bool{false, true} {
		args := []string{"--redis-url", url, "--redis-prefix", prefix}
		if on {
			args = append(args, "--reflection")
		}
		_, engineAddr := startEngineOn(t, bins, "engine-svc", args...)
		agentAddr := freeAddr(t)
		agentArgs := []string{"--addr", agentAddr, "--engine-addr", engineAddr}
		if on {
			agentArgs = append(agentArgs, "--reflection")
		}
		p, err := startEnv(t, "agent-svc", bins.agent, noRedisEnv(), agentArgs...)
		if err != nil {
			t.Fatal(err)
		}
		if err := awaitEngine(p, "agent-svc", agentAddr); err != nil {
			t.Fatal(err)
		}
		for _, addr := range []string{engineAddr, agentAddr} {
			err := listServices(t, addr)
			switch {
			case on && err != nil:
				t.Errorf("%s with --reflection: %v", addr, err)
			case !on && status.Code(err) != codes.Unimplemented:
				t.Errorf("%s without --reflection: reflection answered (%v), want Unimplemented", addr, err)
			}
		}
	}
}

// listServices asks the server at addr, through reflection, which
// services it has.
func listServices(t *testing.T, addr string) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return err
	}
	// A server that refuses the stream may end it before the request is
	// sent: Send then says io.EOF, and Recv has the status (grpc-go's
	// SendMsg contract).
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_, err = stream.Recv()
	return err
}
