package mcpserver

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// nullWriter is a ResponseWriter that keeps nothing, so the benchmark
// counts Guard's allocations only.
type nullWriter struct{ h http.Header }

func (w nullWriter) Header() http.Header       { return w.h }
func (nullWriter) Write(b []byte) (int, error) { return len(b), nil }
func (nullWriter) WriteHeader(int)             {}

// BenchmarkGuard is Guard's own work on one accepted tools/call (token,
// origin, body read and checks), in front of a handler that reads the body.
func BenchmarkGuard(b *testing.B) {
	const body = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"execute_step","arguments":{"run_id":"r_0123456789","command":"answer","params":{"ok":true}}}}`
	h := Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}), GuardOptions{Token: "bench-token", ErrorLog: io.Discard})
	r, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
	r.Header.Set("Authorization", "Bearer bench-token")
	r.Header.Set("Accept", okAccept)
	r.Header.Set("Content-Type", "application/json")
	w := nullWriter{h: http.Header{}}
	src := strings.NewReader(body)
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(body)
		r.Body = io.NopCloser(src)
		r.ContentLength = int64(len(body))
		h.ServeHTTP(w, r)
	}
}
