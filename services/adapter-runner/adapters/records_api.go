package adapters

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/realm-go/realm/pkg/errcode"
)

// Helpers of the record APIs (airtable, notion): params read strictly, the
// shape of an answer checked, and the service's own error message added to
// the classified error.

// boolParam is a boolean param; has is false when it is absent.
func boolParam(p args, key string) (v, has bool, err error) {
	raw, ok := p[key]
	if !ok || raw == nil {
		return false, false, nil
	}
	b, ok := raw.(bool)
	if !ok {
		return false, false, invalid("param '%s' must be true or false", key)
	}
	return b, true, nil
}

// listParam is an array param.
func listParam(p args, key string, required bool) ([]any, error) {
	raw, ok := p[key]
	if !ok || raw == nil {
		if required {
			return nil, invalid("param '%s' is required", key)
		}
		return nil, nil
	}
	l, ok := raw.([]any)
	if !ok {
		return nil, invalid("param '%s' must be a list", key)
	}
	return l, nil
}

// nonEmptyTexts is a required list of non-empty strings with at most max
// entries (0: no bound).
func nonEmptyTexts(p args, key string, max int) ([]string, error) {
	l, err := p.texts(key, true)
	if err != nil {
		return nil, err
	}
	if len(l) == 0 {
		return nil, invalid("param '%s' must be a non-empty list of non-empty strings", key)
	}
	if max > 0 && len(l) > max {
		return nil, invalid("param '%s' has %d entries; at most %d are allowed per call", key, len(l), max)
	}
	for i, s := range l {
		if strings.TrimSpace(s) == "" {
			return nil, invalid("param '%s'[%d] must not be empty", key, i)
		}
	}
	return l, nil
}

// copyParams is the JSON body of the params among keys that are present,
// forwarded as the service reads them.
func copyParams(p args, keys ...string) map[string]any {
	body := map[string]any{}
	for _, k := range keys {
		if v, ok := p[k]; ok && v != nil {
			body[k] = v
		}
	}
	return body
}

// shapeInvalid is SERVICE_RESPONSE_INVALID for a 2xx answer that is JSON
// but lacks what the operation returns (an id, a records array).
func (a *api) shapeInvalid(r request, resp answer, format string, args ...any) error {
	u, err := a.url(r)
	if err != nil {
		return err
	}
	return fail(errcode.ServiceResponseInvalid, resp.details(r.method, u),
		"%s %s answered %d, but %s", r.method, redact(u), resp.status, fmt.Sprintf(format, args...))
}

// serviceMessage adds the service's own explanation of a refusal (the
// body's message, and its error type as details.error_type) to a
// classified error; how to find them in the body is the service's
// (explain). Other errors pass through.
func serviceMessage(err error, explain func(body map[string]any) (kind, message string)) error {
	we := asWorkflowError(err)
	if we == nil || we.Details == nil {
		return err
	}
	raw, _ := we.Details["body"].(string)
	var body map[string]any
	if raw == "" || json.Unmarshal([]byte(raw), &body) != nil {
		return err
	}
	kind, message := explain(body)
	if kind != "" {
		we.Details["error_type"] = kind
	}
	if message != "" {
		we.Message += ": " + message
	}
	return err
}
