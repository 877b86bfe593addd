// Package apistub holds local stand-ins for the outside APIs the catalog
// adapters speak to: httptest servers that answer like the real service
// (its paths, auth, bodies and errors), record every request, and can be
// switched to fail (401, 404, other 4xx, 429 with or without Retry-After,
// 5xx, a malformed body, a hang, or a closed port). Tests of the adapters
// and the end-to-end tests use them; each stub has an Example: a manifest
// entry pointing at it, one call and the data it gives.
package apistub

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
)

// Request is one request a stub received.
type Request struct {
	Method string
	Path   string
	Query  url.Values
	Header http.Header
	Body   string
}

// JSON is the request's body decoded (nil when it is not JSON).
func (r Request) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal([]byte(r.Body), &m)
	return m
}

// Failure switches a stub's answers to a failure.
type Failure struct {
	// Status is the HTTP status to answer (401, 404, 422, 429, 500, …),
	// with the service's error body.
	Status int
	// RetryAfter is the Retry-After header of a 429 ("" sends none).
	RetryAfter string
	// Location is the Location header of a 3xx.
	Location string
	// Malformed answers 200 with a body that is not JSON.
	Malformed bool
	// Hang answers nothing until the client gives up.
	Hang bool
	// Times is how many requests fail before the stub answers normally
	// again; 0: all of them.
	Times int
}

// stub is what every stub shares: the server, the record, the failure
// switch.
type stub struct {
	srv      *httptest.Server
	mu       sync.Mutex
	requests []Request
	failure  *Failure
	failed   int
	// errBody is the service's error body for a status.
	errBody func(status int) any
}

// start serves route (called with the stub's lock not held) behind the
// recorder and the failure switch; t's cleanup closes the server.
func (s *stub) start(t testing.TB, route http.HandlerFunc) {
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.mu.Lock()
		s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone(), Body: string(body)})
		f := s.failure
		if f != nil {
			s.failed++
			if f.Times > 0 && s.failed >= f.Times {
				s.failure = nil
			}
		}
		s.mu.Unlock()
		switch {
		case f == nil:
			route(w, r)
		case f.Hang:
			<-r.Context().Done()
		case f.Malformed:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"data": [`)
		default:
			if f.RetryAfter != "" {
				w.Header().Set("Retry-After", f.RetryAfter)
			}
			if f.Location != "" {
				w.Header().Set("Location", f.Location)
			}
			writeJSON(w, f.Status, s.errBody(f.Status))
		}
	}))
	t.Cleanup(s.srv.Close)
}

// Fail makes the next answers fail as f says.
func (s *stub) Fail(f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failure, s.failed = &f, 0
}

// Requests are the requests received so far.
func (s *stub) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Close shuts the server: its address then refuses connections (the
// network failure of spec §13.4).
func (s *stub) Close() { s.srv.Close() }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
