// Package slackstub is a local stand-in for the Slack Web API's
// chat.postMessage, conversations.history and conversations.replies
// (answered from the posts it recorded), an incoming webhook and Socket
// Mode (apps.connections.open and its WebSocket), recording every post and
// every Web API call, for tests of what notify-svc says.
package slackstub

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Post is one message the stub received.
type Post struct {
	Channel, Text, ThreadTS string
	// Block is the text of the first mrkdwn section block ("" if none).
	Block string
	// TS is the ts the stub answered with ("" for a webhook post).
	TS   string
	Auth string
	// blocks is the post's blocks as sent, given back when it is read.
	blocks string
}

// Fate is what becomes of a chat.postMessage after the stub recorded it.
type Fate int

const (
	// Answer it, as Slack does.
	Answer Fate = iota
	// Hold the answer until the test ends or the client goes away: the
	// post is made and its poster never learns so.
	Hold
	// Drop the connection unanswered.
	Drop
	// Unavailable answers 503 and keeps nothing: the post never got in.
	Unavailable
	// Refuse answers Slack's {"ok": false, "error": "channel_not_found"}
	// and keeps nothing.
	Refuse
)

// Stub serves chat.postMessage under /api/ and an incoming webhook at /hook.
type Stub struct {
	srv   *httptest.Server
	mu    sync.Mutex
	posts []Post
	// Socket Mode: the open connection, the app token it was opened
	// with, and the envelope ids acknowledged.
	ws       *websocket.Conn
	appToken string
	acks     []string
	wsReady  chan struct{}
	// calls are the Web API methods called, in order.
	calls     []string
	now       func() time.Time
	lastMicro int64
	fate      func(Post) Fate
	held      chan Post
	release   chan struct{}
	denyReads string
}

// Start serves a stub until the test ends.
func Start(t testing.TB) *Stub {
	s := &Stub{wsReady: make(chan struct{}, 8), now: time.Now, held: make(chan Post, 16), release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/chat.postMessage", s.postMessage)
	mux.HandleFunc("POST /api/conversations.history", s.history)
	mux.HandleFunc("POST /api/conversations.replies", s.replies)
	mux.HandleFunc("POST /hook", s.hook)
	mux.HandleFunc("POST /api/apps.connections.open", s.connectionsOpen)
	mux.HandleFunc("GET /ws", s.socket)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	// Before Close, which waits for held answers.
	t.Cleanup(func() { close(s.release) })
	return s
}

// SetClock makes the stub's ts follow now (default time.Now), as a test
// clock moves the gates' opened_at.
func (s *Stub) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// SetFate decides, for each chat.postMessage, whether it is recorded and
// answered, held or dropped, or refused with a 503 (nil: every one
// answered).
func (s *Stub) SetFate(f func(Post) Fate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fate = f
}

// Held receives each post whose answer is being held.
func (s *Stub) Held() <-chan Post { return s.held }

// DenyReads makes conversations.history and conversations.replies answer
// Slack's error e (e.g. "missing_scope"; "" reads again).
func (s *Stub) DenyReads(e string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.denyReads = e
}

// Calls returns the Web API methods called so far, in order.
func (s *Stub) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
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
	s.calls = append(s.calls, "chat.postMessage")
	// Slack's ts: the post's time in microseconds, unique in the channel.
	micro := max(s.now().UnixMicro(), s.lastMicro+1)
	s.lastMicro = micro
	ts := fmt.Sprintf("%d.%06d", micro/1e6, micro%1e6)
	auth := r.Header.Get("Authorization")
	if auth == "" && form.Get("token") != "" {
		auth = "Bearer " + form.Get("token")
	}
	p := Post{Channel: form.Get("channel"), Text: form.Get("text"), ThreadTS: form.Get("thread_ts"),
		Block: b.first(), TS: ts, Auth: auth, blocks: form.Get("blocks")}
	fate := Answer
	if s.fate != nil {
		fate = s.fate(p)
	}
	if fate != Unavailable && fate != Refuse {
		s.posts = append(s.posts, p)
	}
	s.mu.Unlock()
	switch fate {
	case Refuse:
		writeJSON(w, map[string]any{"ok": false, "error": "channel_not_found"})
		return
	case Unavailable:
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	case Hold:
		s.held <- p
		select {
		case <-s.release:
		case <-r.Context().Done():
			return
		}
	case Drop:
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = c.Close()
		}
		return
	}
	writeJSON(w, map[string]any{"ok": true, "channel": form.Get("channel"), "ts": ts})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
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

func (s *Stub) connectionsOpen(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.appToken = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/ws"})
}

// Slack's client sends an Origin the stub's host does not match.
var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// socket says hello, then records the acknowledgements it reads.
func (s *Stub) socket(w http.ResponseWriter, r *http.Request) {
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	if err := c.WriteJSON(map[string]any{"type": "hello", "num_connections": 1, "connection_info": map[string]any{"app_id": "A0STUB"}}); err != nil {
		return
	}
	s.mu.Lock()
	s.ws = c
	s.mu.Unlock()
	s.wsReady <- struct{}{}
	for {
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if err := c.ReadJSON(&ack); err != nil {
			return
		}
		s.mu.Lock()
		s.acks = append(s.acks, ack.EnvelopeID)
		s.mu.Unlock()
	}
}

// Connected waits until a Socket Mode client has connected and had its
// hello; it returns the app token apps.connections.open was called with.
func (s *Stub) Connected(t testing.TB) string {
	t.Helper()
	select {
	case <-s.wsReady:
	case <-time.After(10 * time.Second):
		t.Fatal("no Socket Mode client connected within 10s")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appToken
}

// SendMessage sends an events_api envelope holding a message event.
func (s *Stub) SendMessage(t testing.TB, envelopeID, threadTS, user, text, botID string) {
	t.Helper()
	event := map[string]any{"type": "message", "channel": "C0GATES", "user": user, "text": text, "ts": "1700000099.000001", "thread_ts": threadTS}
	if botID != "" {
		event["bot_id"] = botID
	}
	env := map[string]any{"type": "events_api", "envelope_id": envelopeID, "accepts_response_payload": false,
		"payload": map[string]any{"type": "event_callback", "event_id": "Ev" + envelopeID, "event": event}}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ws.WriteJSON(env); err != nil {
		t.Fatal(err)
	}
}

// Acks returns the envelope ids acknowledged so far.
func (s *Stub) Acks() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.acks...)
}
