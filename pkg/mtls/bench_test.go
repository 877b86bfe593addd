package mtls

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// BenchmarkUnaryCall is what mutual TLS and the per-call role check cost
// a unary call on loopback, against plaintext.
func BenchmarkUnaryCall(b *testing.B) {
	dir := b.TempDir()
	if _, err := EnsureDev(dir, []Spec{{Name: "engine-svc", Role: RoleEngine}, {Name: "operator", Role: RoleOperator}}, time.Now()); err != nil {
		b.Fatal(err)
	}
	policy := Policy{Service: "bench", Rules: map[string][]Role{"/grpc.health.v1.Health/": {RoleOperator}}}
	for _, tc := range []struct {
		name string
		tls  bool
	}{{"plaintext", false}, {"mtls", true}} {
		b.Run(tc.name, func(b *testing.B) {
			var sopts []grpc.ServerOption
			dial := grpc.WithTransportCredentials(insecure.NewCredentials())
			if tc.tls {
				creds, err := DevFiles(dir, "engine-svc").ServerCredentials()
				if err != nil {
					b.Fatal(err)
				}
				sopts = policy.ServerOptions(creds)
				cc, err := DevFiles(dir, "operator").ClientCredentials(RoleEngine)
				if err != nil {
					b.Fatal(err)
				}
				dial = grpc.WithTransportCredentials(cc)
			}
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			gs := grpc.NewServer(sopts...)
			healthpb.RegisterHealthServer(gs, health.NewServer())
			go func() { _ = gs.Serve(lis) }()
			defer gs.Stop()
			conn, err := grpc.NewClient(lis.Addr().String(), dial)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			hc := healthpb.NewHealthClient(conn)
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHandshake is a new connection's cost: what a client pays once
// per connection (the files are stat'ed each time, re-read on change).
func BenchmarkHandshake(b *testing.B) {
	dir := b.TempDir()
	if _, err := EnsureDev(dir, []Spec{{Name: "engine-svc", Role: RoleEngine}, {Name: "operator", Role: RoleOperator}}, time.Now()); err != nil {
		b.Fatal(err)
	}
	creds, err := DevFiles(dir, "engine-svc").ServerCredentials()
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(creds))
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	cc, err := DevFiles(dir, "operator").ClientCredentials(RoleEngine)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(cc))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			b.Fatal(err)
		}
		conn.Close()
	}
}
