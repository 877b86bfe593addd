package command

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
	"google.golang.org/grpc"
)

// spinnerDelay is how long a call runs before the spinner shows: most
// calls end well before it, and a flicker would be noise.
const spinnerDelay = 400 * time.Millisecond

// spinnerFrames are drawn in turn, one every spinnerTick.
var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

const spinnerTick = 100 * time.Millisecond

// spinner draws "⠋ waiting for engine-svc (<method>)…" on w while a call
// runs past spinnerDelay, and erases it when the call ends, so a long
// operator command (a gc over many runs, a reclaim --all) shows it is
// working. Only on a terminal: pipes and logs get nothing.
type spinner struct {
	w     io.Writer
	delay time.Duration
	tick  time.Duration
}

// newSpinner returns the spinner for stderr, or nil when stderr is not a
// terminal or TERM is dumb.
func newSpinner(w io.Writer, getenv func(string) string) *spinner {
	if getenv("TERM") == "dumb" {
		return nil
	}
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &spinner{w: w, delay: spinnerDelay, tick: spinnerTick}
}

// start shows the spinner after the delay; the returned stop erases it and
// returns once nothing more will be drawn.
func (s *spinner) start(label string) (stop func()) {
	if s == nil {
		return func() {}
	}
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(s.delay)
		defer t.Stop()
		select {
		case <-quit:
			return
		case <-t.C:
		}
		tk := time.NewTicker(s.tick)
		defer tk.Stop()
		for i := 0; ; i++ {
			fmt.Fprintf(s.w, "\r%s %s…", spinnerFrames[i%len(spinnerFrames)], label)
			select {
			case <-quit:
				fmt.Fprint(s.w, "\r\x1b[2K") // erase the line
				return
			case <-tk.C:
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit); <-done })
	}
}

// interceptor runs the spinner around every unary call on the connection.
func (s *spinner) interceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		stop := s.start("waiting for engine-svc (" + shortMethod(method) + ")")
		defer stop()
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// shortMethod is a gRPC method's last part: GcRuns of /realm.v1.EngineService/GcRuns.
func shortMethod(m string) string {
	for i := len(m) - 1; i >= 0; i-- {
		if m[i] == '/' {
			return m[i+1:]
		}
	}
	return m
}
