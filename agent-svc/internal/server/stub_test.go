package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// wireRequest is what a stub saw of one model request.
type wireRequest struct {
	Path   string
	System string
	User   string
	Body   map[string]any
}

// answer is what a stub replies: an HTTP status (0 is 200), headers, and
// for a 200 the JSON object the model "answers". body, when set, is the
// error body of a failing status (else a rate-limit error).
type answer struct {
	status  int
	headers map[string]string
	output  map[string]any
	body    string
	// usage, when set, is the Anthropic usage block reported instead of
	// the default (40 in, 7 out, nothing cached).
	usage map[string]any
}

// stub is a model service on 127.0.0.1 speaking the Anthropic Messages or
// the OpenAI Chat Completions wire format. decide picks each answer.
type stub struct {
	srv      *httptest.Server
	mu       sync.Mutex
	requests []wireRequest
	inFlight atomic.Int64
	maxIn    atomic.Int64
	// holdFirst, when set, holds the first request until it is closed or
	// the request is cancelled (cancelled then counts it).
	holdFirst chan struct{}
	cancelled atomic.Int64
}

func (s *stub) URL() string { return s.srv.URL }

func (s *stub) seen() []wireRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]wireRequest(nil), s.requests...)
}

func newStub(t *testing.T, kind string, decide func(n int, r wireRequest) answer) *stub {
	t.Helper()
	return newStubHolding(t, kind, decide, nil)
}

// newStubHolding is newStub whose first request waits for hold (nil: none).
func newStubHolding(t *testing.T, kind string, decide func(n int, r wireRequest) answer, hold chan struct{}) *stub {
	t.Helper()
	s := &stub{holdFirst: hold}
	var count atomic.Int64
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		cur := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		for {
			m := s.maxIn.Load()
			if cur <= m || s.maxIn.CompareAndSwap(m, cur) {
				break
			}
		}
		raw, _ := io.ReadAll(req.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		wr := wireRequest{Path: req.URL.Path, Body: body}
		switch kind {
		case "anthropic":
			if sys, ok := body["system"].([]any); ok && len(sys) > 0 {
				wr.System, _ = sys[0].(map[string]any)["text"].(string)
			}
			msgs, _ := body["messages"].([]any)
			if len(msgs) > 0 {
				content, _ := msgs[len(msgs)-1].(map[string]any)["content"].([]any)
				if len(content) > 0 {
					wr.User, _ = content[0].(map[string]any)["text"].(string)
				}
			}
		default:
			msgs, _ := body["messages"].([]any)
			for _, m := range msgs {
				mm, _ := m.(map[string]any)
				text, _ := mm["content"].(string)
				switch mm["role"] {
				case "system":
					wr.System = text
				case "user":
					wr.User = text
				}
			}
		}
		s.mu.Lock()
		s.requests = append(s.requests, wr)
		s.mu.Unlock()
		n := int(count.Add(1))
		if n == 1 && s.holdFirst != nil {
			select {
			case <-s.holdFirst:
			case <-req.Context().Done():
				s.cancelled.Add(1)
				return
			}
		}
		a := decide(n, wr)
		for k, v := range a.headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		if a.status != 0 && a.status != http.StatusOK {
			w.WriteHeader(a.status)
			switch {
			case a.body != "":
				_, _ = io.WriteString(w, a.body)
			case kind == "anthropic":
				_, _ = io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)
			default:
				_, _ = io.WriteString(w, `{"error":{"message":"slow down","type":"rate_limit","param":null,"code":null}}`)
			}
			return
		}
		out, _ := json.Marshal(a.output)
		if kind == "anthropic" {
			usage := a.usage
			if usage == nil {
				usage = map[string]any{"input_tokens": 40, "output_tokens": 7, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
			}
			_ = json.NewEncoder(w).Encode(map[string]any{
				"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
				"content":     []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "__realm_submit__", "input": json.RawMessage(out)}},
				"stop_reason": "tool_use", "stop_sequence": nil,
				"usage": usage,
			})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "logprobs": nil,
				"message": map[string]any{"role": "assistant", "content": string(out), "refusal": nil}}},
			"usage": map[string]any{"prompt_tokens": 40, "completion_tokens": 7, "total_tokens": 47},
		})
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// triageAnswers answers the triage and one-step workflows by prompt.
func triageAnswers(_ int, r wireRequest) answer {
	switch {
	case strings.Contains(r.User, "Classify ticket"):
		return answer{output: map[string]any{"category": "billing", "confidence": 0.9}}
	case strings.Contains(r.User, "Answer question"):
		return answer{output: map[string]any{"answer": "42"}}
	default:
		return answer{output: map[string]any{"reply": "We have refunded the charge."}}
	}
}
