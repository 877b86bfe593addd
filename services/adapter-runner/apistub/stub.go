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
	RawQuery      string
	Query         url.Values
	Header        http.Header
	Body          string
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
	// faults are raw answers given, in order, before any other.
	faults []Fault
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
		s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, RawPath: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery,
			Query: r.URL.Query(), Header: r.Header.Clone(), Body: string(body)})
		if len(s.faults) > 0 {
			fault := s.faults[0]
			s.faults = s.faults[1:]
			s.mu.Unlock()
			for k, v := range fault.Header {
				w.Header().Set(k, v)
			}
			w.WriteHeader(fault.Status)
			_, _ = io.WriteString(w, fault.Body)
			return
		}
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
			var body any = map[string]any{"error": http.StatusText(f.Status)}
			if s.errBody != nil {
				body = s.errBody(f.Status)
			}
			writeJSON(w, f.Status, body)
		}
	}))
	t.Cleanup(s.srv.Close)
}

// startReading is start for a handler that takes the body read.
func (s *stub) startReading(t testing.TB, handle func(w http.ResponseWriter, r *http.Request, body []byte)) {
	s.start(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		handle(w, r, body)
	})
}

// Host is the server's host:port.
func (s *stub) Host() string { return s.srv.Listener.Addr().String() }

// Fail makes the next answers fail as f says.
func (s *stub) Fail(f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failure, s.failed = &f, 0
}

// Answer makes the next len(faults) requests answer the faults, in
// order, before any Failure.
func (s *stub) Answer(faults ...Fault) {
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

// Close shuts the server: its address then refuses connections (the
// network failure of spec §13.4).
func (s *stub) Close() { s.srv.Close() }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
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

// URL is the stub's base URL (the adapter's base_url).
func (s *stub) url(path string) string { return s.srv.URL + path }
