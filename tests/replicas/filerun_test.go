package replicas

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// fileRunYAML is a workflow file run without registering it.
const fileRunYAML = `id: filerun
name: File run
version: 2
steps:
  draft:
    description: Draft.
    execution: agent
  review:
    description: Review.
    execution: agent
    depends_on: [draft]
`

// fileRunRegistered is another definition under the same id, registered
// while the file's run is under way.
const fileRunRegistered = `id: filerun
name: File run
version: 1
steps:
  answer:
    description: Answer.
    execution: agent
`

// Two engine-svc processes on one Redis agree on the definition a run
// started from a file without registering carries: the other process
// reads it from the run's record, and registering the id there (with
// other steps) changes nothing for the run.
func TestEngineProcessesAgreeOnARunsCarriedDefinition(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bins := buildBinaries(t)
	url := redisURL()
	prefix := isolatedPrefix(t, url)
	addrA, addrB := freeAddr(t), freeAddr(t)
	if _, err := startEngine(bins, "engine-svc A", addrA, url, prefix, claimWindow, t); err != nil {
		t.Fatal(err)
	}
	if _, err := startEngine(bins, "engine-svc B", addrB, url, prefix, claimWindow, t); err != nil {
		t.Fatal(err)
	}
	a, connA, err := client.DialEngine(ctx, addrA)
	if err != nil {
		t.Fatal(err)
	}
	defer connA.Close()
	b, connB, err := client.DialEngine(ctx, addrB)
	if err != nil {
		t.Fatal(err)
	}
	defer connB.Close()

	started, err := a.StartRun(ctx, &realmv1.StartRunRequest{WorkflowSource: &realmv1.WorkflowSource{Yaml: []byte(fileRunYAML), Path: "workflow.yaml"}})
	if err != nil || started.GetReply().GetRunId() == "" {
		t.Fatalf("start from a file on A: %v %v", started, err)
	}
	run := started.GetReply().GetRunId()
	if r, err := b.RegisterWorkflow(ctx, &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: []byte(fileRunRegistered), Path: "other.yaml"}}); err != nil || !r.GetRegistered() {
		t.Fatalf("register on B: %v %v", r, err)
	}
	p, err := b.GetWorkflowProtocol(ctx, &realmv1.GetWorkflowProtocolRequest{RunId: run})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range p.GetProtocol().AsMap()["steps"].([]any) {
		ids = append(ids, s.(map[string]any)["id"].(string))
	}
	if strings.Join(ids, ",") != "draft,review" {
		t.Fatalf("B's steps for the run = %v, want the file's draft,review", ids)
	}
	for _, s := range []struct {
		eng  realmv1.EngineServiceClient
		step string
	}{{b, "draft"}, {a, "review"}} {
		resp, err := s.eng.ExecuteStep(ctx, &realmv1.ExecuteStepRequest{RunId: run, Command: s.step, Params: &structpb.Struct{}})
		if err != nil || resp.GetReply().GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK {
			t.Fatalf("%s: %v %v", s.step, resp, err)
		}
	}
	exp, err := b.ExportRun(ctx, &realmv1.ExportRunRequest{RunId: run})
	if err != nil {
		t.Fatal(err)
	}
	var bundle struct {
		Run struct {
			Phase    string           `json:"run_phase"`
			Evidence []map[string]any `json:"evidence"`
		} `json:"run"`
	}
	if err := json.Unmarshal(exp.GetBundle(), &bundle); err != nil {
		t.Fatal(err)
	}
	ev := bundle.Run.Evidence
	if bundle.Run.Phase != "completed" || len(ev) != 2 || ev[0]["definition_hash"] == nil || ev[0]["definition_hash"] != ev[1]["definition_hash"] || ev[1]["definition_version"] != float64(2) {
		t.Errorf("run %s: phase %s, evidence %v; want completed, both steps decided by the carried v2", run, bundle.Run.Phase, ev)
	}
}
