package server_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

func TestBatchChecksEveryItemFirstAndRunsNoStep(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, readFile(t, "testdata/triage.yaml"))
		item := func(p map[string]any, key string) *realmv1.BatchItem {
			return &realmv1.BatchItem{Params: params(t, p), IdempotencyKey: key}
		}
		bad, err := e.client.StartRunBatch(ctx(t), &realmv1.StartRunBatchRequest{WorkflowId: "triage",
			Items: []*realmv1.BatchItem{item(map[string]any{"ticket": 1}, ""), item(map[string]any{"ticket": "x"}, "")}})
		if err != nil {
			t.Fatal(err)
		}
		f := bad.GetRefusal().GetErrorDetails().AsMap()["failures"].([]any)[0].(map[string]any)
		if bad.GetRefusal().GetErrorCode() != "VALIDATION_BATCH_ITEMS" || f["index"] != 1.0 || f["reason"] != "/ticket must be integer" {
			t.Fatalf("refusal = %v", bad.GetRefusal())
		}
		max := int32(1)
		big, _ := e.client.StartRunBatch(ctx(t), &realmv1.StartRunBatchRequest{WorkflowId: "triage", MaxItems: &max,
			Items: []*realmv1.BatchItem{item(map[string]any{"ticket": 1}, ""), item(map[string]any{"ticket": 2}, "")}})
		if d := big.GetRefusal().GetErrorDetails().AsMap(); big.GetRefusal().GetErrorCode() != "VALIDATION_BATCH_TOO_LARGE" || d["count"] != 2.0 || d["max_items"] != 1.0 {
			t.Fatalf("too large = %v", big.GetRefusal())
		}
		runs, _ := e.client.ListRuns(ctx(t), &realmv1.ListRunsRequest{})
		if len(runs.GetRuns()) != 0 {
			t.Fatalf("refused batches created runs: %v", runs)
		}

		ok, err := e.client.StartRunBatch(ctx(t), &realmv1.StartRunBatchRequest{WorkflowId: "triage", ParentRunId: "parent-1",
			Items: []*realmv1.BatchItem{item(map[string]any{"ticket": 201}, "ticket-201"), item(map[string]any{"ticket": 202}, "")}})
		if err != nil || len(ok.GetStarted()) != 2 || len(ok.GetFailed()) != 0 {
			t.Fatalf("batch = %v %v", ok, err)
		}
		first := ok.GetStarted()[0]
		if first.GetContextHint() != fmt.Sprintf("Run '%s' created for workflow 'triage'. Ready for the agent: 'classify'.", first.GetRunId()) ||
			first.GetIdempotencyKey() != "ticket-201" || first.GetDeduped() {
			t.Errorf("first = %v", first)
		}
		again, _ := e.client.StartRunBatch(ctx(t), &realmv1.StartRunBatchRequest{WorkflowId: "triage",
			Items: []*realmv1.BatchItem{item(map[string]any{"ticket": 201}, "ticket-201")}})
		if s := again.GetStarted()[0]; !s.GetDeduped() || s.GetRunId() != first.GetRunId() ||
			strings.Join(s.GetWarnings(), "") != "Idempotency key matched a run still in phase 'running'." {
			t.Errorf("repeat = %v", s)
		}
	})
}

func TestConcurrentStartsWithOneKeyMakeOneRun(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		e.register(t, readFile(t, "testdata/triage.yaml"))
		ids := make(chan string, 20)
		for range 20 {
			go func() {
				resp, err := e.client.StartRun(ctx(t), &realmv1.StartRunRequest{WorkflowId: "triage", Params: params(t, map[string]any{"ticket": 9}), IdempotencyKey: "same"})
				if err != nil {
					ids <- "error: " + err.Error()
					return
				}
				ids <- resp.GetReply().GetRunId()
			}()
		}
		seen := map[string]int{}
		for range 20 {
			seen[<-ids]++
		}
		if len(seen) != 1 {
			t.Fatalf("20 starts with one key named %d runs: %v", len(seen), seen)
		}
	})
}

func TestCreateWorkflowMintsAnIdAndStartsARun(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		steps, _ := structpb.NewList([]any{
			map[string]any{"id": "collect", "description": "Collect the merged changes."},
			map[string]any{"id": "write", "description": "Write the notes.", "depends_on": []any{"collect"}, "handler": "x"},
		})
		meta, _ := structpb.NewStruct(map[string]any{"name": "Release notes"})
		call := func() *realmv1.Reply {
			resp, err := e.client.CreateWorkflow(ctx(t), &realmv1.CreateWorkflowRequest{Steps: steps, Metadata: meta})
			if err != nil {
				t.Fatal(err)
			}
			return resp.GetReply()
		}
		r := call()
		id := r.GetData().AsMap()["workflow_id"].(string)
		if !strings.HasPrefix(id, "release-notes-") || len(id) != len("release-notes-")+16 ||
			r.GetContextHint() != fmt.Sprintf("Run '%s' created for workflow '%s'. Ready for the agent: 'collect'.", r.GetRunId(), id) ||
			r.GetCommand() != "create_workflow" || r.GetWarnings()[0] != "⚠ step 'write': unknown key 'handler' — ignored (not a recognized step field)." {
			t.Fatalf("reply = %v", r)
		}
		if again := call(); again.GetData().AsMap()["workflow_id"] != id || again.GetRunId() == r.GetRunId() {
			t.Errorf("same plan: %v", again)
		}
		dup, _ := structpb.NewList([]any{map[string]any{"id": "a", "description": "A."}, map[string]any{"id": "a", "description": "B."}})
		resp, err := e.client.CreateWorkflow(ctx(t), &realmv1.CreateWorkflowRequest{Steps: dup})
		if err != nil || resp.GetReply().GetErrors()[0] != "Duplicate step id: 'a'" || resp.GetReply().GetRunId() != "" {
			t.Errorf("duplicate = %v %v", resp, err)
		}
	})
}
