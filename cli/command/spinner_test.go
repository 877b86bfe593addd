package command

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
)

func TestSpinnerOnlyOnATerminal(t *testing.T) {
	t.Parallel()
	none := func(string) string { return "" }
	if newSpinner(&bytes.Buffer{}, none) != nil {
		t.Error("a buffer got a spinner")
	}
	if newSpinner(os.Stderr, func(k string) string {
		if k == "TERM" {
			return "dumb"
		}
		return ""
	}) != nil {
		t.Error("TERM=dumb got a spinner")
	}
	var s *spinner
	s.start("nothing")() // a nil spinner is a no-op
}

// A call that outlasts the delay shows frames, and the line is erased when
// it ends; a quick call shows nothing.
func TestSpinnerShowsALongCallAndErasesIt(t *testing.T) {
	t.Parallel()
	var out lockedBuffer
	s := &spinner{w: &out, delay: 20 * time.Millisecond, tick: 5 * time.Millisecond}
	call := s.interceptor()
	slow := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		// Until the spinner has drawn at least one frame.
		for !strings.Contains(out.String(), "waiting for engine-svc (GcRuns)…") {
			time.Sleep(time.Millisecond)
		}
		return nil
	}
	if err := call(context.Background(), "/realm.v1.EngineService/GcRuns", nil, nil, nil, slow); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.HasPrefix(got, "\r⠋ waiting for engine-svc (GcRuns)…") || !strings.HasSuffix(got, "\r\x1b[2K") {
		t.Errorf("spinner output = %q", got)
	}
	after := out.String()
	time.Sleep(30 * time.Millisecond)
	if out.String() != after {
		t.Error("the spinner drew after its call ended")
	}

	var quick lockedBuffer
	q := &spinner{w: &quick, delay: time.Hour, tick: time.Millisecond}
	fast := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	if err := q.interceptor()(context.Background(), "/realm.v1.EngineService/GetRunState", nil, nil, nil, fast); err != nil {
		t.Fatal(err)
	}
	if quick.String() != "" {
		t.Errorf("a quick call drew %q", quick.String())
	}
}
