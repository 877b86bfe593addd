// Package errcode is Realm's error-code catalogue, kept as data.
//
// codes.json is the single source: every code of the ErrorCode type (the 72
// Realm raises and the 15 it never raises) with its category, default
// agent_action, retryable flag and the gRPC status code it travels as.
// internal/gen turns it into codes_gen.go (typed constants and the table
// Info reads) and docs/error-codes.md; a test fails when either is stale.
//
// Errors are values: *Error carries a Code, and grpc.go maps it to and from
// a gRPC status through one table, with the code in an ErrorDetail — callers
// never parse message strings.
package errcode

//go:generate go run ./internal/gen -in codes.json -go codes_gen.go -md ../../docs/error-codes.md

import (
	"slices"

	"google.golang.org/grpc/codes"
)

// Code is a catalogue error code such as "VALIDATION_INPUT_SCHEMA". Codes
// outside the catalogue are allowed (project code may raise them) and pass
// through unchanged; Info reports them as unknown.
type Code string

// Category groups codes by where the failure lies.
type Category string

// The six categories.
const (
	CategoryNetwork    Category = "NETWORK"
	CategoryService    Category = "SERVICE"
	CategoryState      Category = "STATE"
	CategoryValidation Category = "VALIDATION"
	CategoryEngine     Category = "ENGINE"
	CategoryResource   Category = "RESOURCE"
)

// Categories lists the categories in catalogue order.
func Categories() []Category {
	return []Category{CategoryNetwork, CategoryService, CategoryState, CategoryValidation, CategoryEngine, CategoryResource}
}

// AgentAction tells the caller of a tool what to do after the error.
type AgentAction string

// The six agent actions of the error-codes reference.
const (
	ActionProvideInput        AgentAction = "provide_input"
	ActionResolvePrecondition AgentAction = "resolve_precondition"
	ActionReportToUser        AgentAction = "report_to_user"
	ActionWaitForHuman        AgentAction = "wait_for_human"
	ActionWaitAndProceed      AgentAction = "wait_and_proceed"
	ActionStop                AgentAction = "stop"
)

// AgentActions lists the agent actions in proto enum order.
func AgentActions() []AgentAction {
	return []AgentAction{ActionProvideInput, ActionResolvePrecondition, ActionReportToUser, ActionWaitForHuman, ActionWaitAndProceed, ActionStop}
}

// Info is one catalogue entry.
type Info struct {
	Code     Code
	Category Category
	// AgentAction is the default; call sites may raise the code with one of
	// AlsoActions instead (the reference lists every value seen).
	AgentAction AgentAction
	AlsoActions []AgentAction
	Retryable   bool
	// RetryableVaries marks codes whose call sites disagree on Retryable;
	// Retryable is then the usual value.
	RetryableVaries bool
	// Raised is false for the codes that are in the type but that Realm
	// itself never raises (their metadata is inferred from the name).
	Raised  bool
	GRPC    codes.Code
	Meaning string
}

// Info returns the catalogue entry for c, or false for a code outside the
// catalogue.
func (c Code) Info() (Info, bool) {
	info, ok := catalogue[c]
	if !ok {
		return Info{}, false
	}
	info.AlsoActions = slices.Clone(info.AlsoActions)
	return info, true
}

// Known reports whether c is in the catalogue.
func (c Code) Known() bool {
	_, ok := catalogue[c]
	return ok
}

// All returns every catalogue entry in catalogue order (raised codes by
// category, then the never-raised ones).
func All() []Info {
	out := make([]Info, 0, len(codeOrder))
	for _, c := range codeOrder {
		info, _ := c.Info()
		out = append(out, info)
	}
	return out
}
