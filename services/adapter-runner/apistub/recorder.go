// Package apistub holds local stand-ins for the outside APIs the catalog
// adapters speak to: httptest servers that answer like the real service
// for a small fixed data set, record every request, and fail on demand
// (a status, a Retry-After, a malformed body; closing the server is a
// network failure). Each stub comes with an Example: a manifest config
// pointing at the stub, one operation, its params and the data it answers.
package apistub

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
)

// Request is one request a stub received.
type Request struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   string
}

// Fault is a canned answer given instead of the stub's own.
type Fault struct {
	Status int
	Header map[string]string
	Body   string
}

// Example is one call of a catalog adapter against its stub: the manifest
// entry (use, config), the step's service_method, operation and params,
// and the output data the adapter answers.
type Example struct {
	Use       string
	Config    map[string]any
	Method    string
	Operation string
	Params    map[string]any
	Data      any
}

// recorder is what every stub shares: the server, the requests, the
// faults queued for the next requests.
type recorder struct {
	mu       sync.Mutex
	requests []Request
	faults   []Fault
	srv      *httptest.Server
}

func newRecorder(t testing.TB, h func(w http.ResponseWriter, r *http.Request, body []byte)) *recorder {
	rec := &recorder{}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.requests = append(rec.requests, Request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), string(body)})
		var f *Fault
		if len(rec.faults) > 0 {
			f = &rec.faults[0]
			rec.faults = rec.faults[1:]
		}
		rec.mu.Unlock()
		if f != nil {
			for k, v := range f.Header {
				w.Header().Set(k, v)
			}
			w.WriteHeader(f.Status)
			_, _ = io.WriteString(w, f.Body)
			return
		}
		h(w, r, body)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

// Requests are the requests received so far.
func (r *recorder) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.requests)
}

// Fail answers the next len(faults) requests with faults, in order.
func (r *recorder) Fail(faults ...Fault) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = append(r.faults, faults...)
}

// Close stops the server: the next request meets a network failure.
func (r *recorder) Close() { r.srv.Close() }

// Host is the server's host:port.
func (r *recorder) Host() string { return r.srv.Listener.Addr().String() }
