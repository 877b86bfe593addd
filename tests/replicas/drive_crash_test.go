package replicas

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// draftStep is an agent step that drafts a reply to run.params.ticket,
// which a person confirms at its gate (send or discard).
const draftStep = `  draft:
    description: Draft the reply.
    execution: agent
    prompt: "Draft a reply to ticket {{ run.params.ticket }}."
    trust: human_confirmed
    gate:
      choices: [send, discard]
    input_schema:
      type: object
      required: [reply]
      properties:
        reply: { type: string }
`

const supportWorkflow = `id: support
name: Support reply
version: 1
steps:
` + draftStep + `  send:
    description: Send the reply.
    execution: auto
    depends_on: [draft]
    when: "draft.choice == 'send'"
`

// chatStub is an OpenAI Chat Completions service that answers every
// request with a reply draft and counts the requests.
func chatStub(t *testing.T) (*httptest.Server, *atomic.Int64) { return chatStubWith(t, 0) }

// chatStubWith is chatStub taking up to latency (at random) to answer.
func chatStubWith(t *testing.T, latency time.Duration) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		calls.Add(1)
		if latency > 0 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(rand.N(latency)):
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "logprobs": nil,
				"message": map[string]any{"role": "assistant", "content": `{"reply":"We have refunded the charge."}`, "refusal": nil}}},
			"usage": map[string]any{"prompt_tokens": 40, "completion_tokens": 7, "total_tokens": 47},
		})
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// TestAnOwedDriveSurvivesAKilledAgentSvc: two agent-svc processes share
// Redis; one takes a detached drive and is killed (SIGKILL, no shutdown)
// while the run waits at its gate; the gate is answered; once the dead
// process's lease lapses the other takes the drive up and completes the
// run, with no operator command and no model request made twice.
func TestAnOwedDriveSurvivesAKilledAgentSvc(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := redisURL()
	prefix := isolatedPrefix(t, url)
	bins := buildBinaries(t)
	engineAddr := freeAddr(t)
	if _, err := startEngine(bins, "engine-svc", engineAddr, url, prefix, time.Minute, t); err != nil {
		t.Fatal(err)
	}
	eng, conn, err := client.DialEngine(ctx, engineAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if r, err := eng.RegisterWorkflow(ctx, &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: []byte(supportWorkflow), Path: "support.yaml"}}); err != nil || !r.GetRegistered() {
		t.Fatalf("register: %v %v", err, r.GetReport().GetText())
	}
	stub, calls := chatStub(t)
	env := append(os.Environ(), "OPENAI_API_KEY=test-key", "OPENAI_BASE_URL="+stub.URL)
	agentArgs := func(addr string) []string {
		return []string{"--addr", addr, "--engine-addr", engineAddr, "--redis-url", url, "--redis-prefix", prefix + ":agent",
			"--drive-lease", "1s", "--pickup-interval", "100ms", "--gate-poll", "50ms", "--shutdown-grace", "1s"}
	}
	var agents []*proc
	var addrs []string
	for i := range 2 {
		addr := freeAddr(t)
		p, err := startEnv(t, fmt.Sprintf("agent-svc %d", i+1), bins.agent, env, agentArgs(addr)...)
		if err != nil {
			t.Fatal(err)
		}
		if err := awaitEngine(p, p.name, addr); err != nil {
			t.Fatal(err)
		}
		agents, addrs = append(agents, p), append(addrs, addr)
	}
	ac, err := grpc.NewClient(addrs[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	ps, _ := structpb.NewStruct(map[string]any{"ticket": 3})
	stream, err := realmv1.NewAgentServiceClient(ac).DriveRun(ctx, &realmv1.DriveRunRequest{WorkflowId: "support", Params: ps,
		Options: &realmv1.DriveOptions{Provider: "openai", Model: "gpt-test"}, Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	var gate *realmv1.DriveEvent
	for gate == nil {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("the drive ended before its gate: %v", err)
		}
		if ev := resp.GetEvent(); ev.GetKind() == realmv1.DriveEventKind_DRIVE_EVENT_KIND_GATE_OPENED {
			gate = ev
		}
	}
	agents[0].kill() // SIGKILL: its lease is neither renewed nor given back
	run := gate.GetRunId()
	if _, err := eng.SubmitHumanResponse(ctx, &realmv1.SubmitHumanResponseRequest{RunId: run, GateId: gate.GetGate().GetGateId(), Choice: "send"}); err != nil {
		t.Fatal(err)
	}
	var phase realmv1.RunPhase
	err = poll("the run to be completed by the other agent-svc", 30*time.Second, func() bool {
		st, err := eng.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: run})
		phase = st.GetState().GetRunPhase()
		return err == nil && phase == realmv1.RunPhase_RUN_PHASE_COMPLETED
	})
	if err != nil {
		t.Fatalf("%v (phase %v)", err, phase)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("model requests = %d, want 1: the taken-up drive asked again for recorded work", n)
	}
}
