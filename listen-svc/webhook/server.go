package webhook

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/realm-go/realm/listen-svc/dedup"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/reply"
	"github.com/realm-go/realm/pkg/trigger"
)

// Defaults of the request limits (listen spec §2.1).
const (
	DefaultMaxBodyBytes  = 1 << 20
	DefaultBodyTimeout   = 5 * time.Second
	DefaultMaxConcurrent = 20
)

// Options configure a Server.
type Options struct {
	Catalog    Catalog
	Engine     realmv1.EngineServiceClient
	Dispatcher Dispatcher
	// Dedup remembers delivery ids; nil is a process-local Memory store.
	Dedup dedup.Store
	Log   *Logger
	// MaxConcurrent bounds the requests handled at once; 0 or less is no
	// limit (the original's answer to a non-numeric --max-concurrent).
	MaxConcurrent int
	MaxBodyBytes  int64
	BodyTimeout   time.Duration
	// Caller is recorded on the runs the listener creates.
	Caller *realmv1.Caller
	// Now is the clock for timestamp checks (nil: time.Now).
	Now func() time.Time
	// CallTimeout bounds each engine call (0: 30s), and the wait for
	// another request handing off the same delivery.
	CallTimeout time.Duration
	// ClaimMargin is added to CallTimeout for the lease of a delivery's
	// claim: a listener that dies mid hand-off holds it no longer (0: 10s).
	ClaimMargin time.Duration
	// ClaimPoll is how often a claimed delivery is looked at again while
	// another request hands it off (0: 50ms).
	ClaimPoll time.Duration
	// RateLimit is the limit of a trigger without rate_limit (nil: none).
	RateLimit *trigger.RateLimit
	// SharedLimit, when set, keeps the rate limits' buckets for every
	// replica (nil: each process limits on its own).
	SharedLimit SharedLimiter
}

// Server is the webhook HTTP handler.
type Server struct {
	o        Options
	inFlight atomic.Int64
	limits   limiters
}

// New returns a Server; zero limits take their defaults.
func New(o Options) *Server {
	if o.Dedup == nil {
		o.Dedup = dedup.NewMemory(nil)
	}
	if o.Log == nil {
		o.Log = NewLogger(nil, nil, LevelError)
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 30 * time.Second
	}
	if o.ClaimMargin <= 0 {
		o.ClaimMargin = 10 * time.Second
	}
	if o.ClaimPoll <= 0 {
		o.ClaimPoll = 50 * time.Millisecond
	}
	return &Server{o: o}
}

// InFlight counts the requests past the busy check and not yet answered.
func (s *Server) InFlight() int { return int(s.inFlight.Load()) }

// field is one key of a reply body; bodies keep their keys in order.
type field struct{ k, v string }

func send(w http.ResponseWriter, code int, fields ...field) {
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(jsonText(f.k) + ":" + jsonText(f.v))
	}
	b.WriteByte('}')
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, b.String())
}

func forbidden(w http.ResponseWriter) { send(w, http.StatusForbidden, field{"error", "forbidden"}) }

// hangUp closes the connection without a reply (an oversized or slow
// body, spec §5 row 4).
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	// A transport that cannot hand over its connection aborts the reply.
	panic(http.ErrAbortHandler)
}

