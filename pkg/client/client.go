// Package client dials engine-svc. Front doors and tools share it so the
// address rule (REALM_ENGINE_ADDR, default 127.0.0.1:7070) and the
// "cannot reach" diagnosis live in one place.
package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/mtls"
)

// DefaultEngineAddr is where engine-svc listens unless told otherwise.
const DefaultEngineAddr = "127.0.0.1:7070"

// EngineAddrEnv names the variable that overrides DefaultEngineAddr.
const EngineAddrEnv = "REALM_ENGINE_ADDR"

// EngineAddr is $REALM_ENGINE_ADDR (trimmed) or DefaultEngineAddr.
func EngineAddr() string {
	if a := strings.TrimSpace(os.Getenv(EngineAddrEnv)); a != "" {
		return a
	}
	return DefaultEngineAddr
}

// UnreachableError says engine-svc could not be reached at Addr.
type UnreachableError struct {
	Addr  string
	Cause error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach engine-svc at %s: %s", e.Addr, Cause(e.Cause))
}

func (e *UnreachableError) Unwrap() error { return e.Cause }

// MaxAnswerBytes is the largest answer a connection from NewConn takes.
const MaxAnswerBytes = 64 << 20

// NewConn returns a client connection to addr without connecting (it
// connects on the first call). addr is one host:port, or several separated
// by commas: calls are then spread over every replica that answers
// (round-robin), and a replica that dies is left out until it is back.
//
// The connection is mutual TLS when REALM_TLS_CERT, REALM_TLS_KEY and
// REALM_TLS_CA name files (each replica's certificate must be valid for
// the host dialled), else plaintext; a Transport option in opts decides
// instead.
//
// Answers may be up to MaxAnswerBytes: a run's export carries its outputs
// and its evidence (which repeats them), past gRPC's 4 MiB default.
func NewConn(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	transport, err := Transport(mtls.FromEnv(nil))
	if err != nil {
		return nil, err
	}
	opts = append([]grpc.DialOption{transport,
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxAnswerBytes))}, opts...)
	target := addr
	if addrs := splitAddrs(addr); len(addrs) > 1 && !isTarget(addr) {
		// A resolver of our own rather than "ipv4:": replicas may be
		// named by host name, not only by IP.
		r := manual.NewBuilderWithScheme(replicaScheme)
		state := resolver.State{}
		for _, a := range addrs {
			// ServerName: each replica's certificate is checked
			// against the host it was dialled by, not the
			// resolver's made-up authority.
			state.Addresses = append(state.Addresses, resolver.Address{Addr: a, ServerName: hostOf(a)})
		}
		r.InitialState(state)
		target = replicaScheme + ":///engines"
		opts = append(opts, grpc.WithResolvers(r), grpc.WithDefaultServiceConfig(roundRobin))
	} else if len(addrs) == 1 {
		target = addrs[0]
	}
	return grpc.NewClient(target, opts...)
}

// isTarget reports whether addr is already a gRPC target naming its
// resolver ("ipv4:a,b", "dns:///host:port", "unix:///path"), which is
// passed to gRPC as written.
func isTarget(addr string) bool {
	if strings.Contains(addr, "://") {
		return true
	}
	for _, scheme := range []string{"ipv4:", "ipv6:", "unix:", "unix-abstract:", "dns:", "passthrough:"} {
		if strings.HasPrefix(addr, scheme) {
			return true
		}
	}
	return false
}

// replicaScheme names the resolver NewConn builds for a list of addresses.
const replicaScheme = "realm-engines"

// roundRobin is the service config of a connection to several replicas.
const roundRobin = `{"loadBalancingConfig": [{"round_robin": {}}]}`

