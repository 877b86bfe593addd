// Package slackstub is a local stand-in for the Slack Web API's
// chat.postMessage and for an incoming webhook, recording every post, for
// tests of what notify-svc says.
package slackstub

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// Post is one message the stub received.
type Post struct {
	Channel, Text, ThreadTS string
	// Block is the text of the first mrkdwn section block ("" if none).
	Block string
	// TS is the ts the stub answered with ("" for a webhook post).
	TS   string
	Auth string
}

// Stub serves chat.postMessage under /api/ and an incoming webhook at /hook.
type Stub struct {
	srv   *httptest.Server
	mu    sync.Mutex
	posts []Post
}

// Start serves a stub until the test ends.
func Start(t testing.TB) *Stub {
	s := &Stub{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/chat.postMessage", s.postMessage)
	mux.HandleFunc("POST /hook", s.hook)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

// APIURL is the Web API base URL to give slack.OptionAPIURL.
func (s *Stub) APIURL() string { return s.srv.URL + "/api/" }

// WebhookURL is the incoming webhook's URL.
func (s *Stub) WebhookURL() string { return s.srv.URL + "/hook" }

// Posts returns every post so far, in order.
func (s *Stub) Posts() []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Post(nil), s.posts...)
}

type blocks []struct {
	Type string `json:"type"`
	Text struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"text"`
}

func (b blocks) first() string {
	for _, x := range b {
		if x.Type == "section" && x.Text.Type == "mrkdwn" {
			return x.Text.Text
		}
	}
	return ""
}

func (s *Stub) postMessage(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	form, err := url.ParseQuery(string(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var b blocks
	if raw := form.Get("blocks"); raw != "" {
		_ = json.Unmarshal([]byte(raw), &b)
	}
	s.mu.Lock()
	ts := fmt.Sprintf("1700000000.%06d", len(s.posts)+1)
	auth := r.Header.Get("Authorization")
	if auth == "" && form.Get("token") != "" {
		auth = "Bearer " + form.Get("token")
	}
	s.posts = append(s.posts, Post{Channel: form.Get("channel"), Text: form.Get("text"), ThreadTS: form.Get("thread_ts"),
		Block: b.first(), TS: ts, Auth: auth})
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": form.Get("channel"), "ts": ts})
}

func (s *Stub) hook(w http.ResponseWriter, r *http.Request) {
	var msg struct {
		Text   string `json:"text"`
		Blocks blocks `json:"blocks"`
	}
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.posts = append(s.posts, Post{Text: msg.Text, Block: msg.Blocks.first()})
	s.mu.Unlock()
	_, _ = io.WriteString(w, "ok")
}
