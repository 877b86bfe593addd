package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits and replies of the HTTP transport (spec mcp-and-gates §1.2).
const (
	// MaxBodyBytes is the largest request body accepted (1 MiB).
	MaxBodyBytes = 1 << 20
	// RequestReadTimeout bounds reading a whole request, body included.
	RequestReadTimeout = 30 * time.Second
	// MaxBatch is the most JSON-RPC messages one request may carry.
	MaxBatch = 100

	TokenEnv = "REALM_SERVE_TOKEN"
	DevEnv   = "REALM_DEV"

	// DevWarning is printed before the listening line in dev mode.
	DevWarning = "Warning: Running in dev mode — authentication is disabled. Do not expose this to a network."
	// AuthLine is printed after the listening line when the token check is on.
	AuthLine = "Authentication: Bearer token (REALM_SERVE_TOKEN)"

	bodyUnauthorized  = `{"error":"Unauthorized"}`
	bodyInvalidJSON   = `{"error":"Invalid JSON in request body"}`
	bodyTooLarge      = `{"error":"Request body too large"}`
	bodyInternal      = `{"error":"Internal server error"}`
	bodyNotAcceptable = `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Not Acceptable: Client must accept both application/json and text/event-stream"},"id":null}`
	bodyBatchTooBig   = `{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: Batch must not exceed 100 messages"},"id":null}`
	bodyBadOrigin     = `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Forbidden: Origin not allowed"},"id":null}`
)

// ErrNoToken refuses a start with the token check on and no token. Its
// text is the original's two lines.
var ErrNoToken = errors.New("Error: " + TokenEnv + " is not set.\nSet it to a secret token, or use --dev / " + DevEnv + "=1 for local development only.")

// DevMode reports whether the token check is off: the --dev flag, or
// REALM_DEV=1.
func DevMode(flag bool, getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	return flag || strings.TrimSpace(getenv(DevEnv)) == "1"
}

// Token reads REALM_SERVE_TOKEN and decides whether the server may start:
// outside dev mode a token is required. In dev mode the token is ignored.
func Token(dev bool, getenv func(string) string) (string, error) {
	if dev {
		return "", nil
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	tok := getenv(TokenEnv)
	if tok == "" {
		return "", ErrNoToken
	}
	return tok, nil
}

// GuardOptions configure the checks in front of the MCP handler.
type GuardOptions struct {
	// Token is the bearer token; "" turns the check off (dev mode).
	Token string
	// AllowedOrigins are browser origins accepted besides loopback ones
	// (exact "scheme://host[:port]").
	AllowedOrigins []string
	// ErrorLog receives "<LogPrefix><message>" for each 500; nil is os.Stderr.
	ErrorLog  io.Writer
	LogPrefix string
}

// HTTPOptions configure HTTPHandler.
type HTTPOptions = GuardOptions

// HTTPHandler serves s over streamable HTTP, statelessly (no MCP session:
// any replica answers any request), replying JSON rather than an event
// stream, behind Guard. Every path reaches it; mount it where wanted.
func (s *Server) HTTPHandler(o HTTPOptions) http.Handler {
	if o.ErrorLog == nil {
		o.ErrorLog = s.log
	}
	if o.LogPrefix == "" {
		o.LogPrefix = s.prefix
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		MaxRequestBodyBytes: MaxBodyBytes,
		Logger:              s.slog,
	})
	return Guard(h, o)
}

// Guard answers what the spec's table answers before a request reaches
// the MCP layer, in this order: the token (401, checked first), the Origin
// (403, DNS-rebinding protection as the MCP specification asks of local
// servers), then for POST the body size (413), JSON (400), Accept (406) and
// batch size (400). A panic below is logged and answered 500; the server
// keeps serving.
func Guard(next http.Handler, o GuardOptions) http.Handler {
	if o.ErrorLog == nil {
		o.ErrorLog = os.Stderr
	}
	allowed := make(map[string]bool, len(o.AllowedOrigins))
	for _, a := range o.AllowedOrigins {
		allowed[strings.ToLower(strings.TrimRight(a, "/"))] = true
	}
	tokenSum := sha256.Sum256([]byte(o.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &trackingWriter{ResponseWriter: w}
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				panic(p)
			}
			fmt.Fprintf(o.ErrorLog, "%s%v\n", o.LogPrefix, p)
			if !rw.wrote {
				writeJSON(rw, http.StatusInternalServerError, bodyInternal)
			}
		}()

		if o.Token != "" && !bearerMatches(r.Header.Get("Authorization"), &tokenSum) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeJSON(rw, http.StatusUnauthorized, bodyUnauthorized)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && !originAllowed(origin, allowed) {
			writeJSON(rw, http.StatusForbidden, bodyBadOrigin)
			return
		}
		if r.Method != http.MethodPost {
			next.ServeHTTP(rw, r)
			return
		}
		if r.ContentLength > MaxBodyBytes {
			writeJSON(rw, http.StatusRequestEntityTooLarge, bodyTooLarge)
			return
		}
		body, err := readBody(r.Body, r.ContentLength)
		if err != nil {
			writeJSON(rw, http.StatusBadRequest, bodyInvalidJSON)
			return
		}
		if len(body) > MaxBodyBytes {
			writeJSON(rw, http.StatusRequestEntityTooLarge, bodyTooLarge)
			return
		}
		batch, ok := jsonMessage(body)
		if !ok {
			writeJSON(rw, http.StatusBadRequest, bodyInvalidJSON)
			return
		}
		if !acceptsBoth(r.Header.Values("Accept")) {
			writeJSON(rw, http.StatusNotAcceptable, bodyNotAcceptable)
			return
		}
		if batch && batchLen(body) > MaxBatch {
			writeJSON(rw, http.StatusBadRequest, bodyBatchTooBig)
			return
		}
		r.Body = &bodyReader{Reader: *bytes.NewReader(body)}
		r.ContentLength = int64(len(body))
		next.ServeHTTP(rw, r)
	})
}