// hostOf is addr's host, or addr when it has no port.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// splitAddrs splits a comma-separated address list, dropping blanks.
func splitAddrs(addr string) []string {
	var out []string
	for _, a := range strings.Split(addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Dial opens a client connection to addr (see NewConn) and waits, until
// ctx's deadline, for it to become ready, so that a server that is not
// running is reported once, plainly, before any call is made. With several
// addresses it is ready as soon as one replica is.
func Dial(ctx context.Context, addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	conn, err := NewConn(addr, opts...)
	if err != nil {
		return nil, &UnreachableError{Addr: addr, Cause: err}
	}
	if err := waitReady(ctx, conn); err != nil {
		_ = conn.Close()
		return nil, &UnreachableError{Addr: addr, Cause: err}
	}
	return conn, nil
}

// DialEngine is Dial plus the EngineService client on the connection.
func DialEngine(ctx context.Context, addr string, opts ...grpc.DialOption) (realmv1.EngineServiceClient, *grpc.ClientConn, error) {
	conn, err := Dial(ctx, addr, opts...)
	if err != nil {
		return nil, nil, err
	}
	return realmv1.NewEngineServiceClient(conn), conn, nil
}

// waitReady connects and blocks until the connection is ready. A refused
// connection fails at once rather than waiting out the deadline: the
// first transient failure is final, since a CLI call should not hang on a
// server that is not there.
func waitReady(ctx context.Context, conn *grpc.ClientConn) error {
	conn.Connect()
	for {
		s := conn.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure:
			return transientCause(ctx, conn)
		case connectivity.Shutdown:
			return errors.New("connection shut down")
		}
		if !conn.WaitForStateChange(ctx, s) {
			return ctx.Err()
		}
	}
}

// transientCause asks the connection why it failed: a fail-fast call on a
// connection in TRANSIENT_FAILURE returns the dial error as its status.
func transientCause(ctx context.Context, conn *grpc.ClientConn) error {
	err := conn.Invoke(ctx, "/grpc.health.v1.Health/Check", &realmv1.ListWorkflowsRequest{}, &realmv1.ListWorkflowsResponse{})
	if err == nil || status.Code(err) != codes.Unavailable {
		return errors.New("connection failed")
	}
	return err
}

// IsUnreachable reports whether err means the engine could not be reached
// (dial failure, or an RPC that found no server).
func IsUnreachable(err error) bool {
	var u *UnreachableError
	if errors.As(err, &u) {
		return true
	}
	return status.Code(err) == codes.Unavailable
}

// dialWrapping matches the transport's wrapping of a dial error, so that
// "connection error: desc = \"transport: Error while dialing: dial tcp …:
// connect: connection refused\"" reads "dial tcp …: connect: connection refused".
var dialWrapping = regexp.MustCompile(`^connection error: desc = "transport: (?:Error while dialing:? )?(.*)"$`)

// Cause is the message of err without gRPC's "rpc error: code = … desc ="
// wrapping, on one line.
func Cause(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	if s, ok := status.FromError(err); ok {
		msg = s.Message()
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if m := dialWrapping.FindStringSubmatch(msg); m != nil {
		msg = m[1]
	}
	switch {
	case strings.Contains(msg, "error reading server preface"):
		// A plaintext client hung up on by a TLS server.
		msg += " (the server may require mutual TLS: give --tls-cert, --tls-key and --tls-ca, or REALM_TLS_CERT, REALM_TLS_KEY and REALM_TLS_CA; docs/security.md)"
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		msg += " (the server speaks plaintext: it serves without TLS, on loopback; call it without TLS files)"
	}
	return msg
}

// ListAllWorkflows reads every page of ListWorkflows and returns them as
// one answer: the workflows and unreadable records of every page, in id
// order, and each distinct warning once.
func ListAllWorkflows(ctx context.Context, eng realmv1.EngineServiceClient) (*realmv1.ListWorkflowsResponse, error) {
	var all *realmv1.ListWorkflowsResponse
	req := &realmv1.ListWorkflowsRequest{Limit: 1000}
	for {
		page, err := eng.ListWorkflows(ctx, req)
		if err != nil {
			return nil, err
		}
		if all == nil {
			all = page
		} else {
			all.Workflows = append(all.Workflows, page.GetWorkflows()...)
			all.Unreadable = append(all.Unreadable, page.GetUnreadable()...)
			for _, w := range page.GetWarnings() {
				if !slices.Contains(all.Warnings, w) {
					all.Warnings = append(all.Warnings, w)
				}
			}
		}
		if page.GetNextPageToken() == "" || page.GetNextPageToken() == req.GetPageToken() {
			all.NextPageToken = ""
			return all, nil
		}
		req.PageToken = page.GetNextPageToken()
	}
}
