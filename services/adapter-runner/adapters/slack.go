package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/slack-go/slack"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
)

// NameSlack is the catalog name of the Slack adapter.
const NameSlack = "slack"

// Slack is the catalog's `slack` adapter: Slack's Web API with a bot
// token. It uses github.com/slack-go/slack (sending through the shared
// guarded client, at base_url) inside the shared 429 loop: the library's
// errors carry what §13.4 needs — *RateLimitedError its Retry-After,
// StatusCodeError the HTTP status, SlackErrorResponse Slack's error
// string from an HTTP 200 {"ok": false} — and each is mapped onto the
// shared classification (slackAnswer).
type Slack struct {
	api    *api
	client *slack.Client
	ops    ops
}

// slackKeys are a manifest entry's config keys.
var slackKeys = []string{"base_url", "bot_token"}

// newSlack builds the adapter from its manifest config: bot_token
// (required) and base_url (default https://slack.com/api).
func newSlack(name string, config map[string]any, opts Options) (runner.Adapter, error) {
	s, err := readSettings(config, slackKeys...)
	if err != nil {
		return nil, err
	}
	token, err := s.text("bot_token", true, "")
	if err != nil {
		return nil, err
	}
	base, err := s.baseURL("https://slack.com/api")
	if err != nil {
		return nil, err
	}
	a, err := newAPI(name, base, nil, opts, rules{})
	if err != nil {
		return nil, err
	}
	sl := &Slack{api: a, client: slack.New(token, slack.OptionAPIURL(a.base+"/"), slack.OptionHTTPClient(a.client))}
	sl.ops = ops{
		"fetch":  {"lookup_user_by_email": sl.lookupUserByEmail, "get_user": sl.getUser},
		"create": {"post_message": sl.postMessage, "post_reply": sl.postReply, "add_reaction": sl.addReaction},
		"update": {"update_message": sl.updateMessage},
	}
	return sl, nil
}

// Call runs one operation.
func (s *Slack) Call(ctx context.Context, call runner.AdapterCall) (any, error) {
	return s.ops.dispatch(ctx, s.api.name, errcode.AdapterOpUnsupported, call)
}

// do runs one Web API method through the library inside the shared loop:
// the service's bucket, 429 waits, §13.4. once: the method posts
// something, so a failure after which it may have been applied is not
// retried.
func (s *Slack) do(ctx context.Context, config map[string]any, method string, once bool, f func() error) error {
	u, err := s.api.url(request{path: method})
	if err != nil {
		return err
	}
	_, err = s.api.exchange(ctx, config, http.MethodPost, u, func() (answer, error) {
		return s.answer(ctx, u, method, f())
	})
	if we := asWorkflowError(err); we != nil && once && we.Retryable && slackMayHaveApplied(we) {
		we.Retryable = false
		we.Message += " (not retried: the message may have been posted)"
	}
	return err
}

// slackMayHaveApplied: a network failure, or Slack's own internal_error
// and fatal_error, which "may have partly succeeded".
func slackMayHaveApplied(e *handler.WorkflowError) bool {
	if e.Code == errcode.NetworkUnreachable {
		return true
	}
	code, _ := e.Details["slack_error"].(string)
	return code == "internal_error" || code == "fatal_error"
}

// answer turns the library's result into the answer the shared loop
// classifies: a rate limit is a 429 (Retry-After from the library), an
// HTTP failure its status; Slack's {"ok": false} errors are classified
// here (slackCodes); a body that is not JSON is SERVICE_RESPONSE_INVALID;
// no answer at all is the transport's error.
func (s *Slack) answer(ctx context.Context, u *url.URL, method string, err error) (answer, error) {
	var (
		limited *slack.RateLimitedError
		status  slack.StatusCodeError
		refused slack.SlackErrorResponse
		syntax  *json.SyntaxError
		typ     *json.UnmarshalTypeError
		num     *strconv.NumError
	)
	switch {
	case err == nil:
		return answer{status: http.StatusOK, header: http.Header{}}, nil
	case errors.As(err, &limited):
		return answer{status: http.StatusTooManyRequests, header: http.Header{"Retry-After": {strconv.FormatFloat(limited.RetryAfter.Seconds(), 'f', -1, 64)}}}, nil
	case errors.As(err, &num):
		// The library could not read a Retry-After (an HTTP date): a 429
		// whose wait is not known.
		return answer{status: http.StatusTooManyRequests, header: http.Header{}}, nil
	case errors.As(err, &status):
		return answer{status: status.Code, header: http.Header{}}, nil
	case errors.As(err, &refused):
		if refused.Err == "ratelimited" {
			return answer{status: http.StatusTooManyRequests, header: http.Header{}}, nil
		}
		return answer{}, slackError(method, u, refused)
	case errors.As(err, &syntax), errors.As(err, &typ), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return answer{}, fail(errcode.ServiceResponseInvalid, map[string]any{"method": method, "url": redact(u)},
			"Slack's %s answered with a body that is not the JSON expected: %v", method, err)
	}
	return answer{}, transportError(ctx, http.MethodPost, u, err)
}

