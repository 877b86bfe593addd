package adapters_test

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/runner"
	"github.com/realm-go/realm/services/adapter-runner/apistub"
)

// slackAdapter is the manifest entry `use: slack` pointing at a stub, its
// token from ${secret:SLACK_BOT_TOKEN}.
func slackAdapter(t *testing.T, token string) (*apistub.Slack, runner.Adapter, *fakeClock) {
	t.Helper()
	stub := apistub.NewSlack(t)
	a, clock := buildFrom(t, "slack", map[string]any{"base_url": stub.URL(), "bot_token": "${secret:SLACK_BOT_TOKEN}"},
		map[string]string{"SLACK_BOT_TOKEN": token})
	return stub, a, clock
}

func TestSlackOperationsSendTheirRequestsAndShapeTheirResults(t *testing.T) {
	t.Parallel()
	user := `{"deleted":false,"display_name":"ada","email":"ada@example.com","id":"U042","is_bot":false,"name":"ada","real_name":"Ada Lovelace","team_id":"T001","title":"Analyst","tz":"Europe/London"}`
	tests := []struct {
		name, method, op string
		params           map[string]any
		wantPath         string
		wantForm         map[string]string // besides the token
		want             string
	}{
		{"post_message with blocks", "create", "post_message",
			map[string]any{"channel": "#general", "text": "Deploy <https://x.example|v2> done", "blocks": []any{map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": "*Deploy* done"}}}},
			"/api/chat.postMessage",
			map[string]string{"channel": "#general", "text": "Deploy <https://x.example|v2> done", "blocks": `[{"text":{"text":"*Deploy* done","type":"mrkdwn"},"type":"section"}]`},
			`{"channel":"C0123","ok":true,"ts":"1700000000.000101"}`},
		{"post_reply: in the thread", "create", "post_reply", map[string]any{"channel": "C0123", "thread_ts": "1700000000.000100", "text": "Deploy finished."},
			"/api/chat.postMessage", map[string]string{"channel": "C0123", "thread_ts": "1700000000.000100", "text": "Deploy finished."},
			`{"channel":"C0123","ok":true,"ts":"1700000000.000101"}`},
		{"update_message", "update", "update_message", map[string]any{"channel": "C0123", "ts": "1700000000.000100", "text": "Deploy finished"},
			"/api/chat.update", map[string]string{"channel": "C0123", "ts": "1700000000.000100", "text": "Deploy finished"},
			`{"channel":"C0123","ok":true,"ts":"1700000000.000100"}`},
		{"add_reaction: the name without colons", "create", "add_reaction", map[string]any{"channel": "C0123", "ts": "1700000000.000100", "name": ":white_check_mark:"},
			"/api/reactions.add", map[string]string{"channel": "C0123", "timestamp": "1700000000.000100", "name": "white_check_mark"},
			`{"already_reacted":false,"ok":true}`},
		{"lookup_user_by_email", "fetch", "lookup_user_by_email", map[string]any{"email": "ada@example.com"},
			"/api/users.lookupByEmail", map[string]string{"email": "ada@example.com"}, user},
		{"get_user", "fetch", "get_user", map[string]any{"user": "U042"},
			"/api/users.info", map[string]string{"user": "U042"}, user},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stub, a, _ := slackAdapter(t, apistub.SlackToken)
			out, err := ghCall(t, a, tt.method, tt.op, tt.params, nil)
			if err != nil {
				t.Fatalf("error %s: %s", err.Code, err.Message)
			}
			if got := mustJSON(t, out.(map[string]any)["data"]); got != tt.want {
				t.Errorf("data = %s\nwant %s", got, tt.want)
			}
			reqs := stub.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			form, _ := url.ParseQuery(r.Body)
			if r.Method != "POST" || r.Path != tt.wantPath || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
				t.Errorf("request = %s %s (%s), want POST %s form", r.Method, r.Path, r.Header.Get("Content-Type"), tt.wantPath)
			}
			if form.Get("token") != apistub.SlackToken && r.Header.Get("Authorization") != "Bearer "+apistub.SlackToken {
				t.Errorf("the bot token was not sent")
			}
			for k, v := range tt.wantForm {
				if form.Get(k) != v {
					t.Errorf("form %s = %q, want %q", k, form.Get(k), v)
				}
			}
		})
	}
}

