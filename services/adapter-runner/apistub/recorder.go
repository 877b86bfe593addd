// Package apistub holds local stand-ins of the outside services the
// catalog adapters call: httptest servers that keep the service's state,
// answer like its API (paths, bodies, errors) and record every request.
// Tests switch on failures (401, 404, 429 with or without Retry-After,
// 5xx, a malformed body); a network failure is the stub closed.
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
	// Path is the URL's path, unescaped; RawPath keeps the escaping.
	Path, RawPath string
	Query         url.Values
	Header        http.Header
	Body          string
}

// Fault is an answer a stub gives instead of the service's, to the next
// requests (see Stub.Fail).
type Fault struct {
	Status int
	Header map[string]string
	Body   string
}

// Malformed is a 200 whose body is not JSON.
var Malformed = Fault{Status: http.StatusOK, Header: map[string]string{"Content-Type": "application/json"}, Body: `<html>upstream proxy</html>`}

// stub is the plumbing every service stub shares: the server, the
// recording and the faults.
type stub struct {
	srv *httptest.Server

	mu       sync.Mutex
	requests []Request
	faults   []Fault
}

// start serves handle behind the recording and the faults; t.Cleanup
// closes the server.
func (s *stub) start(t testing.TB, handle http.HandlerFunc) {
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, RawPath: r.URL.EscapedPath(),
			Query: r.URL.Query(), Header: r.Header.Clone(), Body: string(body)})
		var fault *Fault
		if len(s.faults) > 0 {
			fault = &s.faults[0]
			s.faults = s.faults[1:]
		}
		s.mu.Unlock()
		if fault != nil {
			for k, v := range fault.Header {
				w.Header().Set(k, v)
			}
			w.WriteHeader(fault.Status)
			_, _ = io.WriteString(w, fault.Body)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		handle(w, r)
	}))
	t.Cleanup(s.srv.Close)
}

// Fail makes the next len(faults) requests answer the faults, in order.
func (s *stub) Fail(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, faults...)
}

// Requests are the requests received so far.
func (s *stub) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Close stops the server: calls to it fail as the network does.
func (s *stub) Close() { s.srv.Close() }

// URL is the stub's base URL (the adapter's base_url).
func (s *stub) url(path string) string { return s.srv.URL + path }

// Example is one adapter call against a stub, for end-to-end tests: a
// manifest entry (use, config with ${secret:…} references, the secrets'
// values), the call, and the output the step records.
type Example struct {
	Use     string
	Config  map[string]any
	Secrets map[string]string
	Method  string
	// Operation and Params are the step's operation and input.
	Operation string
	Params    map[string]any
	// Data is the step's expected output: the adapter's data.
	Data any
}

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