// ServeHTTP runs the request pipeline of listen spec §5, in its order: the
// first failing check answers.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		send(w, http.StatusMethodNotAllowed, field{"error", "method_not_allowed"})
		return
	}
	m := s.o.Catalog.Lookup(r.Context(), r.URL.Path)
	if m == nil {
		forbidden(w)
		return
	}
	if d := s.rateLimited(r.Context(), m); d > 0 {
		s.o.Log.Warn("webhook: rate limited", KV{"path", m.Path})
		w.Header().Set("Retry-After", retryAfter(d))
		send(w, http.StatusTooManyRequests, field{"error", "rate_limited"}, field{"status", "rejected"})
		return
	}
	if n := s.inFlight.Add(1); s.o.MaxConcurrent > 0 && n > int64(s.o.MaxConcurrent) {
		s.inFlight.Add(-1)
		send(w, http.StatusServiceUnavailable, field{"error", "busy"}, field{"status", "rejected"})
		return
	}
	defer s.inFlight.Add(-1)

	body, ok := s.readBody(w, r)
	if !ok {
		hangUp(w)
		return
	}
	media, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	if mt, _, err := mime.ParseMediaType(media); err != nil || !strings.EqualFold(mt, "application/json") {
		send(w, http.StatusUnsupportedMediaType, field{"error", "unsupported_media_type"})
		return
	}
	if !validHeaders(r.Header) {
		// Header values reach the filter, the params and the engine's
		// protobuf strings, which must be UTF-8: refuse them here, as
		// the client's error they are.
		send(w, http.StatusBadRequest, field{"error", "invalid_header"}, field{"status", "rejected"})
		return
	}
	t := m.Trigger
	req := trigger.NewRequest(r.Header, nil)
	if h := t.Auth.SecurityHeader(); h != "" && req.Repeated[strings.ToLower(h)] {
		s.o.Log.Warn("webhook: duplicated security header", KV{"path", m.Path}, KV{"header", strings.ToLower(h)})
		forbidden(w)
		return
	}
	replay, verified := t.Auth.Verify(req, body, m.Secret, s.o.Now())
	if !verified {
		s.o.Log.Warn("webhook: verification failed", KV{"path", m.Path}, KV{"mode", t.Auth.Mode})
		forbidden(w)
		return
	}
	if replay.Key != "" {
		rw := &statusWriter{ResponseWriter: w}
		if !s.remember(r.Context(), m, replay) {
			s.o.Log.Warn("webhook: replayed request refused", KV{"path", m.Path}, KV{"mode", t.Auth.Mode})
			forbidden(w)
			return
		}
		// A request answered with a server error is one its sender
		// retries: that retry is not a replay.
		defer func() {
			if rw.code >= 500 {
				s.forget(m, replay)
			}
		}()
		w = rw
	}
	if err := json.Unmarshal(body, &req.Body); err != nil {
		send(w, http.StatusBadRequest, field{"error", "invalid_json"})
		return
	}
	if !t.Matches(req) {
		s.o.Log.Debug("webhook: filtered out", KV{"path", m.Path})
		send(w, http.StatusOK, field{"status", "ignored"})
		return
	}
	id, hasID := t.DeliveryID(req)
	if t.Dedup != nil && !hasID {
		if t.Dedup.RejectMissing {
			send(w, http.StatusBadRequest, field{"error", "dedup_id_unresolvable"}, field{"status", "rejected"})
			return
		}
		s.o.Log.Warn("webhook: dedup id unresolvable, proceeding without dedup", KV{"path", m.Path})
	}
	var c *claim
	if hasID {
		var done bool
		if c, done = s.claim(r.Context(), w, m, id); done {
			return
		}
		if c != nil {
			// Whatever ends this request short of a hand-off gives the
			// claim up, so the next copy of the delivery is not a
			// duplicate.
			defer c.release(s, m)
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.o.CallTimeout)
	defer cancel()
	params, missing := t.Params(req)
	for _, p := range missing {
		s.o.Log.Warn("webhook params: could not resolve path", KV{"path", p})
	}
	s.start(ctx, w, m, params, id, c)
}

// remember records a verified request's replay key; false is a replay. A
// store that cannot be written lets the request through: the delivery's
// dedup id and the run's idempotency key still catch a repeat, and a
// listener whose store is down should not refuse every sender.
func (s *Server) remember(rctx context.Context, m *Mount, r trigger.Replay) bool {
	window := r.Window
	if d := m.Trigger.Dedup; d != nil && d.TTL > window && m.Trigger.Auth.Mode == trigger.ModeGitHub {
		window = d.TTL // GitHub signs no time: remember as long as the delivery id
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(rctx), s.o.CallTimeout)
	defer cancel()
	fresh, err := s.o.Dedup.Remember(ctx, m.WorkflowID, r.Key, window)
	if err != nil {
		s.o.Log.Error("webhook: failed to record replay key", KV{"path", m.Path}, KV{"error", err.Error()})
		return true
	}
	return fresh
}

