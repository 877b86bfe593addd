package errcode

import (
	"context"
	"encoding/json"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// agentActionTable is the one mapping between the catalogue's agent_action
// words and the proto enum.
var agentActionTable = []struct {
	word AgentAction
	enum realmv1.AgentAction
}{
	{ActionProvideInput, realmv1.AgentAction_AGENT_ACTION_PROVIDE_INPUT},
	{ActionResolvePrecondition, realmv1.AgentAction_AGENT_ACTION_RESOLVE_PRECONDITION},
	{ActionReportToUser, realmv1.AgentAction_AGENT_ACTION_REPORT_TO_USER},
	{ActionWaitForHuman, realmv1.AgentAction_AGENT_ACTION_WAIT_FOR_HUMAN},
	{ActionWaitAndProceed, realmv1.AgentAction_AGENT_ACTION_WAIT_AND_PROCEED},
	{ActionStop, realmv1.AgentAction_AGENT_ACTION_STOP},
}

// actionAliases are later names of the same action: Realm ≥0.48 renamed
// wait_for_human to wait_for_service.
var actionAliases = map[string]AgentAction{
	"wait_for_service": ActionWaitForHuman,
}

// AgentActionEnum maps an agent_action word to the proto enum;
// AGENT_ACTION_UNSPECIFIED for an unknown word.
func AgentActionEnum(s string) realmv1.AgentAction {
	if a, ok := actionAliases[s]; ok {
		s = string(a)
	}
	for _, row := range agentActionTable {
		if string(row.word) == s {
			return row.enum
		}
	}
	return realmv1.AgentAction_AGENT_ACTION_UNSPECIFIED
}

// AgentActionString maps the proto enum to its agent_action word; "" for
// UNSPECIFIED or an unknown value.
func AgentActionString(a realmv1.AgentAction) string {
	for _, row := range agentActionTable {
		if row.enum == a {
			return string(row.word)
		}
	}
	return ""
}

// ToStatus maps an error to the gRPC status it travels as:
//   - an *Error anywhere in the chain: the catalogue's gRPC code (UNKNOWN
//     for a code outside the catalogue), its message, and an ErrorDetail;
//   - context.Canceled / context.DeadlineExceeded: CANCELED /
//     DEADLINE_EXCEEDED, no detail (nothing failed in the domain);
//   - an error that already is a gRPC status (relayed from another
//     service): that status unchanged;
//   - anything else: INTERNAL with an ENGINE_INTERNAL ErrorDetail.
//
// A nil error gives a nil status, which the status package reads as OK.
func ToStatus(err error) *status.Status {
	if err == nil {
		return nil
	}
	if e, ok := As(err); ok {
		return errorStatus(e)
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.New(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.New(codes.DeadlineExceeded, err.Error())
	}
	if st, ok := carriedStatus(err); ok {
		return st
	}
	return errorStatus(Wrap(EngineInternal, err, err.Error()))
}

func errorStatus(e *Error) *status.Status {
	info, known := e.Code.Info()
	grpcCode := codes.Unknown
	if known {
		grpcCode = info.GRPC
	}
	st := status.New(grpcCode, e.Error())
	detail := &realmv1.ErrorDetail{
		Code:        string(e.Code),
		Category:    string(info.Category),
		AgentAction: AgentActionEnum(string(e.Action())),
		Retryable:   e.IsRetryable(),
		Details:     detailsStruct(e.Details),
	}
	withDetail, err := st.WithDetails(detail)
	if err != nil {
		// Only a proto marshal failure lands here; the status still carries
		// the right gRPC code and message.
		return st
	}
	return withDetail
}

// detailsStruct converts details to a Struct. structpb only takes JSON-like
// Go values, so anything else (typed slices, structs) goes through a JSON
// round trip; what cannot be encoded is replaced by a note, never dropped
// silently.
func detailsStruct(d map[string]any) *structpb.Struct {
	if len(d) == 0 {
		return &structpb.Struct{Fields: map[string]*structpb.Value{}}
	}
	if s, err := structpb.NewStruct(d); err == nil {
		return s
	}
	raw, err := json.Marshal(d)
	if err == nil {
		var plain map[string]any
		if err = json.Unmarshal(raw, &plain); err == nil {
			var s *structpb.Struct
			if s, err = structpb.NewStruct(plain); err == nil {
				return s
			}
		}
	}
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		"details_unencodable": structpb.NewStringValue(err.Error()),
	}}
}

// FromStatus reads an *Error back from a gRPC error by its ErrorDetail. It
// reports false when err carries no status or no ErrorDetail; the message
// text is never parsed.
func FromStatus(err error) (*Error, bool) {
	if err == nil {
		return nil, false
	}
	st, ok := carriedStatus(err)
	if !ok {
		return nil, false
	}
	for _, d := range st.Details() {
		detail, ok := d.(*realmv1.ErrorDetail)
		if !ok {
			continue
		}
		return fromDetail(st.Message(), detail), true
	}
	return nil, false
}

// carriedStatus finds the gRPC status in err's chain as it was sent.
// status.FromError would instead rewrite the message of a wrapped status to
// the whole wrapping text.
func carriedStatus(err error) (*status.Status, bool) {
	var carrier interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &carrier) {
		return nil, false
	}
	st := carrier.GRPCStatus()
	return st, st != nil
}

func fromDetail(msg string, d *realmv1.ErrorDetail) *Error {
	e := &Error{Code: Code(d.GetCode()), Message: msg}
	if fields := d.GetDetails().GetFields(); len(fields) > 0 {
		e.Details = d.GetDetails().AsMap()
	}
	// Overrides are kept only where the sender differed from the defaults,
	// so a round trip of New(code, msg) gives back an equal value.
	defaults := &Error{Code: e.Code}
	if a := AgentAction(AgentActionString(d.GetAgentAction())); a != "" && a != defaults.Action() {
		e.AgentAction = a
	}
	if r := d.GetRetryable(); r != defaults.IsRetryable() {
		e.Retryable = &r
	}
	return e
}