// slackCodes classify Slack's error strings (an HTTP 200 with
// {"ok": false, "error": …}); any other is SERVICE_HTTP_4XX (stop).
var slackCodes = map[string]errcode.Code{
	"invalid_auth":        errcode.ServiceAuthFailed,
	"not_authed":          errcode.ServiceAuthFailed,
	"account_inactive":    errcode.ServiceAuthFailed,
	"token_revoked":       errcode.ServiceAuthFailed,
	"token_expired":       errcode.ServiceAuthFailed,
	"channel_not_found":   errcode.ServiceNotFound,
	"users_not_found":     errcode.ServiceNotFound,
	"user_not_found":      errcode.ServiceNotFound,
	"message_not_found":   errcode.ServiceNotFound,
	"thread_not_found":    errcode.ServiceNotFound,
	"internal_error":      errcode.ServiceHTTP5xx,
	"fatal_error":         errcode.ServiceHTTP5xx,
	"service_unavailable": errcode.ServiceHTTP5xx,
}

func slackError(method string, u *url.URL, r slack.SlackErrorResponse) error {
	code, ok := slackCodes[r.Err]
	if !ok {
		code = errcode.ServiceHTTP4xx
	}
	details := map[string]any{"slack_error": r.Err, "method": method, "url": redact(u)}
	if r.Needed != "" {
		details["needed"], details["provided"] = r.Needed, r.Provided
	}
	if len(r.ResponseMetadata.Messages) > 0 {
		details["messages"] = strings.Join(r.ResponseMetadata.Messages, "; ")
	}
	e := fail(code, details, "Slack's %s answered error '%s'", method, r.Err)
	if code == errcode.ServiceHTTP5xx {
		e.AgentAction = errcode.ActionReportToUser
	}
	return e
}

// rawBlock is one Block Kit block as the workflow wrote it, sent as is.
type rawBlock map[string]any

func (b rawBlock) BlockType() slack.MessageBlockType {
	t, _ := b["type"].(string)
	return slack.MessageBlockType(t)
}

func (b rawBlock) ID() string {
	id, _ := b["block_id"].(string)
	return id
}

func (b rawBlock) MarshalJSON() ([]byte, error) { return json.Marshal(map[string]any(b)) }

// slackMessage reads text (required) and blocks (optional, Block Kit objects)
// as the library's options; text is the notification's fallback when
// blocks are given. The text is sent unescaped: Slack's mrkdwn (<url|…>,
// <@U…>) is the author's to use.
func slackMessage(p args) ([]slack.MsgOption, error) {
	text, err := p.text("text", true)
	if err != nil {
		return nil, err
	}
	opts := []slack.MsgOption{slack.MsgOptionText(text, false)}
	raw, has := p["blocks"]
	if !has || raw == nil {
		return opts, nil
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, invalid("param 'blocks' must be a list of Block Kit blocks (objects)")
	}
	blocks := make([]slack.Block, 0, len(list))
	for i, v := range list {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, invalid("param 'blocks'[%d] must be an object", i)
		}
		if t, _ := m["type"].(string); t == "" {
			return nil, invalid("param 'blocks'[%d] needs a 'type'", i)
		}
		blocks = append(blocks, rawBlock(m))
	}
	return append(opts, slack.MsgOptionBlocks(blocks...)), nil
}

