// Package server is engine-svc's gRPC face: it checks a request's shape,
// calls the engine, and maps errors to gRPC status through the error
// catalogue (the code travels in status details, never in the message).
package server

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/realm-go/realm/engine-svc/internal/engine"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/mtls"
)

// Server implements realmv1.EngineServiceServer.
type Server struct {
	realmv1.UnimplementedEngineServiceServer
	e *engine.Engine
}

// New returns a Server over an engine.
func New(e *engine.Engine) *Server { return &Server{e: e} }

// streamWorkers is how many goroutines engine-svc's gRPC server keeps to
// run calls. A call on a goroutine of its own starts on a small stack and
// grows it (runtime.morestack) on every call, which cost about 5% of a
// transition's CPU; a kept worker's stack is already grown. More calls at
// once than workers each get a goroutine of their own, as without them.
const streamWorkers = 64

// GRPCOptions are the options engine-svc's gRPC server is built with,
// besides metrics, tracing and credentials (the benchmarks use them too).
func GRPCOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.NumStreamWorkers(streamWorkers)}
}

// grpcErr maps an engine error to a gRPC status error.
func grpcErr(err error) error {
	if err == nil {
		return nil
	}
	if ce, ok := errcode.As(err); ok && ce.Code == errcode.EngineStoreFailed {
		// A copy: the advice is for the caller, not the engine's own log.
		advised := *ce
		advised.Message = ce.Error() + engine.StoreRetryAdvice
		err = &advised
	}
	return errcode.ToStatus(err).Err()
}

func required(name, v string) error {
	if v == "" {
		return status.Errorf(codes.InvalidArgument, "%s is required", name)
	}
	return nil
}

