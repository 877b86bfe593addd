package replicas

import (
	"context"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/mtls"
	"github.com/realm-go/realm/pkg/runner"
)

// tlsStack is engine-svc and agent-svc serving mutual TLS with
// certificates of a development CA, as `make run` starts them.
type tlsStack struct {
	dir, engine, agent string
}

func startTLSStack(t *testing.T) tlsStack {
	t.Helper()
	bins := buildBinaries(t)
	dir := t.TempDir()
	specs := []mtls.Spec{
		{Name: "engine-svc", Role: mtls.RoleEngine},
		{Name: "agent-svc", Role: mtls.RoleFrontDoor},
		{Name: "mcp-svc", Role: mtls.RoleFrontDoor},
		{Name: "console-svc", Role: mtls.RoleFrontDoor},
		{Name: "operator", Role: mtls.RoleOperator},
		{Name: "shop", Role: mtls.RoleRunner, Grants: []string{"handler:sec_total"}},
		{Name: "thief", Role: mtls.RoleRunner, Grants: []string{"handler:other"}},
	}
	if _, err := mtls.EnsureDev(dir, specs, time.Now()); err != nil {
		t.Fatal(err)
	}
	flags := func(name string) []string {
		f := mtls.DevFiles(dir, name)
		return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA}
	}
	url := redisURL()
	prefix := isolatedPrefix(t, url)
	_, engineAddr := startEngineOn(t, bins, "engine-svc", append([]string{"--redis-url", url, "--redis-prefix", prefix}, flags("engine-svc")...)...)
	agentAddr := freeAddr(t)
	p, err := startEnv(t, "agent-svc", bins.agent, noRedisEnv(), append([]string{"--addr", agentAddr, "--engine-addr", engineAddr}, flags("agent-svc")...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := awaitEngine(p, "agent-svc", agentAddr); err != nil {
		t.Fatal(err)
	}
	return tlsStack{dir: dir, engine: engineAddr, agent: agentAddr}
}

// conn dials addr as the holder of certificate name ("" presents none,
// but still trusts the CA).
func (s tlsStack) conn(t *testing.T, addr, name string) *grpc.ClientConn {
	t.Helper()
	var opt grpc.DialOption
	if name == "" {
		f := mtls.DevFiles(s.dir, "operator")
		creds, err := credentials.NewClientTLSFromFile(f.CA, "")
		if err != nil {
			t.Fatal(err)
		}
		opt = grpc.WithTransportCredentials(creds)
	} else {
		var err error
		if opt, err = client.Transport(mtls.DevFiles(s.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.NewConn(addr, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// call invokes method with an empty request, as a caller that knows no
// more than the method's name would.
func call(t *testing.T, c *grpc.ClientConn, method string, stream bool) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !stream {
		return c.Invoke(ctx, method, &emptypb.Empty{}, &emptypb.Empty{})
	}
	cs, err := c.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method)
	if err != nil {
		return err
	}
	if err := cs.SendMsg(&emptypb.Empty{}); err != nil {
		return err
	}
	_ = cs.CloseSend()
	return cs.RecvMsg(&emptypb.Empty{})
}

type rpc struct {
	method string
	stream bool
}

func methods(d grpc.ServiceDesc) []rpc {
	var out []rpc
	for _, m := range d.Methods {
		out = append(out, rpc{"/" + d.ServiceName + "/" + m.MethodName, false})
	}
	for _, s := range d.Streams {
		out = append(out, rpc{"/" + d.ServiceName + "/" + s.StreamName, true})
	}
	return out
}

// Mutual TLS: no call is served to a caller that does not present a
// certificate from the Realm CA, and each role may make only its own.
func TestSecurityEveryCallChecksWhoIsCalling(t *testing.T) {
	t.Parallel()
	s := startTLSStack(t)
	engineRPCs := append(methods(realmv1.EngineService_ServiceDesc), methods(realmv1.RegistryService_ServiceDesc)...)
	operatorOnly := map[string]bool{}
	for _, m := range []string{"ResumeRun", "DrainRun", "DrainRuns", "PurgeRun", "PurgeRuns", "ReclaimRun", "GcRuns", "ReconcileKeys", "StampSeals", "MigrateWorkflows"} {
		operatorOnly["/realm.v1.EngineService/"+m] = true
	}

	t.Run("every RPC without a certificate is refused", func(t *testing.T) {
		t.Parallel()
		for addr, rpcs := range map[string][]rpc{s.engine: engineRPCs, s.agent: methods(realmv1.AgentService_ServiceDesc)} {
			c := s.conn(t, addr, "")
			for _, r := range rpcs {
				err := call(t, c, r.method, r.stream)
				if status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), "the caller presented no client certificate") {
					t.Errorf("%s without a certificate: %v", r.method, err)
				}
			}
		}
	})
	t.Run("a plaintext caller is not served at all", func(t *testing.T) {
		t.Parallel()
		c, err := client.NewConn(s.engine) // no REALM_TLS_* here: plaintext
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := call(t, c, "/realm.v1.EngineService/ListRuns", false); status.Code(err) != codes.Unavailable {
			t.Fatalf("plaintext ListRuns: %v", err)
		}
	})
	t.Run("a runner certificate may call only the registry", func(t *testing.T) {
		t.Parallel()
		c := s.conn(t, s.engine, "shop")
		for _, r := range engineRPCs {
			if strings.HasPrefix(r.method, "/realm.v1.RegistryService/") && !operatorOnly[r.method] {
				continue
			}
			err := call(t, c, r.method, r.stream)
			if status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), "from shop: role runner may call only the capability registry") {
				t.Errorf("%s as a runner: %v", r.method, err)
			}
		}
		err := call(t, s.conn(t, s.agent, "shop"), "/realm.v1.AgentService/DriveRun", true)
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("DriveRun as a runner: %v", err)
		}
	})
	t.Run("a front door may not call the operator's verbs", func(t *testing.T) {
		t.Parallel()
		c := s.conn(t, s.engine, "mcp-svc")
		for _, r := range engineRPCs {
			err := call(t, c, r.method, r.stream)
			denied := status.Code(err) == codes.PermissionDenied
			// The registry's writes are runners'; its list is readable.
			wantDenied := operatorOnly[r.method] || strings.HasPrefix(r.method, "/realm.v1.RegistryService/") &&
				r.method != "/realm.v1.RegistryService/ListCapabilities"
			if denied != wantDenied {
				t.Errorf("%s as a front door: %v (want refused: %v)", r.method, err, wantDenied)
			}
		}
		eng := realmv1.NewEngineServiceClient(c)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := eng.ExportRun(ctx, &realmv1.ExportRunRequest{RunId: "any", WithSecrets: true}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("export with secrets as a front door: %v", err)
		}
	})
	t.Run("only the console vouches for who answered a gate", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		op := realmv1.NewEngineServiceClient(s.conn(t, s.engine, "operator"))
		wf := "id: vouched\nname: Vouched\nversion: 1\nsteps:\n  ok:\n    description: Approve.\n    execution: auto\n    trust: human_confirmed\n    gate:\n      choices: [yes, no]\n"
		if r, err := op.RegisterWorkflow(ctx, &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: []byte(wf), Path: "vouched.yaml"}}); err != nil || !r.GetRegistered() {
			t.Fatalf("register: %v %s", err, r.GetReport().GetText())
		}
		st, err := op.StartRun(ctx, &realmv1.StartRunRequest{WorkflowId: "vouched"})
		if err != nil {
			t.Fatal(err)
		}
		run := st.GetReply().GetRunId()
		state, err := op.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: run})
		if err != nil || state.GetState().GetPendingGate() == nil {
			t.Fatalf("no gate open: %v %v", err, state)
		}
		gate := state.GetState().GetPendingGate().GetGateId()
		alice := "alice"
		answer := func(as string) error {
			_, err := realmv1.NewEngineServiceClient(s.conn(t, s.engine, as)).SubmitHumanResponse(ctx, &realmv1.SubmitHumanResponseRequest{
				RunId: run, GateId: gate, Choice: "yes", RespondedBy: &alice, RespondedByVerified: true})
			return err
		}
		if err := answer("mcp-svc"); status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), "only console-svc may vouch for who answered") {
			t.Fatalf("a door that does not sign people in vouched: %v", err)
		}
		if err := answer("console-svc"); err != nil {
			t.Fatal(err)
		}
		in, err := op.InspectRun(ctx, &realmv1.InspectRunRequest{RunId: run})
		if err != nil {
			t.Fatal(err)
		}
		if text := in.GetText(); !strings.Contains(text, "answered by alice (signed in to console-svc)") {
			t.Errorf("inspect does not say who vouched:\n%s", text)
		}
	})
	t.Run("the operator may call everything", func(t *testing.T) {
		t.Parallel()
		c := s.conn(t, s.engine, "operator")
		for _, r := range engineRPCs {
			if err := call(t, c, r.method, r.stream); status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.Unauthenticated {
				t.Errorf("%s as the operator: %v", r.method, err)
			}
		}
	})
}