func (s *Server) forget(m *Mount, r trigger.Replay) {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.CallTimeout)
	defer cancel()
	if err := s.o.Dedup.Forget(ctx, m.WorkflowID, r.Key); err != nil {
		s.o.Log.Error("webhook: failed to forget replay key", KV{"path", m.Path}, KV{"error", err.Error()})
	}
}

// statusWriter notes the status code of the reply.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// validHeaders reports whether every header value is UTF-8.
func validHeaders(h http.Header) bool {
	for _, vs := range h {
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return false
			}
		}
	}
	return true
}

// claim is a request's hold on its delivery's dedup record.
type claim struct {
	id, token string
	// prior is the state the record was claimed from: New, or Received
	// when an earlier copy's hand-off did not complete.
	prior     dedup.State
	handedOff bool
}

func (c *claim) release(s *Server, m *Mount) {
	if c.handedOff {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.o.CallTimeout)
	defer cancel()
	if err := s.o.Dedup.Release(ctx, m.WorkflowID, c.id, c.token, m.Trigger.Dedup.TTL); err != nil {
		s.o.Log.Error("webhook: failed to release dedup id", KV{"path", m.Path}, KV{"error", err.Error()})
	}
}

// claim takes the delivery's dedup record for this request's hand-off. A
// record whose run was handed off answers 200 deduplicated; one another
// request is handing off is waited for (its outcome decides), at most
// CallTimeout. done says a reply was sent. A store that cannot be read
// gives no claim (nil): the run's idempotency key still catches a repeat.
func (s *Server) claim(rctx context.Context, w http.ResponseWriter, m *Mount, id string) (c *claim, done bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(rctx), s.o.CallTimeout)
	defer cancel()
	token := newToken()
	lease := s.o.CallTimeout + s.o.ClaimMargin
	for {
		st, err := s.o.Dedup.Claim(ctx, m.WorkflowID, id, token, lease, m.Trigger.Dedup.TTL)
		if err != nil && ctx.Err() == nil {
			s.o.Log.Error("webhook: failed to read dedup id", KV{"path", m.Path}, KV{"error", err.Error()})
			return nil, false
		}
		switch {
		case err != nil:
			// The wait ran out in the call: answered below.
		case st == dedup.HandedOff:
			s.o.Log.Debug("webhook: deduplicated", KV{"path", m.Path})
			send(w, http.StatusOK, field{"status", "deduplicated"})
			return nil, true
		case st == dedup.New || st == dedup.Received:
			return &claim{id: id, token: token, prior: st}, false
		}
		select {
		case <-time.After(s.o.ClaimPoll):
		case <-ctx.Done():
			s.o.Log.Warn("webhook: hand-off of the same delivery still in progress", KV{"path", m.Path})
			send(w, http.StatusServiceUnavailable, field{"error", "handoff_in_progress"}, field{"status", "rejected"})
			return nil, true
		}
	}
}

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// readBody reads the whole body within the size and time limits.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.ContentLength > s.o.MaxBodyBytes {
		return nil, false
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.o.BodyTimeout))
	body, err := io.ReadAll(io.LimitReader(r.Body, s.o.MaxBodyBytes+1))
	if err != nil || int64(len(body)) > s.o.MaxBodyBytes {
		return nil, false
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	return body, true
}