func (s *Server) ValidateWorkflow(ctx context.Context, req *realmv1.ValidateWorkflowRequest) (*realmv1.ValidateWorkflowResponse, error) {
	resp, err := s.e.ValidateWorkflow(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) RegisterWorkflow(ctx context.Context, req *realmv1.RegisterWorkflowRequest) (*realmv1.RegisterWorkflowResponse, error) {
	resp, err := s.e.RegisterWorkflow(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) ListWorkflows(ctx context.Context, req *realmv1.ListWorkflowsRequest) (*realmv1.ListWorkflowsResponse, error) {
	resp, err := s.e.ListWorkflows(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) GetWorkflowProtocol(ctx context.Context, req *realmv1.GetWorkflowProtocolRequest) (*realmv1.GetWorkflowProtocolResponse, error) {
	if req.GetRunId() == "" {
		if err := required("workflow_id", req.GetWorkflowId()); err != nil {
			return nil, err
		}
	}
	resp, err := s.e.GetWorkflowProtocol(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) StartRun(ctx context.Context, req *realmv1.StartRunRequest) (*realmv1.StartRunResponse, error) {
	if err := startRunTarget(req); err != nil {
		return nil, err
	}
	if err := engine.WithinSize("The run's params", req.GetParams(), engine.MaxValueBytes); err != nil {
		return nil, grpcErr(err)
	}
	// A carried definition is stored with the run and read on every act on
	// it: it is bounded like any other value a run keeps.
	if src := req.GetWorkflowSource(); src != nil {
		if err := engine.WithinSize("The workflow source", src, engine.MaxValueBytes); err != nil {
			return nil, grpcErr(err)
		}
	}
	r, rep, err := s.e.StartRun(ctx, req)
	if err != nil {
		return nil, grpcErr(err)
	}
	resp := &realmv1.StartRunResponse{Reply: r}
	if rep != nil {
		resp.Report = engine.ReportProto(rep)
	}
	return resp, nil
}

// startRunTarget checks start_run names exactly one of a workflow id and
// a workflow source.
func startRunTarget(req *realmv1.StartRunRequest) error {
	switch {
	case req.GetWorkflowSource() != nil && req.GetWorkflowId() != "":
		return status.Error(codes.InvalidArgument, "give workflow_id or workflow_source, not both: a run started from a source carries its own definition, and workflow_id would be ignored")
	case req.GetWorkflowSource() != nil:
		return nil
	}
	return required("workflow_id", req.GetWorkflowId())
}

func (s *Server) ExecuteStep(ctx context.Context, req *realmv1.ExecuteStepRequest) (*realmv1.ExecuteStepResponse, error) {
	if err := required("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	if err := required("command", req.GetCommand()); err != nil {
		return nil, err
	}
	if err := engine.WithinSize("The step's params", req.GetParams(), engine.MaxValueBytes); err != nil {
		return nil, grpcErr(err)
	}
	if err := engine.WithinLength("The step's params", req.GetParamsJson(), engine.MaxValueBytes); err != nil {
		return nil, grpcErr(err)
	}
	r, err := s.e.ExecuteStep(ctx, req)
	if err != nil {
		return nil, grpcErr(err)
	}
	return &realmv1.ExecuteStepResponse{Reply: r}, nil
}

func (s *Server) AdvanceRun(ctx context.Context, req *realmv1.AdvanceRunRequest) (*realmv1.AdvanceRunResponse, error) {
	if err := required("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	r, err := s.e.AdvanceRun(ctx, req)
	if err != nil {
		return nil, grpcErr(err)
	}
	return &realmv1.AdvanceRunResponse{Reply: r}, nil
}

func (s *Server) GetRunState(ctx context.Context, req *realmv1.GetRunStateRequest) (*realmv1.GetRunStateResponse, error) {
	if err := required("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	resp, err := s.e.GetRunState(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) AbandonRun(ctx context.Context, req *realmv1.AbandonRunRequest) (*realmv1.AbandonRunResponse, error) {
	if err := required("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	resp, err := s.e.AbandonRun(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) ListRuns(ctx context.Context, req *realmv1.ListRunsRequest) (*realmv1.ListRunsResponse, error) {
	if req.GetOpenGates() {
		if req.GetStuck() {
			return nil, status.Error(codes.InvalidArgument, "open_gates and stuck read different indexes; ask for one")
		}
		if p := req.GetPhase(); p != realmv1.RunPhase_RUN_PHASE_UNSPECIFIED && p != realmv1.RunPhase_RUN_PHASE_GATE_WAITING {
			return nil, status.Errorf(codes.InvalidArgument, "open_gates lists runs at a gate (phase gate_waiting), not phase %s", p)
		}
	}
	resp, err := s.e.ListRuns(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) SubmitHumanResponse(ctx context.Context, req *realmv1.SubmitHumanResponseRequest) (*realmv1.SubmitHumanResponseResponse, error) {
	if err := required("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	if err := required("gate_id", req.GetGateId()); err != nil {
		return nil, err
	}
	if err := required("choice", req.GetChoice()); err != nil {
		return nil, err
	}
	if err := engine.WithinLength("The choice", req.GetChoice(), engine.MaxLabelBytes); err != nil {
		return nil, grpcErr(err)
	}
	if err := engine.WithinLength("responded_by", req.GetRespondedBy(), engine.MaxLabelBytes); err != nil {
		return nil, grpcErr(err)
	}
	vouchedBy, err := voucher(ctx, req)
	if err != nil {
		return nil, err
	}
	r, err := s.e.SubmitVouchedResponse(ctx, req, vouchedBy)
	if err != nil {
		return nil, grpcErr(err)
	}
	return &realmv1.SubmitHumanResponseResponse{Reply: r}, nil
}

func (s *Server) StartRunBatch(ctx context.Context, req *realmv1.StartRunBatchRequest) (*realmv1.StartRunBatchResponse, error) {
	if err := required("workflow_id", req.GetWorkflowId()); err != nil {
		return nil, err
	}
	for i, item := range req.GetItems() {
		if err := engine.WithinSize(fmt.Sprintf("The params of item %d", i), item.GetParams(), engine.MaxValueBytes); err != nil {
			return nil, grpcErr(err)
		}
	}
	resp, err := s.e.StartRunBatch(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) CreateWorkflow(ctx context.Context, req *realmv1.CreateWorkflowRequest) (*realmv1.CreateWorkflowResponse, error) {
	if req.GetSteps() == nil {
		return nil, status.Error(codes.InvalidArgument, "steps is required")
	}
	r, err := s.e.CreateWorkflow(ctx, req)
	if err != nil {
		return nil, grpcErr(err)
	}
	return &realmv1.CreateWorkflowResponse{Reply: r}, nil
}

func (s *Server) AppendTrace(ctx context.Context, req *realmv1.AppendTraceRequest) (*realmv1.AppendTraceResponse, error) {
	if err := required("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	if err := required("step_id", req.GetStepId()); err != nil {
		return nil, err
	}
	resp, err := s.e.AppendTrace(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) DrainRun(ctx context.Context, req *realmv1.DrainRunRequest) (*realmv1.DrainRunResponse, error) {
	if err := required("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	resp, err := s.e.DrainRun(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) ResumeRun(ctx context.Context, req *realmv1.ResumeRunRequest) (*realmv1.ResumeRunResponse, error) {
	if err := required("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	if err := required("from_step", req.GetFromStep()); err != nil {
		return nil, err
	}
	resp, err := s.e.ResumeRun(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) PurgeRun(ctx context.Context, req *realmv1.PurgeRunRequest) (*realmv1.PurgeRunResponse, error) {
	if err := required("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	resp, err := s.e.PurgeRun(ctx, req)
	return resp, grpcErr(err)
}

// DrainRuns streams drain --all / --expired (operator-only: not in
// frontDoor).
func (s *Server) DrainRuns(req *realmv1.DrainRunsRequest, stream grpc.ServerStreamingServer[realmv1.DrainRunsResponse]) error {
	if err := pageSize(req.GetPageSize()); err != nil {
		return err
	}
	return grpcErr(s.e.DrainRuns(stream.Context(), req, func(ev *realmv1.OperatorEvent) error {
		return stream.Send(&realmv1.DrainRunsResponse{Event: ev})
	}))
}

// PurgeRuns streams purge --older-than (operator-only: not in frontDoor).
func (s *Server) PurgeRuns(req *realmv1.PurgeRunsRequest, stream grpc.ServerStreamingServer[realmv1.PurgeRunsResponse]) error {
	if req.GetOlderThanSeconds() <= 0 {
		return status.Error(codes.InvalidArgument, "older_than_seconds must be positive: purge selects ended runs idle at least that long")
	}
	if err := pageSize(req.GetPageSize()); err != nil {
		return err
	}
	return grpcErr(s.e.PurgeRuns(stream.Context(), req, func(ev *realmv1.OperatorEvent) error {
		return stream.Send(&realmv1.PurgeRunsResponse{Event: ev})
	}))
}

// pageSize refuses a negative page or one past engine.MaxPage.
func pageSize(n int32) error {
	if n < 0 || n > engine.MaxPage {
		return status.Errorf(codes.InvalidArgument, "page_size must be between 0 (the default) and %d, not %d", engine.MaxPage, n)
	}
	return nil
}

func (s *Server) ExportRun(ctx context.Context, req *realmv1.ExportRunRequest) (*realmv1.ExportRunResponse, error) {
	if err := required("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	if id, ok := mtls.FromContext(ctx); ok && req.GetWithSecrets() && id.Role != mtls.RoleOperator {
		// The claim tokens would let a front door settle steps it did not claim.
		return nil, mtls.Refuse("engine-svc refused EngineService.ExportRun with secrets from %s: role %s may export a run only without its tokens; with_secrets needs role operator. Nothing was exported.", id.Name, id.Role)
	}
	resp, err := s.e.ExportRun(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) InspectRun(ctx context.Context, req *realmv1.InspectRunRequest) (*realmv1.InspectRunResponse, error) {
	if err := required("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	resp, err := s.e.InspectRun(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) ReclaimRun(ctx context.Context, req *realmv1.ReclaimRunRequest) (*realmv1.ReclaimRunResponse, error) {
	if err := required("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	resp, err := s.e.ReclaimRun(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) ClaimStep(ctx context.Context, req *realmv1.ClaimStepRequest) (*realmv1.ClaimStepResponse, error) {
	if err := required("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	if err := required("step", req.GetStep()); err != nil {
		return nil, err
	}
	resp, err := s.e.ClaimStep(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) ReleaseClaim(ctx context.Context, req *realmv1.ReleaseClaimRequest) (*realmv1.ReleaseClaimResponse, error) {
	for _, f := range [][2]string{{"run_id", req.GetRunId()}, {"step", req.GetStep()}, {"claim_token", req.GetClaimToken()}} {
		if err := required(f[0], f[1]); err != nil {
			return nil, err
		}
	}
	resp, err := s.e.ReleaseClaim(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) RecordDriveFailure(ctx context.Context, req *realmv1.RecordDriveFailureRequest) (*realmv1.RecordDriveFailureResponse, error) {
	if err := required("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	if req.GetFailure() == nil {
		return nil, status.Error(codes.InvalidArgument, "failure is required")
	}
	resp, err := s.e.RecordDriveFailure(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) SealSpawnFailure(ctx context.Context, req *realmv1.SealSpawnFailureRequest) (*realmv1.SealSpawnFailureResponse, error) {
	if err := required("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	resp, err := s.e.SealSpawnFailure(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) GcRuns(ctx context.Context, req *realmv1.GcRunsRequest) (*realmv1.GcRunsResponse, error) {
	if !req.GetSweep() && !req.GetHeal() {
		return nil, status.Error(codes.InvalidArgument, "sweep or heal is required")
	}
	if err := pageSize(req.GetPageSize()); err != nil {
		return nil, err
	}
	if req.GetSweep() && req.GetOlderThanSeconds() < int64(engine.GcFloor.Seconds()) {
		return nil, status.Errorf(codes.InvalidArgument, "older_than_seconds must be at least %d: gc refuses to reap crash residue younger than that", int64(engine.GcFloor.Seconds()))
	}
	resp, err := s.e.GcRuns(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) ReconcileKeys(ctx context.Context, req *realmv1.ReconcileKeysRequest) (*realmv1.ReconcileKeysResponse, error) {
	resp, err := s.e.ReconcileKeys(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) StampSeals(ctx context.Context, req *realmv1.StampSealsRequest) (*realmv1.StampSealsResponse, error) {
	resp, err := s.e.StampSeals(ctx, req)
	return resp, grpcErr(err)
}

func (s *Server) MigrateWorkflows(ctx context.Context, req *realmv1.MigrateWorkflowsRequest) (*realmv1.MigrateWorkflowsResponse, error) {
	resp, err := s.e.MigrateWorkflows(ctx, req)
	return resp, grpcErr(err)
}
