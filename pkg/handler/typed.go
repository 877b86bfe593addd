package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/realm-go/realm/pkg/errcode"
)

// Validator is an input or config struct that checks itself after decoding
// (required fields, ranges): Typed and TypedConfig call Validate and answer
// its error with VALIDATION_INPUT_SCHEMA, like a decode failure.
type Validator interface {
	Validate() error
}

// Typed adapts a function over structs to Handler: the step's params are
// decoded into In (through encoding/json, so In's json tags apply), and the
// function's Out becomes the step's output (a Result is passed through, so a
// typed handler may still Warn or AbortRun; anything else is Data(out)).
//
// Params that do not decode into In (a string where In has a number, say),
// or that In's Validate refuses, fail the step with VALIDATION_INPUT_SCHEMA,
// naming the field in Details["field"]; the function is not called. Fields
// In does not name are ignored: the step's input_schema, not the handler,
// says what params may hold.
func Typed[In, Out any](fn func(ctx context.Context, in In, sc StepContext) (Out, error)) Handler {
	return Func(func(ctx context.Context, in Inputs, sc StepContext) (Result, error) {
		var params In
		if err := decode("params", in.Params, &params); err != nil {
			return Result{}, err
		}
		return toResult(fn(ctx, params, sc))
	})
}

// TypedConfig is Typed with the step's config block decoded into Cfg too,
// with the same refusal when it does not fit.
func TypedConfig[In, Cfg, Out any](fn func(ctx context.Context, in In, config Cfg, sc StepContext) (Out, error)) Handler {
	return Func(func(ctx context.Context, in Inputs, sc StepContext) (Result, error) {
		var params In
		if err := decode("params", in.Params, &params); err != nil {
			return Result{}, err
		}
		var config Cfg
		if err := decode("config", sc.Config, &config); err != nil {
			return Result{}, err
		}
		return toResult(fn(ctx, params, config, sc))
	})
}

// toResult is a typed function's return as a handler's.
func toResult[Out any](out Out, err error) (Result, error) {
	if err != nil {
		return Result{}, err
	}
	if r, ok := any(out).(Result); ok {
		return r, nil
	}
	return Data(out), nil
}

// decode fills dst from a JSON object (where says which: params or
// config) and validates it, answering any failure with
// VALIDATION_INPUT_SCHEMA.
func decode(where string, src map[string]any, dst any) error {
	if src == nil {
		src = map[string]any{}
	}
	raw, err := json.Marshal(src)
	if err == nil {
		err = json.Unmarshal(raw, dst)
	}
	if err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			field := where + "." + typeErr.Field
			return invalidInput(field, fmt.Sprintf("%s must be %s, got %s", field, kind(typeErr.Type), typeErr.Value), err)
		}
		return invalidInput(where, fmt.Sprintf("%s: %v", where, err), err)
	}
	if v, ok := dst.(Validator); ok {
		if err := v.Validate(); err != nil {
			return invalidInput(where, fmt.Sprintf("%s: %v", where, err), err)
		}
	}
	return nil
}

// kind names a Go type the way a JSON value is described.
func kind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return kind(t.Elem())
	}
	return t.String()
}

// invalidInput is the VALIDATION_INPUT_SCHEMA error a typed handler answers
// with, naming the field (or params/config as a whole): the caller has to
// give another value, so it is not retried.
func invalidInput(field, msg string, err error) *WorkflowError {
	e := NewWorkflowError(errcode.ValidationInputSchema, msg)
	e.Details = map[string]any{"field": field}
	e.Err = err
	return e
}