// start creates the run (params checked by the engine against
// params_schema; the delivery id as idempotency key) and hands it over. c
// is the request's claim on the delivery's dedup record (nil: no dedup id,
// or the record could not be read).
func (s *Server) start(ctx context.Context, w http.ResponseWriter, m *Mount, params map[string]any, id string, c *claim) {
	ps, err := structpb.NewStruct(params)
	if err != nil {
		s.o.Log.Error("listen: unhandled handler error", KV{"path", m.Path}, KV{"error", err.Error()})
		send(w, http.StatusInternalServerError, field{"error", "internal_error"})
		return
	}
	resp, err := s.o.Engine.StartRun(ctx, &realmv1.StartRunRequest{
		WorkflowId: m.WorkflowID, Params: ps, IdempotencyKey: id, Caller: s.o.Caller,
	})
	rep := resp.GetReply()
	if err == nil && rep.GetStatus() == realmv1.ReplyStatus_REPLY_STATUS_ERROR {
		msg := strings.Join(rep.GetErrors(), " ")
		if rep.GetErrorCode() == string(errcode.ValidationInputSchema) && rep.GetRunId() == "" {
			s.o.Log.Info("webhook: rejected params_invalid — " + msg)
			send(w, http.StatusBadRequest, field{"error", "params_invalid"}, field{"message", msg}, field{"status", "rejected"})
			return
		}
		err = errors.New(msg)
	}
	if err == nil && rep.GetRunId() == "" {
		err = errors.New("the engine named no run")
	}
	if err != nil {
		s.o.Log.Error("webhook: run creation failed", KV{"path", m.Path}, KV{"error", err.Error()})
		send(w, http.StatusInternalServerError, field{"error", "store_error"}, field{"status", "failed"})
		return
	}
	runID := rep.GetRunId()
	again := false
	if rep.GetDeduped() {
		// The delivery id already names a run. Its hand-off is owed only
		// when the delivery's record says an earlier copy's did not
		// complete and the run can still be driven; otherwise (the record
		// was forgotten: TTL, a restart, another replica's memory; or the
		// run is over) nothing starts and nothing is written to it
		// (workflow-file spec §16).
		if c == nil || c.prior != dedup.Received || reply.Terminal(rep.GetRunPhase()) {
			if c != nil && c.prior == dedup.New {
				s.handedOff(ctx, m, c)
			}
			s.o.Log.Debug("webhook: deduplicated", KV{"path", m.Path})
			send(w, http.StatusOK, field{"status", "deduplicated"}, field{"run_id", runID}, field{"run_phase", reply.PhaseWord(rep.GetRunPhase())})
			return
		}
		again = true
	}
	if err := s.o.Dispatcher.Dispatch(ctx, runID); err != nil {
		s.o.Log.Error("webhook: spawn failed", KV{"path", m.Path}, KV{"run_id", runID}, KV{"error", err.Error()})
		if c != nil {
			// The delivery's record says received (the claim is released
			// on return): the sender re-delivers on the 500 and that copy
			// hands this same run off again, so the run stays open.
			s.o.Log.Info("webhook: run left open for a re-delivery", KV{"path", m.Path}, KV{"run_id", runID})
		} else if _, aerr := s.o.Engine.SealSpawnFailure(ctx, &realmv1.SealSpawnFailureRequest{
			RunId: runID, Reason: err.Error(), Caller: s.o.Caller,
		}); aerr != nil {
			s.o.Log.Error("webhook: failed to mark spawn_failed", KV{"run_id", runID}, KV{"error", aerr.Error()})
		}
		send(w, http.StatusInternalServerError, field{"error", "spawn_failed"}, field{"run_id", runID}, field{"status", "failed"})
		return
	}
	if c != nil {
		s.handedOff(ctx, m, c)
	}
	// No OS process is started: "pid" stays for log parity and is null.
	if again {
		s.o.Log.Info("webhook: dispatched again", KV{"path", m.Path}, KV{"run_id", runID}, KV{"pid", nil})
		send(w, http.StatusAccepted, field{"run_id", runID}, field{"status", "handed_off_again"})
		return
	}
	s.o.Log.Info("webhook: dispatched", KV{"path", m.Path}, KV{"run_id", runID}, KV{"pid", nil})
	send(w, http.StatusAccepted, field{"run_id", runID}, field{"status", "accepted"})
}

// handedOff records that the claimed delivery's run was handed off.
func (s *Server) handedOff(ctx context.Context, m *Mount, c *claim) {
	c.handedOff = true
	if err := s.o.Dedup.HandedOff(context.WithoutCancel(ctx), m.WorkflowID, c.id, m.Trigger.Dedup.TTL); err != nil {
		s.o.Log.Error("webhook: failed to record dedup id", KV{"path", m.Path}, KV{"error", err.Error()})
	}
}