func TestSlackAddReactionTwiceIsNotAnError(t *testing.T) {
	t.Parallel()
	_, a, _ := slackAdapter(t, apistub.SlackToken)
	params := map[string]any{"channel": "C0123", "ts": "1700000000.000100", "name": "eyes"}
	for i, want := range []string{`{"already_reacted":false,"ok":true}`, `{"already_reacted":true,"ok":true}`} {
		out, err := ghCall(t, a, "create", "add_reaction", params, nil)
		if err != nil {
			t.Fatalf("call %d: %s: %s", i, err.Code, err.Message)
		}
		if got := mustJSON(t, out.(map[string]any)["data"]); got != want {
			t.Errorf("call %d: data = %s, want %s", i, got, want)
		}
	}
}

func TestSlackClassifiesEachAnswerPerSpec13_4(t *testing.T) {
	t.Parallel()
	post := map[string]any{"channel": "C0123", "text": "hi"}
	update := map[string]any{"channel": "C0123", "ts": "1700000000.000100", "text": "hi"}
	lookup := map[string]any{"email": "ada@example.com"}
	okFalse := func(code string) []apistub.Fault {
		return []apistub.Fault{{Status: 200, Header: map[string]string{"Content-Type": "application/json"}, Body: `{"ok":false,"error":"` + code + `"}`}}
	}
	limited := apistub.Fault{Status: 429, Header: map[string]string{"Retry-After": "3"}, Body: `{"ok":false,"error":"ratelimited"}`}
	tests := []struct {
		name       string
		token      string
		method, op string
		params     map[string]any
		faults     []apistub.Fault
		closed     bool
		want       wantErr
		wantSleeps []time.Duration
		wantSent   int
	}{
		{"invalid_auth: auth failed", "xoxb-wrong", "create", "post_message", post, nil, false,
			wantErr{errcode.ServiceAuthFailed, errcode.ActionStop, false, nil}, nil, 1},
		{"token_revoked: auth failed", apistub.SlackToken, "fetch", "lookup_user_by_email", lookup, okFalse("token_revoked"), false,
			wantErr{errcode.ServiceAuthFailed, errcode.ActionStop, false, nil}, nil, 1},
		{"channel_not_found: not found", apistub.SlackToken, "create", "post_message", map[string]any{"channel": "C9", "text": "hi"}, nil, false,
			wantErr{errcode.ServiceNotFound, errcode.ActionProvideInput, false, nil}, nil, 1},
		{"users_not_found: not found", apistub.SlackToken, "fetch", "lookup_user_by_email", map[string]any{"email": "bob@example.com"}, nil, false,
			wantErr{errcode.ServiceNotFound, errcode.ActionProvideInput, false, nil}, nil, 1},
		{"message_not_found: not found", apistub.SlackToken, "update", "update_message", map[string]any{"channel": "C0123", "ts": "1.2", "text": "x"}, nil, false,
			wantErr{errcode.ServiceNotFound, errcode.ActionProvideInput, false, nil}, nil, 1},
		{"another error: SERVICE_HTTP_4XX stop", apistub.SlackToken, "create", "post_message", post, okFalse("msg_too_long"), false,
			wantErr{errcode.ServiceHTTP4xx, errcode.ActionStop, false, nil}, nil, 1},
		{"HTTP 401", apistub.SlackToken, "fetch", "lookup_user_by_email", lookup, []apistub.Fault{{Status: 401}}, false,
			wantErr{errcode.ServiceAuthFailed, errcode.ActionStop, false, nil}, nil, 1},
		{"HTTP 404", apistub.SlackToken, "fetch", "lookup_user_by_email", lookup, []apistub.Fault{{Status: 404}}, false,
			wantErr{errcode.ServiceNotFound, errcode.ActionProvideInput, false, nil}, nil, 1},
		{"429 with Retry-After: waited, then sent again", apistub.SlackToken, "create", "post_message", post, []apistub.Fault{limited}, false,
			wantErr{}, []time.Duration{3 * time.Second}, 2},
		{"429 every time: rate limited with retry_after", apistub.SlackToken, "create", "post_message", post, []apistub.Fault{limited, limited, limited, limited}, false,
			wantErr{errcode.ServiceRateLimited, errcode.ActionWaitAndProceed, true, 3.0}, []time.Duration{3 * time.Second, 3 * time.Second, 3 * time.Second}, 4},
		{"429 without Retry-After: rate limited at once", apistub.SlackToken, "create", "post_message", post, []apistub.Fault{{Status: 429}}, false,
			wantErr{errcode.ServiceRateLimited, errcode.ActionWaitAndProceed, true, nil}, nil, 1},
		{"HTTP 5xx: report_to_user, retryable", apistub.SlackToken, "fetch", "lookup_user_by_email", lookup, []apistub.Fault{{Status: 503, Body: "<html>"}}, false,
			wantErr{errcode.ServiceHTTP5xx, errcode.ActionReportToUser, true, nil}, nil, 1},
		{"internal_error on an update: retryable", apistub.SlackToken, "update", "update_message", update, okFalse("internal_error"), false,
			wantErr{errcode.ServiceHTTP5xx, errcode.ActionReportToUser, true, nil}, nil, 1},
		{"internal_error on a post: not retried (it may have been posted)", apistub.SlackToken, "create", "post_message", post, okFalse("internal_error"), false,
			wantErr{errcode.ServiceHTTP5xx, errcode.ActionReportToUser, false, nil}, nil, 1},
		{"malformed body", apistub.SlackToken, "fetch", "lookup_user_by_email", lookup, []apistub.Fault{{Status: 200, Body: `{"ok":tru`}}, false,
			wantErr{errcode.ServiceResponseInvalid, errcode.ActionReportToUser, false, nil}, nil, 1},
		{"network failure on a lookup: retryable", apistub.SlackToken, "fetch", "lookup_user_by_email", lookup, nil, true,
			wantErr{errcode.NetworkUnreachable, errcode.ActionWaitForHuman, true, nil}, nil, 0},
		{"network failure on a post: not retried", apistub.SlackToken, "create", "post_reply", map[string]any{"channel": "C0123", "thread_ts": "1.1", "text": "x"}, nil, true,
			wantErr{errcode.NetworkUnreachable, errcode.ActionWaitForHuman, false, nil}, nil, 0},
		{"unknown operation", apistub.SlackToken, "create", "post_ephemeral", post, nil, false,
			wantErr{errcode.AdapterOpUnsupported, errcode.ActionReportToUser, false, nil}, nil, 0},
		{"missing method", apistub.SlackToken, "delete", "post_message", post, nil, false,
			wantErr{errcode.AdapterOpUnsupported, errcode.ActionReportToUser, false, nil}, nil, 0},
		{"bad params: no text", apistub.SlackToken, "create", "post_message", map[string]any{"channel": "C0123"}, nil, false,
			wantErr{errcode.AdapterValidationFailed, errcode.ActionProvideInput, false, nil}, nil, 0},
		{"bad params: a block that is not an object", apistub.SlackToken, "create", "post_message", map[string]any{"channel": "C0123", "text": "x", "blocks": []any{"section"}}, nil, false,
			wantErr{errcode.AdapterValidationFailed, errcode.ActionProvideInput, false, nil}, nil, 0},
		{"bad params: post_reply without thread_ts", apistub.SlackToken, "create", "post_reply", post, nil, false,
			wantErr{errcode.AdapterValidationFailed, errcode.ActionProvideInput, false, nil}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stub, a, clock := slackAdapter(t, tt.token)
			stub.Answer(tt.faults...)
			if tt.closed {
				stub.Close()
			}
			out, err := ghCall(t, a, tt.method, tt.op, tt.params, nil)
			if got := clock.recorded(); !slices.Equal(got, tt.wantSleeps) {
				t.Errorf("sleeps = %v, want %v", got, tt.wantSleeps)
			}
			if !tt.closed {
				if n := len(stub.Requests()); n != tt.wantSent {
					t.Errorf("%d requests, want %d", n, tt.wantSent)
				}
			}
			if tt.want.code == "" {
				if err != nil {
					t.Fatalf("error %s: %s", err.Code, err.Message)
				}
				if got := out.(map[string]any)["data"].(map[string]any)["ok"]; got != true {
					t.Errorf("data = %v", out)
				}
				return
			}
			tt.want.check(t, err)
		})
	}
}

func TestSlackConstructionRefusesWhatItDoesNotActOn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, config, want string
	}{
		{"no bot_token", `{base_url: 'http://127.0.0.1:1/api'}`, "config.bot_token is required"},
		{"an empty secret", `{bot_token: ''}`, "config.bot_token is required (it is empty"},
		{"an unknown key", `{bot_token: x, webhook_url: 'https://hooks.slack.com/x'}`, "config: unknown key 'webhook_url' (known: base_url, bot_token)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, t.TempDir(), "realm.yaml", "version: 1\nadapters:\n  chat:\n    use: slack\n    config: "+tt.config+"\n")
			_, err := loadManifest(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "constructing adapters.chat (use: slack) failed") {
				t.Errorf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestSlackStepAbortedWhenTheStepsTimeHasPassed(t *testing.T) {
	t.Parallel()
	stub, a, _ := slackAdapter(t, apistub.SlackToken)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ghCallCtx(ctx, t, a, "create", "post_message", map[string]any{"channel": "C0123", "text": "hi"}, nil)
	wantErr{errcode.StepAborted, errcode.ActionReportToUser, false, nil}.check(t, err)
	if n := len(stub.Requests()); n != 0 {
		t.Errorf("%d requests sent after the step's time passed", n)
	}
}
