package slackgate

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/slack-go/slack"

	"github.com/realm-go/realm/pkg/errcode"
)

// apiErr gives a failed Slack call its catalogue code: what Slack
// answered, or that it could not be reached.
func apiErr(method string, err error) error {
	var (
		refused slack.SlackErrorResponse
		status  slack.StatusCodeError
		limited *slack.RateLimitedError
	)
	code := errcode.NetworkUnreachable
	switch {
	case errors.As(err, &limited):
		code = errcode.ServiceRateLimited
	case errors.As(err, &status) && status.Code >= 500:
		code = errcode.ServiceHTTP5xx
	case errors.As(err, &status) && status.Code == http.StatusTooManyRequests:
		code = errcode.ServiceRateLimited
	case errors.As(err, &status):
		code = errcode.ServiceHTTP4xx
	case errors.As(err, &refused):
		switch refused.Err {
		case "invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive", "missing_scope", "not_allowed_token_type":
			code = errcode.ServiceAuthFailed
		default:
			code = errcode.ServiceHTTP4xx
		}
	}
	return errcode.Wrap(code, err, fmt.Sprintf("%s: %s", method, err))
}

// readErr is apiErr, marked ErrNoHistory when the token may not read the
// channel: the caller then posts (at least once) rather than lose a post.
func readErr(method string, err error) error {
	var refused slack.SlackErrorResponse
	if errors.As(err, &refused) && refused.Err == "missing_scope" {
		return fmt.Errorf("%w: %w", ErrNoHistory, apiErr(method, err))
	}
	return apiErr(method, err)
}

// Refused reports whether Slack answered a post and did not take it: a
// retry changes nothing. Anything else (no answer, a 5xx, a rate limit)
// may be retried, and the post may even have been made.
func Refused(err error) bool {
	var (
		refused slack.SlackErrorResponse
		status  slack.StatusCodeError
	)
	if errors.As(err, &status) {
		return status.Code < 500 && status.Code != http.StatusTooManyRequests
	}
	return errors.As(err, &refused)
}