// requiredTexts reads the required string params in order.
func requiredTexts(p args, keys ...string) ([]string, error) {
	out := make([]string, len(keys))
	for i, k := range keys {
		v, err := p.text(k, true)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// posted is what the posting operations answer.
func posted(channel, ts string) map[string]any {
	return reply(http.StatusOK, map[string]any{"ok": true, "channel": channel, "ts": ts})
}

// postMessage posts to a channel (chat.postMessage): {ok, channel, ts}.
func (s *Slack) postMessage(ctx context.Context, call runner.AdapterCall) (any, error) {
	return s.post(ctx, call, "")
}

// postReply posts in the thread of thread_ts (chat.postMessage with
// thread_ts): {ok, channel, ts}.
func (s *Slack) postReply(ctx context.Context, call runner.AdapterCall) (any, error) {
	thread, err := args(call.Params).text("thread_ts", true)
	if err != nil {
		return nil, err
	}
	return s.post(ctx, call, thread)
}

func (s *Slack) post(ctx context.Context, call runner.AdapterCall, thread string) (any, error) {
	p := args(call.Params)
	channel, err := p.text("channel", true)
	if err != nil {
		return nil, err
	}
	opts, err := slackMessage(p)
	if err != nil {
		return nil, err
	}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
	}
	var ch, ts string
	err = s.do(ctx, call.Config, "chat.postMessage", true, func() (err error) {
		ch, ts, err = s.client.PostMessageContext(ctx, channel, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return posted(ch, ts), nil
}

// updateMessage replaces a message's text (and blocks) (chat.update):
// {ok, channel, ts}. Sending the same update twice leaves the same
// message, so it is retried like a read.
func (s *Slack) updateMessage(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	v, err := requiredTexts(p, "channel", "ts")
	if err != nil {
		return nil, err
	}
	opts, err := slackMessage(p)
	if err != nil {
		return nil, err
	}
	var ch, ts string
	err = s.do(ctx, call.Config, "chat.update", false, func() (err error) {
		ch, ts, _, err = s.client.UpdateMessageContext(ctx, v[0], v[1], opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return posted(ch, ts), nil
}

// addReaction adds the emoji name (colons optional) to a message
// (reactions.add): {ok, already_reacted}. A reaction already there is
// not an error, so a retried call ends the same way.
func (s *Slack) addReaction(ctx context.Context, call runner.AdapterCall) (any, error) {
	v, err := requiredTexts(call.Params, "channel", "ts", "name")
	if err != nil {
		return nil, err
	}
	name := strings.Trim(v[2], ":")
	already := false
	err = s.do(ctx, call.Config, "reactions.add", false, func() error {
		err := s.client.AddReactionContext(ctx, name, slack.NewRefToMessage(v[0], v[1]))
		var r slack.SlackErrorResponse
		if errors.As(err, &r) && r.Err == "already_reacted" {
			already = true
			return nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return reply(http.StatusOK, map[string]any{"ok": true, "already_reacted": already}), nil
}

// lookupUserByEmail finds a workspace member by email
// (users.lookupByEmail).
func (s *Slack) lookupUserByEmail(ctx context.Context, call runner.AdapterCall) (any, error) {
	email, err := args(call.Params).text("email", true)
	if err != nil {
		return nil, err
	}
	return s.user(ctx, call, "users.lookupByEmail", func() (*slack.User, error) { return s.client.GetUserByEmailContext(ctx, email) })
}

// getUser reads a member by id (users.info).
func (s *Slack) getUser(ctx context.Context, call runner.AdapterCall) (any, error) {
	id, err := args(call.Params).text("user", true)
	if err != nil {
		return nil, err
	}
	return s.user(ctx, call, "users.info", func() (*slack.User, error) { return s.client.GetUserInfoContext(ctx, id) })
}

// user is a member as {id, name, real_name, display_name, email, title,
// tz, is_bot, deleted, team_id}: what a workflow addresses or greets
// someone by, not Slack's whole profile.
func (s *Slack) user(ctx context.Context, call runner.AdapterCall, method string, get func() (*slack.User, error)) (any, error) {
	var u *slack.User
	err := s.do(ctx, call.Config, method, false, func() (err error) {
		u, err = get()
		return err
	})
	if err != nil {
		return nil, err
	}
	return reply(http.StatusOK, map[string]any{
		"id": u.ID, "name": u.Name, "real_name": cmpOr(u.RealName, u.Profile.RealName), "display_name": u.Profile.DisplayName,
		"email": u.Profile.Email, "title": u.Profile.Title, "tz": u.TZ, "is_bot": u.IsBot, "deleted": u.Deleted, "team_id": u.TeamID,
	}), nil
}
