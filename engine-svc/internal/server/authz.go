package server

import (
	"context"
	"errors"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/realm-go/realm/engine-svc/internal/registry"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/mtls"
)

// frontDoor are the EngineService calls of the run acts: what mcp-svc,
// listen-svc and agent-svc make. The operator's verbs (resume, drain,
// purge, reclaim, gc, reconcile, stamp, migrate) are not among them.
var frontDoor = []string{
	"ValidateWorkflow", "RegisterWorkflow", "ListWorkflows", "GetWorkflowProtocol", "CreateWorkflow",
	"StartRun", "StartRunBatch", "ExecuteStep", "SubmitHumanResponse", "AdvanceRun", "GetRunState",
	"AbandonRun", "AppendTrace", "ListRuns", "InspectRun", "ExportRun", "ClaimStep", "ReleaseClaim",
	"RecordDriveFailure", "SealSpawnFailure",
}

// Policy is who may call what on engine-svc (docs/security.md, "Roles").
// A method not named is the operator's alone, so a new RPC is closed
// until someone decides otherwise.
func Policy() mtls.Policy {
	rules := map[string][]mtls.Role{
		"/realm.v1.RegistryService/Register":   {mtls.RoleRunner, mtls.RoleOperator},
		"/realm.v1.RegistryService/Renew":      {mtls.RoleRunner, mtls.RoleOperator},
		"/realm.v1.RegistryService/Deregister": {mtls.RoleRunner, mtls.RoleOperator},
		// agent-svc warns a new run of a handler no runner offers.
		"/realm.v1.RegistryService/ListCapabilities": {mtls.RoleFrontDoor, mtls.RoleOperator},
	}
	for _, m := range frontDoor {
		rules["/realm.v1.EngineService/"+m] = []mtls.Role{mtls.RoleFrontDoor, mtls.RoleOperator}
	}
	return mtls.Policy{
		Service: "engine-svc",
		Rules:   rules,
		Open:    []string{"/grpc.health.v1.Health/"},
		Describe: map[mtls.Role]string{
			mtls.RoleRunner:    "may call only the capability registry (RegistryService.Register, Renew and Deregister)",
			mtls.RoleFrontDoor: "may call only the run acts (start, execute, respond, advance, state, abandon, trace, list, inspect, export, register and create workflows) and the capability list",
			mtls.RoleEngine:    "is engine-svc's own and calls only runners",
		},
	}
}

// mayServe refuses a runner certificate's registration of a handler or
// adapter the certificate does not grant: a runner cannot take over
// another's handler and receive its steps' input. adapters are every
// adapter the registration names (in adapters or adapter_specs).
func mayServe(ctx context.Context, adapters []string, req *realmv1.RegisterRequest) error {
	id, ok := mtls.FromContext(ctx)
	if !ok || id.Role != mtls.RoleRunner {
		return nil
	}
	var refused []string
	for _, h := range req.GetHandlers() {
		if !id.May(mtls.KindHandler, h.GetName()) {
			refused = append(refused, "handler "+h.GetName())
		}
	}
	for _, a := range adapters {
		if !id.May(mtls.KindAdapter, a) {
			refused = append(refused, "adapter "+a)
		}
	}
	if len(refused) == 0 {
		return nil
	}
	grants := "none"
	if len(id.Grants) > 0 {
		grants = strings.Join(id.Grants, ", ")
	}
	return mtls.Refuse("engine-svc refused RegistryService.Register from %s: its certificate does not grant %s (it grants: %s). Nothing was registered; issue the runner a certificate whose URI SANs name them (realm:handler:<name>, realm:adapter:<name>).",
		id.Name, strings.Join(refused, ", "), grants)
}

// owns refuses a runner certificate's renewal or deregistration of a
// runner another certificate registered.
func (s *Registry) owns(ctx context.Context, verb, runnerID string) error {
	id, ok := mtls.FromContext(ctx)
	if !ok || id.Role != mtls.RoleRunner {
		return nil
	}
	r, err := s.reg.Get(ctx, runnerID)
	if errors.Is(err, registry.ErrNotFound) {
		return nil // the verb itself says it is not registered
	}
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	if r.Owner != id.Name {
		return mtls.Refuse("engine-svc refused RegistryService.%s from %s: runner %s was registered by another certificate. Nothing was changed.", verb, id.Name, runnerID)
	}
	return nil
}

// Vouchers are the front doors whose certificates may vouch for the
// person who answered a gate (responded_by_verified): the web console,
// which signs people in. Any other door's name is recorded as stated.
var Vouchers = []string{"console-svc"}

// voucher is the front door vouching for req's responded_by, "" when the
// request does not ask; a caller that may not vouch is refused, so a
// verified name on the record always came through a sign-in.
func voucher(ctx context.Context, req *realmv1.SubmitHumanResponseRequest) (string, error) {
	if !req.GetRespondedByVerified() {
		return "", nil
	}
	id, ok := mtls.FromContext(ctx)
	if !ok || id.Role != mtls.RoleFrontDoor || !slices.Contains(Vouchers, id.Name) {
		who := "a caller without a certificate"
		if ok {
			who = id.Name
		}
		return "", mtls.Refuse("engine-svc refused EngineService.SubmitHumanResponse from %s: only %s may vouch for who answered (responded_by_verified). Nothing was recorded; send the answer without responded_by_verified to record the name as stated.",
			who, strings.Join(Vouchers, ", "))
	}
	if strings.TrimSpace(req.GetRespondedBy()) == "" {
		return "", status.Error(codes.InvalidArgument, "responded_by_verified needs responded_by: the name of the person signed in. Nothing was recorded.")
	}
	return id.Name, nil
}