const securityWorkflow = `id: sec
name: Security
description: One auto step served by a runner over mutual TLS.
version: 1
steps:
  total:
    description: The runner adds it up.
    execution: auto
    handler: sec_total
`

// A runner registers only what its certificate grants, renews and
// deregisters only its own registration, and is called by the engine
// (and only the engine) over mutual TLS.
func TestSecurityRunnersServeOnlyWhatTheirCertificateGrants(t *testing.T) {
	t.Parallel()
	s := startTLSStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	regAs := func(name string) realmv1.RegistryServiceClient {
		return realmv1.NewRegistryServiceClient(s.conn(t, s.engine, name))
	}
	registered := func() int {
		caps, err := regAs("operator").ListCapabilities(ctx, &realmv1.ListCapabilitiesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return len(caps.GetRunners())
	}

	_, err := regAs("thief").Register(ctx, &realmv1.RegisterRequest{Endpoint: "127.0.0.1:1", RunnerName: "thief",
		Handlers: []*realmv1.HandlerSpec{{Name: "sec_total"}}})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(),
		"from thief: its certificate does not grant handler sec_total (it grants: handler:other). Nothing was registered") {
		t.Fatalf("a runner registering another's handler: %v", err)
	}
	// An adapter named only in adapter_specs is checked the same.
	_, err = regAs("thief").Register(ctx, &realmv1.RegisterRequest{Endpoint: "127.0.0.1:1", RunnerName: "thief",
		AdapterSpecs: []*realmv1.AdapterSpec{{Name: "http"}}})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), "its certificate does not grant adapter http") {
		t.Fatalf("a runner registering another's adapter by its spec: %v", err)
	}
	if n := registered(); n != 0 {
		t.Fatalf("after the refusal %d runners are registered", n)
	}

	// The real runner, over mutual TLS both ways.
	total := handler.Func(func(context.Context, handler.Inputs, handler.StepContext) (handler.Result, error) {
		return handler.Result{Data: map[string]any{"total": 42}}, nil
	})
	runnerCtx, stopRunner := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runner.Serve(runnerCtx, runner.Options{Name: "shop", EngineAddr: s.engine, TLS: mtls.DevFiles(s.dir, "shop"),
			ShutdownTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)}, runner.Registration{Name: "sec_total", Handler: total})
	}()
	defer func() { stopRunner(); <-done }()
	if err := poll("the runner to register", 15*time.Second, func() bool { return registered() == 1 }); err != nil {
		t.Fatal(err)
	}
	caps, err := regAs("operator").ListCapabilities(ctx, &realmv1.ListCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	shop := caps.GetRunners()[0]
	if _, err := regAs("thief").Deregister(ctx, &realmv1.DeregisterRequest{RunnerId: shop.GetRunnerId()}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a runner deregistering another: %v", err)
	}
	if n := registered(); n != 1 {
		t.Fatalf("the real runner was deregistered by another's certificate")
	}
	// Only the engine may call the runner.
	err = call(t, s.conn(t, shop.GetEndpoint(), "mcp-svc"), "/realm.v1.RunnerService/ExecuteHandler", false)
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a front door calling the runner: %v", err)
	}

	eng := realmv1.NewEngineServiceClient(s.conn(t, s.engine, "operator"))
	reg, err := eng.RegisterWorkflow(ctx, &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: []byte(securityWorkflow), Path: "sec.yaml"}})
	if err != nil || !reg.GetRegistered() {
		t.Fatalf("register: %v %s", err, reg.GetReport().GetText())
	}
	started, err := eng.StartRun(ctx, &realmv1.StartRunRequest{WorkflowId: "sec"})
	if err != nil {
		t.Fatal(err)
	}
	id := started.GetReply().GetRunId()
	if err := poll("the step to run on the runner", 20*time.Second, func() bool {
		st, err := eng.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: id})
		return err == nil && st.GetState().GetTerminalState()
	}); err != nil {
		t.Fatal(err)
	}
	st, _ := eng.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: id})
	if !strings.Contains(st.GetState().String(), "total") || st.GetState().GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
		t.Fatalf("run over mutual TLS: %v", st.GetState())
	}
}

// Without TLS files a service serves plaintext on loopback only, and says so.
func TestSecurityPlaintextOnlyOnLoopback(t *testing.T) {
	t.Parallel()
	bins := buildBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, args := range [][]string{{bins.engine, "--data-dir", t.TempDir()}, {bins.agent}} {
		bin := args[0]
		cmd := exec.CommandContext(ctx, bin, append([]string{"--addr", "0.0.0.0:0"}, args[1:]...)...)
		cmd.Env = noRedisEnv()
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "refusing to serve without TLS on 0.0.0.0:0") {
			t.Errorf("%s on 0.0.0.0 without TLS: %v\n%s", filepath.Base(bin), err, out)
		}
	}
}
