package errcode

import (
	"errors"
	"fmt"
	"maps"
)

// Error is a domain error carrying a catalogue code. It is what services
// return and what ToStatus turns into a gRPC status.
type Error struct {
	Code    Code
	Message string
	// Details is extra data for the caller (error_details in MCP replies).
	Details map[string]any
	// Err is the wrapped cause, kept for errors.Is/As; it does not travel
	// over gRPC.
	Err error

	// AgentAction, when set, overrides the catalogue default: the reference
	// raises some codes with different actions at different call sites.
	AgentAction AgentAction
	// Retryable, when set, overrides the catalogue default (codes whose
	// retryable flag varies by call site).
	Retryable *bool
}

// New returns an *Error with code and message.
func New(code Code, msg string) *Error {
	return &Error{Code: code, Message: msg}
}

// Newf returns an *Error with code and a formatted message. A single %w
// verb wraps its argument as the cause.
func Newf(code Code, format string, args ...any) *Error {
	formatted := fmt.Errorf(format, args...)
	return &Error{Code: code, Message: formatted.Error(), Err: errors.Unwrap(formatted)}
}

// Wrap returns an *Error with code whose cause is err. msg may be empty, in
// which case Error() reads "<code>: <cause>".
func Wrap(code Code, err error, msg string) *Error {
	return &Error{Code: code, Message: msg, Err: err}
}

// Error returns the message, or "<code>: <cause>" when there is no message.
func (e *Error) Error() string {
	switch {
	case e.Message != "":
		return e.Message
	case e.Err != nil:
		return string(e.Code) + ": " + e.Err.Error()
	default:
		return string(e.Code)
	}
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// WithDetails returns a copy of e whose details are d merged over e's own.
// e is left unchanged so shared sentinel errors stay safe to decorate.
func (e *Error) WithDetails(d map[string]any) *Error {
	out := *e
	out.Details = make(map[string]any, len(e.Details)+len(d))
	maps.Copy(out.Details, e.Details)
	maps.Copy(out.Details, d)
	return &out
}

// WithAgentAction returns a copy of e raised with action a instead of the
// catalogue default.
func (e *Error) WithAgentAction(a AgentAction) *Error {
	out := *e
	out.AgentAction = a
	return &out
}

// WithRetryable returns a copy of e with the retryable flag set explicitly.
func (e *Error) WithRetryable(r bool) *Error {
	out := *e
	out.Retryable = &r
	return &out
}

// Category is the code's catalogue category, empty for unknown codes.
func (e *Error) Category() Category {
	info, _ := e.Code.Info()
	return info.Category
}

// Action is the agent action e was raised with: the override if set, else
// the catalogue default, else report_to_user for codes outside the
// catalogue (the caller cannot fix what it does not know).
func (e *Error) Action() AgentAction {
	if e.AgentAction != "" {
		return e.AgentAction
	}
	if info, ok := e.Code.Info(); ok {
		return info.AgentAction
	}
	return ActionReportToUser
}

// IsRetryable is the override if set, else the catalogue default (false for
// unknown codes).
func (e *Error) IsRetryable() bool {
	if e.Retryable != nil {
		return *e.Retryable
	}
	info, _ := e.Code.Info()
	return info.Retryable
}

// As finds the first *Error in err's chain.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) && e != nil {
		return e, true
	}
	return nil, false
}

// CodeOf returns the code of the first *Error in err's chain, or "".
func CodeOf(err error) Code {
	if e, ok := As(err); ok {
		return e.Code
	}
	return ""
}

// HasCode reports whether any *Error in err's chain (including joined
// errors) has code c.
func HasCode(err error, c Code) bool {
	switch x := err.(type) {
	case nil:
		return false
	case *Error:
		if x == nil {
			return false
		}
		if x.Code == c {
			return true
		}
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return HasCode(u.Unwrap(), c)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if HasCode(e, c) {
				return true
			}
		}
	}
	return false
}
