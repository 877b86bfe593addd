package provider

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// apiFailure is err as a CallError the service answered with its own
// error, nil for any other failure (transport, timeout, ceiling).
func apiFailure(err error) *CallError {
	var ce *CallError
	if errors.As(err, &ce) && ce.api != nil {
		return ce
	}
	return nil
}

// anthropicDowngrade is what a failed strict Anthropic request earns: a
// 400 (the schema refused) or a 503 (the grammar compiler or the service
// out) is sent again once without strict; any other failure propagates
// (§8.4). The decision keys on the status; the message only tells the
// grammar compiler's 503 from another.
func anthropicDowngrade(err error) *Downgrade {
	ce := apiFailure(err)
	if ce == nil {
		return nil
	}
	switch ce.api.status {
	case http.StatusBadRequest:
		return &Downgrade{Reason: ReasonAPIRejectedSchema, APIMessage: ce.api.message}
	case http.StatusServiceUnavailable:
		reason := ReasonServiceUnavailable
		if strings.Contains(ce.api.message, grammarLabel) {
			reason = ReasonGrammarUnavailable
		}
		return &Downgrade{Reason: reason, APIMessage: ce.api.message}
	}
	return nil
}

// openaiDowngrade is what a failed strict OpenAI request earns: only a 400
// is sent again without strict, keeping the service's param and code
// verbatim; 5xx and transport errors never downgrade (§8.4).
func openaiDowngrade(err error) *Downgrade {
	ce := apiFailure(err)
	if ce == nil || ce.api.status != http.StatusBadRequest {
		return nil
	}
	return &Downgrade{Reason: ReasonAPIRejectedSchema, APIMessage: ce.api.message,
		HasParamCode: true, APIParam: ce.api.param, APICode: ce.api.code}
}

// rawValue is a field of an error body as it was sent; nil when absent
// or null.
func rawValue(raw string) any {
	if raw == "" || raw == "null" {
		return nil
	}
	var v any
	if json.Unmarshal([]byte(raw), &v) != nil {
		return nil
	}
	return v
}

// withDowngrade marks a failure that followed a downgrade with it, so the
// downgrade is disclosed with the failure (§8.4).
func withDowngrade(err error, dg *Downgrade) error {
	var ce *CallError
	if dg != nil && errors.As(err, &ce) {
		ce.Downgrade = dg
	}
	return err
}