// bearerMatches compares in constant time, length included: the digests
// compared are of one size whatever was sent, so the time taken tells
// nothing of the token's length. The scheme is case-insensitive. tokenSum
// is the token's digest, computed once.
func bearerMatches(header string, tokenSum *[sha256.Size]byte) bool {
	scheme, got, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	a := sha256.Sum256([]byte(strings.TrimSpace(got)))
	return subtle.ConstantTimeCompare(a[:], tokenSum[:]) == 1
}

// readBody reads r to its end, or to one byte past MaxBodyBytes (the
// caller refuses that). A declared length sizes the buffer, so a body read
// whole costs one allocation.
func readBody(r io.Reader, declared int64) ([]byte, error) {
	n := 512
	if declared >= 0 && declared <= MaxBodyBytes {
		n = int(declared) + 1 // room to read the EOF without growing
	}
	b := make([]byte, 0, n)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		m, err := r.Read(b[len(b):min(cap(b), MaxBodyBytes+1)])
		b = b[:len(b)+m]
		switch {
		case len(b) > MaxBodyBytes || err == io.EOF:
			return b, nil
		case err != nil:
			return b, err
		}
	}
}

// bodyReader is the checked body handed on (io.NopCloser over a
// bytes.Reader, in one allocation).
type bodyReader struct{ bytes.Reader }

func (*bodyReader) Close() error { return nil }

// originAllowed accepts a loopback origin (localhost, 127.0.0.1, ::1, any
// port) or one listed. A page elsewhere — including one whose name was
// rebound to this machine's address — is refused.
func originAllowed(origin string, allowed map[string]bool) bool {
	if allowed[strings.ToLower(strings.TrimRight(origin, "/"))] {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	switch strings.ToLower(u.Hostname()) {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}

// jsonMessage reports whether body is JSON whose top level is an object or
// an array (what a JSON body parser in strict mode accepts), and whether it
// is an array (a batch).
func jsonMessage(body []byte) (batch, ok bool) {
	t := bytes.TrimLeft(body, " \t\r\n")
	if len(t) == 0 || (t[0] != '{' && t[0] != '[') {
		return false, false
	}
	return t[0] == '[', json.Valid(t)
}

func batchLen(body []byte) int {
	var msgs []json.RawMessage
	if err := json.Unmarshal(body, &msgs); err != nil {
		return 0
	}
	return len(msgs)
}

// acceptsBoth reports whether Accept lists application/json and
// text/event-stream (wildcards count, as in the MCP SDKs).
func acceptsBoth(values []string) bool {
	var jsonOK, streamOK bool
	for _, v := range values {
		for raw := range strings.SplitSeq(v, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}

func writeJSON(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

// trackingWriter remembers whether a reply was started, so a late panic
// does not write a second status line.
type trackingWriter struct {
	http.ResponseWriter
	wrote bool
}

func (t *trackingWriter) WriteHeader(code int) {
	t.wrote = true
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(b []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(b)
}

func (t *trackingWriter) Flush() {
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		t.wrote = true
		f.Flush()
	}
}

func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// Listen opens addr, naming a port in use as the original does
// ("listen EADDRINUSE: address already in use 127.0.0.1:3001").
func Listen(addr string) (net.Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil && errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("listen EADDRINUSE: address already in use %s", addr)
	}
	return lis, err
}

// Serve serves h on lis until ctx ends, then stops accepting and lets
// in-flight requests finish for up to grace.
func Serve(ctx context.Context, lis net.Listener, h http.Handler, grace time.Duration) error {
	// Headers and bodies must arrive in bounded time (a client trickling
	// bytes holds a connection otherwise); answers are not bounded, as a
	// streamable-HTTP answer may be a long event stream.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: RequestReadTimeout,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	return nil
}
