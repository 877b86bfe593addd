package web

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/realm-go/realm/console-svc/identity"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// events is a page's server-sent event stream: it asks the engine, every
// Poll, for a fingerprint of what the page shows (a run's version, or the
// open gates of the inbox's first page) and sends "changed" when it moves,
// so a gate answered at another door or expired by the engine's sweeper
// shows without a reload. The loop runs in the request's own goroutine: it
// ends when the browser leaves (the request's context), when the stream has
// lived StreamLimit (the browser reconnects), or when the server stops.
func (s *Server) events(w http.ResponseWriter, r *http.Request, _ identity.Person) {
	q := r.URL.Query()
	var probe func(ctx context.Context) (string, error)
	switch {
	case q.Get("run") != "":
		id := q.Get("run")
		probe = func(ctx context.Context) (string, error) { return s.runFingerprint(ctx, id) }
	case q.Get("view") == "gates":
		probe = s.gatesFingerprint
	default:
		http.Error(w, "An event stream follows a run (?run=ID) or the gates inbox (?view=gates).", http.StatusBadRequest)
		return
	}
	s.streams.Add(1)
	defer s.streams.Add(-1)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // a proxy must not hold the events back
	w.WriteHeader(http.StatusOK)

	ctx, cancel := context.WithTimeout(r.Context(), s.o.StreamLimit)
	defer cancel()
	last, err := s.probeOnce(ctx, probe)
	if err != nil {
		last = ""
	}
	// retry tells the browser how soon to reconnect after the stream ends.
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", s.o.Poll.Milliseconds()); err != nil {
		return
	}
	_ = rc.Flush()
	tick := time.NewTicker(s.o.Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		fp, err := s.probeOnce(ctx, probe)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// The engine did not answer this time: say nothing, try again.
			continue
		}
		if fp == last {
			// A comment keeps idle proxies from closing the stream and
			// shows a closed connection as a write error.
			if _, err := fmt.Fprint(w, ": ok\n\n"); err != nil {
				return
			}
			_ = rc.Flush()
			continue
		}
		last = fp
		if _, err := fmt.Fprintf(w, "event: changed\ndata: %s\n\n", strings.ReplaceAll(fp, "\n", " ")); err != nil {
			return
		}
		_ = rc.Flush()
	}
}

func (s *Server) probeOnce(ctx context.Context, probe func(context.Context) (string, error)) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, s.o.CallTimeout)
	defer cancel()
	return probe(cctx)
}

// runFingerprint is the run's version: every write moves it.
func (s *Server) runFingerprint(ctx context.Context, id string) (string, error) {
	st, err := s.o.Engine.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: id})
	if err != nil {
		return "", err
	}
	if st.GetRefusal() != nil {
		return "gone", nil
	}
	return strconv.FormatInt(st.GetState().GetRunVersion(), 10), nil
}

// gatesFingerprint names the runs at a gate on the inbox's first page and
// when each gate opened: a gate answered, expired or opened changes it.
func (s *Server) gatesFingerprint(ctx context.Context) (string, error) {
	resp, err := s.o.Engine.ListRuns(ctx, &realmv1.ListRunsRequest{OpenGates: true, Limit: s.o.PageSize})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, r := range resp.GetRuns() {
		fmt.Fprintf(&b, "%s/%s/%d,", r.GetRunId(), r.GetGateStep(), r.GetGateOpenedAt().AsTime().UnixMilli())
	}
	return b.String(), nil
}
