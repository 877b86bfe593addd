package events_test

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/realm-go/realm/notify-svc/events"
)

const secret = "8f742231b10e8888abcd99yyyzzz85a5"

func TestOnlySignedFreshEventsAreAccepted(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	var got []events.Message
	seen := map[string]bool{}
	h := events.Handler(events.Options{
		SigningSecret: secret, Now: func() time.Time { return now },
		Seen: func(_ context.Context, id string) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			was := seen[id]
			seen[id] = true
			return was, nil
		},
		OnMessage: func(_ context.Context, m events.Message) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, m)
		},
	})
	stamp := strconv.FormatInt(now.Unix(), 10)
	reply := `{"type":"event_callback","event_id":"Ev1","event":{"type":"message","thread_ts":"1.1","user":"U1","text":"send","ts":"1.2"}}`
	cases := []struct {
		name, method, path, stamp, sig, body string
		code                                 int
		out                                  string
	}{
		{"another path", "POST", "/events", stamp, "", reply, 404, ""},
		{"a GET", "GET", "/slack/events", stamp, "", reply, 404, ""},
		{"no signature", "POST", "/slack/events", stamp, "-", reply, 403, `{"error":"missing Slack signature headers","error_code":"ENGINE_UNAUTHENTICATED"}`},
		{"no timestamp", "POST", "/slack/events", "", "", reply, 403, `{"error":"missing Slack signature headers","error_code":"ENGINE_UNAUTHENTICATED"}`},
		{"a timestamp that is no number", "POST", "/slack/events", "soon", "", reply, 400, `{"error":"X-Slack-Request-Timestamp is not a number","error_code":"VALIDATION_INPUT_SCHEMA"}`},
		{"a stale timestamp", "POST", "/slack/events", strconv.FormatInt(now.Unix()-301, 10), "", reply, 403, `{"error":"stale request","error_code":"ENGINE_UNAUTHENTICATED"}`},
		{"a wrong signature", "POST", "/slack/events", stamp, "v0=00", reply, 403, `{"error":"bad signature","error_code":"ENGINE_UNAUTHENTICATED"}`},
		{"a signed body that is no JSON", "POST", "/slack/events", stamp, "", "{", 400, `{"error":"not JSON","error_code":"VALIDATION_INPUT_SCHEMA"}`},
		{"url_verification", "POST", "/slack/events", stamp, "", `{"type":"url_verification","challenge":"c-42"}`, 200, `{"challenge":"c-42"}`},
		{"a reply in a thread", "POST", "/slack/events", stamp, "", reply, 200, ""},
		{"the same event again", "POST", "/slack/events", stamp, "", reply, 200, ""},
		{"a bot's message", "POST", "/slack/events", stamp, "", strings.Replace(reply, `"Ev1"`, `"Ev2"`, 1)[:len(reply)-2] + `,"bot_id":"B1"}}`, 200, ""},
		{"a message outside a thread", "POST", "/slack/events", stamp, "", strings.Replace(strings.Replace(reply, `"Ev1"`, `"Ev3"`, 1), `"thread_ts":"1.1",`, "", 1), 200, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
			if c.stamp != "" {
				r.Header.Set("X-Slack-Request-Timestamp", c.stamp)
			}
			switch c.sig {
			case "":
				r.Header.Set("X-Slack-Signature", events.Sign(secret, c.stamp, []byte(c.body)))
			case "-":
			default:
				r.Header.Set("X-Slack-Signature", c.sig)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != c.code || (c.out != "" && strings.TrimSpace(w.Body.String()) != c.out) {
				t.Errorf("%s %s = %d %q", c.method, c.path, w.Code, w.Body.String())
			}
		})
	}
	if len(got) != 1 || got[0] != (events.Message{ThreadTS: "1.1", User: "U1", Text: "send", TS: "1.2"}) {
		t.Errorf("messages handed on = %+v", got)
	}
}
