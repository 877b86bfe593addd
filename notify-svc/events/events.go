// Package events serves the Slack Events API for notify-svc: replies in a
// gate's thread come in as signed HTTP requests (agent-driver §14.3).
package events

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/realm-go/realm/pkg/errcode"
)

// Message is a person's message in a thread.
type Message struct {
	ThreadTS, User, Text, TS string
}

// Options configure the handler.
type Options struct {
	SigningSecret string
	// Seen reports whether an event id was seen before, remembering it
	// (shared by every replica, so a retry to another one is dropped).
	Seen func(ctx context.Context, eventID string) (bool, error)
	// OnMessage receives each accepted message, after Slack has its 200.
	OnMessage func(ctx context.Context, m Message)
	Now       func() time.Time
	// Timeout bounds the handling of one message (default 30s).
	Timeout time.Duration
}

// maxBody bounds a request: Slack's events are small.
const maxBody = 1 << 20

// Handler serves POST /slack/events only (anything else is 404): the
// timestamp and signature headers are required (403), the timestamp must
// be a number (400) within 300 s of now (403), the signature v0=hex(HMAC-
// SHA256(secret, "v0:<ts>:<body>")) must match in constant time (403).
func Handler(o Options) http.Handler {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/slack/events" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		stamp, sig := r.Header.Get("X-Slack-Request-Timestamp"), r.Header.Get("X-Slack-Signature")
		if stamp == "" || sig == "" {
			refuse(w, http.StatusForbidden, errcode.EngineUnauthenticated, "missing Slack signature headers")
			return
		}
		secs, err := strconv.ParseInt(stamp, 10, 64)
		if err != nil {
			refuse(w, http.StatusBadRequest, errcode.ValidationInputSchema, "X-Slack-Request-Timestamp is not a number")
			return
		}
		if d := o.Now().Sub(time.Unix(secs, 0)); d > 300*time.Second || d < -300*time.Second {
			refuse(w, http.StatusForbidden, errcode.EngineUnauthenticated, "stale request")
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err != nil {
			refuse(w, http.StatusBadRequest, errcode.ValidationInputSchema, "unreadable body")
			return
		}
		if !hmac.Equal([]byte(sig), []byte(Sign(o.SigningSecret, stamp, body))) {
			refuse(w, http.StatusForbidden, errcode.EngineUnauthenticated, "bad signature")
			return
		}
		var env struct {
			Type      string `json:"type"`
			Challenge string `json:"challenge"`
			EventID   string `json:"event_id"`
			Event     struct {
				Type     string `json:"type"`
				Subtype  string `json:"subtype"`
				BotID    string `json:"bot_id"`
				ThreadTS string `json:"thread_ts"`
				User     string `json:"user"`
				Text     string `json:"text"`
				TS       string `json:"ts"`
			} `json:"event"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			refuse(w, http.StatusBadRequest, errcode.ValidationInputSchema, "not JSON")
			return
		}
		if env.Type == "url_verification" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"challenge": env.Challenge})
			return
		}
		// Slack has its answer first: it retries a slow one.
		w.WriteHeader(http.StatusOK)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		e := env.Event
		if env.Type != "event_callback" || e.Type != "message" || e.BotID != "" || e.Subtype == "bot_message" ||
			e.ThreadTS == "" || e.User == "" || e.TS == "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), o.Timeout)
		defer cancel()
		if env.EventID != "" && o.Seen != nil {
			if seen, err := o.Seen(ctx, env.EventID); err != nil || seen {
				return
			}
		}
		o.OnMessage(ctx, Message{ThreadTS: e.ThreadTS, User: e.User, Text: e.Text, TS: e.TS})
	})
}

// refuse answers a request notify-svc does not act on: the reason and its
// catalogue code, as JSON (Slack shows neither; an operator's curl does).
func refuse(w http.ResponseWriter, status int, code errcode.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg, "error_code": string(code)})
}

// Sign is the signature Slack sends for a body at a timestamp.
func Sign(secret, stamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + stamp + ":"))
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}
