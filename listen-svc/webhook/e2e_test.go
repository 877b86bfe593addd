package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/realm-go/realm/listen-svc/webhook"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/metrics"
)

var (
	buildOnce sync.Once
	agentBin  string
	buildErr  error
	buildOut  []byte
)

// agentSvcBinary builds agent-svc once per test binary: the listener talks
// to the real service over gRPC, as in the stack.
func agentSvcBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "listen-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		agentBin = filepath.Join(dir, "agent-svc")
		cmd := exec.Command("go", "build", "-o", agentBin, "github.com/realm-go/realm/agent-svc/cmd/agent-svc")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("build agent-svc: %v\n%s", buildErr, buildOut)
	}
	return agentBin
}

// anthropicStub answers every model request with {"answer": "42"} through
// the Messages API's tool_use shape.
func anthropicStub(t testing.TB) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
			"content":     []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "__realm_submit__", "input": map[string]any{"answer": "42"}}},
			"stop_reason": "tool_use", "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": 40, "output_tokens": 7},
		})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startAgentSvc runs agent-svc against engineAddr with the stub provider.
func startAgentSvc(t testing.TB, engineAddr string) realmv1.AgentServiceClient {
	t.Helper()
	addr := freeAddr(t)
	startAgentSvcAt(t, engineAddr, addr)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return realmv1.NewAgentServiceClient(conn)
}

// startAgentSvcAt runs agent-svc on addr and returns once it listens.
func startAgentSvcAt(t testing.TB, engineAddr, addr string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(agentSvcBinary(t), "--addr", addr, "--engine-addr", engineAddr, "--gate-poll", "50ms")
	cmd.Env = append(os.Environ(), "ANTHROPIC_API_KEY=test-key", "ANTHROPIC_BASE_URL="+anthropicStub(t), "OPENAI_API_KEY=")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent-svc did not listen on %s:\n%s", addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAnAcceptedDeliveryIsDrivenToItsEndByAgentSvc(t *testing.T) {
	t.Parallel()
	engineAddr, eng := startEngineAddr(t)
	d := register(t, eng, "tickets")
	table, problems := webhook.Build([]webhook.Declared{d}, getenv, true)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	agent := webhook.NewAgent(startAgentSvc(t, engineAddr),
		&realmv1.DriveOptions{Provider: "anthropic", Model: "claude-test"}, nil)
	var transcript syncWriter
	transcript.b = &bytes.Buffer{}
	agent.Transcript = &transcript
	t.Cleanup(agent.Close)
	var logs bytes.Buffer
	srv := webhook.New(webhook.Options{Catalog: webhook.Static{T: table}, Engine: eng, Dispatcher: agent,
		Log: webhook.NewLogger(&syncWriter{b: &logs}, &syncWriter{b: &logs}, webhook.LevelInfo)})
	url := httptestServer(t, webhook.Routes(srv, metrics.NewRegistry()))

	del := signed("shared_secret", "4242", time.Now())
	status, body := postTo(t, url+del.path, del.body, del.headers)
	if status != http.StatusAccepted {
		t.Fatalf("got %d %s", status, body)
	}
	var rep struct {
		RunID string `json:"run_id"`
	}
	_ = json.Unmarshal([]byte(body), &rep)
	agent.Wait() // the drive's stream ends with the run
	st, err := eng.GetRunState(ctx(t), &realmv1.GetRunStateRequest{RunId: rep.RunID})
	if err != nil {
		t.Fatal(err)
	}
	if ph := st.GetState().GetRunPhase(); ph != realmv1.RunPhase_RUN_PHASE_COMPLETED {
		t.Fatalf("run phase %v, want completed\ntranscript:\n%s", ph, transcript.b)
	}
	resp, err := eng.ListRuns(ctx(t), &realmv1.ListRunsRequest{WorkflowId: "tickets"})
	if err != nil || len(resp.GetRuns()) != 1 {
		t.Fatalf("runs: %v %v", resp.GetRuns(), err)
	}
	wantLog := `webhook: dispatched {"path":"/shared","run_id":"` + rep.RunID + `","pid":null}`
	if !strings.Contains(logs.String(), wantLog) {
		t.Errorf("log lacks %s:\n%s", wantLog, logs.String())
	}
	if !strings.Contains(transcript.b.String(), rep.RunID) {
		t.Errorf("the drive's transcript does not name the run:\n%s", transcript.b)
	}
	// The probe and metrics routes answer beside the webhook paths.
	for path, want := range map[string]string{
		"/healthz": "ok",
		"/metrics": `realm_http_requests_total{code="202",handler="webhook",method="post"} 1`,
	} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d, body lacks %q", path, resp.StatusCode, want)
		}
	}
}

func startEngineAddr(t testing.TB) (string, realmv1.EngineServiceClient) {
	t.Helper()
	addr := engineStart(t)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return addr, realmv1.NewEngineServiceClient(conn)
}

// triggerFiller fills WorkflowSummary.trigger from the definitions a test
// registered when the engine leaves it unset, so the catalog's own logic is
// tested whether or not engine-svc fills the field yet. Once it does, the
// filler changes nothing.
type triggerFiller struct {
	realmv1.EngineServiceClient
	blocks map[string]map[string]any
}

func (f triggerFiller) ListWorkflows(ctx context.Context, in *realmv1.ListWorkflowsRequest, opts ...grpc.CallOption) (*realmv1.ListWorkflowsResponse, error) {
	resp, err := f.EngineServiceClient.ListWorkflows(ctx, in, opts...)
	for _, w := range resp.GetWorkflows() {
		if b := f.blocks[w.GetId()]; w.GetTrigger() == nil && b != nil {
			w.Trigger, _ = structpb.NewStruct(b)
		}
	}
	return resp, err
}

func TestAWorkflowRegisteredLaterIsServedWithoutARestart(t *testing.T) {
	t.Parallel()
	eng := dialEngine(t)
	blocks := map[string]map[string]any{}
	for _, n := range testWorkflows {
		blocks[declare(t, n).WorkflowID] = declare(t, n).Block
	}
	var logs bytes.Buffer
	log := webhook.NewLogger(&syncWriter{b: &logs}, &syncWriter{b: &logs}, webhook.LevelInfo)
	cat := webhook.NewEngineCatalog(triggerFiller{eng, blocks}, getenv, log)
	cat.MinRefresh = 0
	cat.Loopback = true // httptest serves on 127.0.0.1
	if err := cat.Refresh(ctx(t)); err != nil {
		t.Fatal(err)
	}
	disp := &fakeDispatcher{}
	url := httptestServer(t, webhook.New(webhook.Options{Catalog: cat, Engine: eng, Dispatcher: disp, Log: log}))
	if status, _ := postTo(t, url+"/open", `{}`, nil); status != http.StatusForbidden {
		t.Fatalf("before registration: %d, want 403", status)
	}
	register(t, eng, "open")
	status, body := postTo(t, url+"/open", `{}`, nil)
	if status != http.StatusAccepted {
		t.Fatalf("after registration: %d %s, want 202", status, body)
	}
	if len(disp.handed()) != 1 {
		t.Fatalf("handed %v", disp.handed())
	}
	want := "listen: workflow 'open' uses auth.mode 'none' — webhook verification is DISABLED for path '/open'. Use only on a trusted network.\n" +
		`listen: mounted {"workflow":"open","path":"/open","mode":"none"}` + "\n"
	if !strings.Contains(logs.String(), want) {
		t.Errorf("mount log:\n%s\nwant:\n%s", logs.String(), want)
	}
}
