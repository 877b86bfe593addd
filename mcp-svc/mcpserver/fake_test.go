package mcpserver

import (
	"context"
	"encoding/json"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// fakeEngine is an in-process EngineServiceClient: it keeps the last
// request and answers err if set, else a canned reply. The tools' mapping
// is what these tests check, not the engine.
type fakeEngine struct {
	realmv1.EngineServiceClient // nil: an RPC no tool makes would panic

	mu   sync.Mutex
	last proto.Message
	err  error
}

func (f *fakeEngine) got(m proto.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = m
	return f.err
}

func (f *fakeEngine) request() proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func okReply(command string) *realmv1.Reply {
	v := int64(0)
	return &realmv1.Reply{Command: command, RunId: "r1", RunVersion: &v, Status: realmv1.ReplyStatus_REPLY_STATUS_OK, ContextHint: "<hint>"}
}

func (f *fakeEngine) ListWorkflows(_ context.Context, r *realmv1.ListWorkflowsRequest, _ ...grpc.CallOption) (*realmv1.ListWorkflowsResponse, error) {
	return &realmv1.ListWorkflowsResponse{Status: "ok", Workflows: []*realmv1.WorkflowSummary{{Id: "triage", Name: "Triage", Version: 1}}, Hint: "h"}, f.got(r)
}

func (f *fakeEngine) GetWorkflowProtocol(_ context.Context, r *realmv1.GetWorkflowProtocolRequest, _ ...grpc.CallOption) (*realmv1.GetWorkflowProtocolResponse, error) {
	p, _ := structpb.NewStruct(map[string]any{"workflow_id": r.GetWorkflowId()})
	return &realmv1.GetWorkflowProtocolResponse{Protocol: p}, f.got(r)
}

func (f *fakeEngine) CreateWorkflow(_ context.Context, r *realmv1.CreateWorkflowRequest, _ ...grpc.CallOption) (*realmv1.CreateWorkflowResponse, error) {
	return &realmv1.CreateWorkflowResponse{Reply: okReply("create_workflow")}, f.got(r)
}

func (f *fakeEngine) StartRun(_ context.Context, r *realmv1.StartRunRequest, _ ...grpc.CallOption) (*realmv1.StartRunResponse, error) {
	return &realmv1.StartRunResponse{Reply: okReply("start_run")}, f.got(r)
}

func (f *fakeEngine) StartRunBatch(_ context.Context, r *realmv1.StartRunBatchRequest, _ ...grpc.CallOption) (*realmv1.StartRunBatchResponse, error) {
	return &realmv1.StartRunBatchResponse{Started: []*realmv1.BatchStarted{{RunId: "r1", IdempotencyKey: "k"}}}, f.got(r)
}

func (f *fakeEngine) ExecuteStep(_ context.Context, r *realmv1.ExecuteStepRequest, _ ...grpc.CallOption) (*realmv1.ExecuteStepResponse, error) {
	return &realmv1.ExecuteStepResponse{Reply: okReply(r.GetCommand())}, f.got(r)
}

func (f *fakeEngine) SubmitHumanResponse(_ context.Context, r *realmv1.SubmitHumanResponseRequest, _ ...grpc.CallOption) (*realmv1.SubmitHumanResponseResponse, error) {
	return &realmv1.SubmitHumanResponseResponse{Reply: okReply("draft")}, f.got(r)
}

func (f *fakeEngine) AdvanceRun(_ context.Context, r *realmv1.AdvanceRunRequest, _ ...grpc.CallOption) (*realmv1.AdvanceRunResponse, error) {
	return &realmv1.AdvanceRunResponse{Reply: okReply("advance_run")}, f.got(r)
}

func (f *fakeEngine) GetRunState(_ context.Context, r *realmv1.GetRunStateRequest, _ ...grpc.CallOption) (*realmv1.GetRunStateResponse, error) {
	return &realmv1.GetRunStateResponse{State: &realmv1.RunState{RunId: r.GetRunId(), RunPhase: realmv1.RunPhase_RUN_PHASE_RUNNING}}, f.got(r)
}

func (f *fakeEngine) AbandonRun(_ context.Context, r *realmv1.AbandonRunRequest, _ ...grpc.CallOption) (*realmv1.AbandonRunResponse, error) {
	return &realmv1.AbandonRunResponse{RunId: r.GetRunId(), RunPhase: realmv1.RunPhase_RUN_PHASE_ABANDONED, TerminalState: true}, f.got(r)
}

func (f *fakeEngine) AppendTrace(_ context.Context, r *realmv1.AppendTraceRequest, _ ...grpc.CallOption) (*realmv1.AppendTraceResponse, error) {
	return &realmv1.AppendTraceResponse{Counts: &realmv1.TraceCounts{BufferCount: int32(len(r.GetEntries()))}}, f.got(r)
}

func emptyStruct() *structpb.Struct { return &structpb.Struct{Fields: map[string]*structpb.Value{}} }

func mustStruct(s string) *structpb.Struct {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		panic(err)
	}
	st, err := structpb.NewStruct(m)
	if err != nil {
		panic(err)
	}
	return st
}

func mustList(s string) *structpb.ListValue {
	var l []any
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		panic(err)
	}
	lv, err := structpb.NewList(l)
	if err != nil {
		panic(err)
	}
	return lv
}
