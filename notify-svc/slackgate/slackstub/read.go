package slackstub

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// The reads answer like Slack's: conversations.history holds the
// channel's messages (thread replies only in their thread), newest first,
// within oldest/latest (exclusive unless inclusive=1); conversations.replies
// the thread's parent, then its replies, oldest first. Both page with limit
// (default 100 here) and an opaque cursor.

// message is a post as Slack's API gives it back; a post made with a
// token is a bot's (bot_id).
func (p Post) message() map[string]any {
	m := map[string]any{"type": "message", "text": p.Text, "ts": p.TS}
	if strings.HasPrefix(p.Auth, "Bearer ") {
		m["bot_id"], m["user"], m["app_id"] = "B0STUB", "U0STUBBOT", "A0STUB"
	}
	if p.ThreadTS != "" {
		m["thread_ts"] = p.ThreadTS
	}
	if len(p.blocks) > 0 {
		m["blocks"] = json.RawMessage(p.blocks)
	}
	return m
}

// read records the call and parses its form; false when it was answered
// (a denial).
func (s *Stub) read(w http.ResponseWriter, r *http.Request, method string) bool {
	_ = r.ParseForm()
	s.mu.Lock()
	s.calls = append(s.calls, method)
	deny := s.denyReads
	s.mu.Unlock()
	if deny != "" {
		writeJSON(w, map[string]any{"ok": false, "error": deny, "needed": "channels:history", "provided": "chat:write"})
		return false
	}
	return true
}

func (s *Stub) history(w http.ResponseWriter, r *http.Request) {
	if !s.read(w, r, "conversations.history") {
		return
	}
	channel, inclusive := r.Form.Get("channel"), r.Form.Get("inclusive") == "1"
	oldest, latest := r.Form.Get("oldest"), r.Form.Get("latest")
	var msgs []map[string]any
	for _, p := range s.Posts() {
		if p.Channel != channel || p.ThreadTS != "" || p.TS == "" {
			continue
		}
		if oldest != "" && (tsLess(p.TS, oldest) || (!inclusive && p.TS == oldest)) {
			continue
		}
		if latest != "" && (tsLess(latest, p.TS) || (!inclusive && p.TS == latest)) {
			continue
		}
		msg := p.message()
		if n := s.replyCount(p.TS); n > 0 {
			msg["thread_ts"], msg["reply_count"] = p.TS, n
		}
		msgs = append(msgs, msg)
	}
	slices.Reverse(msgs)
	page, more, next := paged(msgs, r)
	writeJSON(w, map[string]any{"ok": true, "messages": page, "has_more": more, "response_metadata": map[string]any{"next_cursor": next}})
}

func (s *Stub) replies(w http.ResponseWriter, r *http.Request) {
	if !s.read(w, r, "conversations.replies") {
		return
	}
	channel, ts := r.Form.Get("channel"), r.Form.Get("ts")
	var msgs []map[string]any
	for _, p := range s.Posts() {
		if p.Channel != channel {
			continue
		}
		if p.TS == ts && p.ThreadTS == "" {
			parent := p.message()
			parent["thread_ts"] = ts
			msgs = append([]map[string]any{parent}, msgs...)
		} else if p.ThreadTS == ts {
			msgs = append(msgs, p.message())
		}
	}
	if len(msgs) == 0 || msgs[0]["ts"] != ts {
		writeJSON(w, map[string]any{"ok": false, "error": "thread_not_found"})
		return
	}
	page, more, next := paged(msgs, r)
	writeJSON(w, map[string]any{"ok": true, "messages": page, "has_more": more, "response_metadata": map[string]any{"next_cursor": next}})
}

func (s *Stub) replyCount(ts string) int {
	n := 0
	for _, p := range s.Posts() {
		if p.ThreadTS == ts {
			n++
		}
	}
	return n
}

// paged is the page the form's cursor and limit ask for.
func paged(msgs []map[string]any, r *http.Request) (page []map[string]any, more bool, next string) {
	limit, _ := strconv.Atoi(r.Form.Get("limit"))
	if limit <= 0 {
		limit = 100
	}
	from, _ := strconv.Atoi(strings.TrimPrefix(r.Form.Get("cursor"), "off:"))
	from = min(max(from, 0), len(msgs))
	to := min(from+limit, len(msgs))
	if to < len(msgs) {
		next = "off:" + strconv.Itoa(to)
	}
	page = msgs[from:to]
	if page == nil {
		page = []map[string]any{}
	}
	return page, next != "", next
}

// tsLess compares two Slack ts ("<seconds>.<microseconds>") as numbers.
func tsLess(a, b string) bool {
	as, af, _ := strings.Cut(a, ".")
	bs, bf, _ := strings.Cut(b, ".")
	ai, _ := strconv.ParseInt(as, 10, 64)
	bi, _ := strconv.ParseInt(bs, 10, 64)
	if ai != bi {
		return ai < bi
	}
	return (af + "000000")[:6] < (bf + "000000")[:6]
}
