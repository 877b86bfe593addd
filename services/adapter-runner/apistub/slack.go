package apistub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// SlackToken is the bot token the Slack stub accepts.
const SlackToken = "xoxb-stub-token"

// Slack stands in for Slack's Web API (below /api): chat.postMessage,
// chat.update, reactions.add, users.lookupByEmail and users.info, for
// channel C0123 (also reachable as "general" or "#general") and member
// U042 (ada@example.com). Like Slack it answers HTTP 200 with
// {"ok": false, "error": …} for a bad token (invalid_auth), an unknown
// channel, message or user, and a reaction already there. The token is
// read from the form's token field or an Authorization: Bearer header.
type Slack struct {
	stub
	mu        sync.Mutex
	next      int
	messages  map[string]string // ts → text, in C0123
	reactions map[string]bool   // ts + name
}

// NewSlack starts the stub; it stops when the test ends.
func NewSlack(t testing.TB) *Slack {
	s := &Slack{next: 100, messages: map[string]string{"1700000000.000100": "Deploy started"}, reactions: map[string]bool{}}
	s.startReading(t, s.serve)
	return s
}

// URL is the stub's base URL (the adapter's base_url), like
// https://slack.com/api.
func (s *Slack) URL() string { return s.srv.URL + "/api" }

// SlackExample posts in the thread of the stub's first message.
func SlackExample(stub *Slack) Example {
	return Example{
		Adapter:   "slack",
		Config:    map[string]any{"base_url": stub.URL(), "bot_token": "${secret:SLACK_BOT_TOKEN}"},
		Env:       map[string]string{"SLACK_BOT_TOKEN": SlackToken},
		Method:    "create",
		Operation: "post_reply",
		Params:    map[string]any{"channel": "C0123", "thread_ts": "1700000000.000100", "text": "Deploy finished."},
		Output:    map[string]any{"ok": true, "channel": "C0123", "ts": "1700000000.000101"},
	}
}

// SlackUser is member U042 as users.info and users.lookupByEmail give it.
var SlackUser = map[string]any{
	"id": "U042", "team_id": "T001", "name": "ada", "real_name": "Ada Lovelace", "tz": "Europe/London", "is_bot": false, "deleted": false,
	"profile": map[string]any{"real_name": "Ada Lovelace", "display_name": "ada", "email": "ada@example.com", "title": "Analyst"},
}

func (s *Slack) serve(w http.ResponseWriter, r *http.Request, body []byte) {
	form, _ := url.ParseQuery(string(body))
	if r.Method != http.MethodPost {
		slackAnswer(w, map[string]any{"ok": false, "error": "invalid_request"})
		return
	}
	token := form.Get("token")
	if token == "" {
		token = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if token == "" {
		slackAnswer(w, map[string]any{"ok": false, "error": "not_authed"})
		return
	}
	if token != SlackToken {
		slackAnswer(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch strings.TrimPrefix(r.URL.Path, "/api/") {
	case "chat.postMessage":
		if !slackChannel(form.Get("channel")) {
			slackAnswer(w, map[string]any{"ok": false, "error": "channel_not_found"})
			return
		}
		if thread := form.Get("thread_ts"); thread != "" && s.messages[thread] == "" {
			slackAnswer(w, map[string]any{"ok": false, "error": "thread_not_found"})
			return
		}
		if form.Get("blocks") != "" && !json.Valid([]byte(form.Get("blocks"))) {
			slackAnswer(w, map[string]any{"ok": false, "error": "invalid_blocks"})
			return
		}
		s.next++
		ts := fmt.Sprintf("1700000000.%06d", s.next)
		s.messages[ts] = form.Get("text")
		slackAnswer(w, map[string]any{"ok": true, "channel": "C0123", "ts": ts, "message": map[string]any{"text": form.Get("text"), "ts": ts}})
	case "chat.update":
		if !slackChannel(form.Get("channel")) {
			slackAnswer(w, map[string]any{"ok": false, "error": "channel_not_found"})
			return
		}
		ts := form.Get("ts")
		if s.messages[ts] == "" {
			slackAnswer(w, map[string]any{"ok": false, "error": "message_not_found"})
			return
		}
		s.messages[ts] = form.Get("text")
		slackAnswer(w, map[string]any{"ok": true, "channel": "C0123", "ts": ts, "text": form.Get("text")})
	case "reactions.add":
		ts, name := form.Get("timestamp"), form.Get("name")
		switch {
		case !slackChannel(form.Get("channel")):
			slackAnswer(w, map[string]any{"ok": false, "error": "channel_not_found"})
		case s.messages[ts] == "":
			slackAnswer(w, map[string]any{"ok": false, "error": "message_not_found"})
		case s.reactions[ts+name]:
			slackAnswer(w, map[string]any{"ok": false, "error": "already_reacted"})
		default:
			s.reactions[ts+name] = true
			slackAnswer(w, map[string]any{"ok": true})
		}
	case "users.lookupByEmail":
		if form.Get("email") != "ada@example.com" {
			slackAnswer(w, map[string]any{"ok": false, "error": "users_not_found"})
			return
		}
		slackAnswer(w, map[string]any{"ok": true, "user": SlackUser})
	case "users.info":
		if form.Get("user") != "U042" {
			slackAnswer(w, map[string]any{"ok": false, "error": "user_not_found"})
			return
		}
		slackAnswer(w, map[string]any{"ok": true, "user": SlackUser})
	default:
		slackAnswer(w, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

func slackChannel(c string) bool { return c == "C0123" || c == "general" || c == "#general" }

func slackAnswer(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}
