package adapters

import (
	"context"
	"math"
	"slices"
	"strings"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/runner"
)

// op is one operation of a catalog adapter.
type op func(ctx context.Context, call runner.AdapterCall) (any, error)

// ops are a catalog adapter's operations by service_method, then by
// operation name.
type ops map[string]map[string]op

// dispatch runs the call's operation. A method the adapter lacks is
// ADAPTER_OP_UNSUPPORTED (spec §13.1's sentence); an unknown operation is
// unknownOp (ADAPTER_OP_UNSUPPORTED; github's is ENGINE_ADAPTER_FAILED).
func (o ops) dispatch(ctx context.Context, adapter string, unknownOp errcode.Code, call runner.AdapterCall) (any, error) {
	// A catalog adapter takes its settings at construction (spec §13.2):
	// it declares no config_schema, so a step's config keys would be
	// ignored; they are refused.
	for _, k := range sortedKeys(call.Config) {
		switch k {
		case "adapter", "trust", keyService, keyRateLimit:
		default:
			return nil, invalid("config.%s: adapter '%s' takes its settings from the deployment manifest (realm.yaml), not from a step's config", k, adapter)
		}
	}
	byName, ok := o[call.Method]
	if !ok {
		return nil, unsupported("Adapter '%s' does not support service_method '%s'", adapter, call.Method)
	}
	f, ok := byName[call.Operation]
	if !ok {
		names := slices.Sorted(func(yield func(string) bool) {
			for k := range byName {
				if !yield(k) {
					return
				}
			}
		})
		return nil, fail(unknownOp, map[string]any{"operation": call.Operation, "service_method": call.Method},
			"Adapter '%s' has no %s operation '%s' (it has: %s)", adapter, call.Method, call.Operation, strings.Join(names, ", "))
	}
	return f(ctx, call)
}

// reply is an adapter's answer: {status, data}; the engine records data
// when it is an object (spec §13.1).
func reply(status int, data any) map[string]any {
	return map[string]any{"status": status, "data": data}
}

// args are a call's params, read with ADAPTER_VALIDATION_FAILED refusals
// that name the param.
type args map[string]any

// text is a string param; required refuses it absent or empty.
func (a args) text(key string, required bool) (string, error) {
	v, has := a[key]
	if !has || v == nil {
		if required {
			return "", invalid("param '%s' is required", key)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", invalid("param '%s' must be a string", key)
	}
	if required && strings.TrimSpace(s) == "" {
		return "", invalid("param '%s' must not be empty", key)
	}
	return s, nil
}

// integer is a whole-number param (JSON numbers arrive as float64);
// has is false when it is absent.
func (a args) integer(key string, required bool) (n int64, has bool, err error) {
	v, ok := a[key]
	if !ok || v == nil {
		if required {
			return 0, false, invalid("param '%s' is required", key)
		}
		return 0, false, nil
	}
	f, ok := number(v)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false, invalid("param '%s' must be a whole number", key)
	}
	return int64(f), true, nil
}

// texts is a list-of-strings param.
func (a args) texts(key string, required bool) ([]string, error) {
	v, has := a[key]
	if !has || v == nil {
		if required {
			return nil, invalid("param '%s' is required", key)
		}
		return nil, nil
	}
	raw, ok := v.([]any)
	if !ok {
		return nil, invalid("param '%s' must be a list of strings", key)
	}
	out := make([]string, 0, len(raw))
	for i, e := range raw {
		s, ok := e.(string)
		if !ok {
			return nil, invalid("param '%s'[%d] must be a string", key, i)
		}
		out = append(out, s)
	}
	return out, nil
}

// object is an object param.
func (a args) object(key string, required bool) (map[string]any, error) {
	v, has := a[key]
	if !has || v == nil {
		if required {
			return nil, invalid("param '%s' is required", key)
		}
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, invalid("param '%s' must be an object", key)
	}
	return m, nil
}

// only refuses a param outside known: an operation with a fixed set of
// params would otherwise ignore a misspelt one.
func (a args) only(op string, known ...string) error {
	for _, k := range sortedKeys(a) {
		if !slices.Contains(known, k) {
			return invalid("param '%s' is not a param of %s (it takes: %s)", k, op, strings.Join(known, ", "))
		}
	}
	return nil
}
