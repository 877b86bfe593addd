package adapters

import (
	"context"
	"fmt"
	"time"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
)

// NameMock is the catalog name of the mock adapter.
const NameMock = "mock"

// mockMaxDelay bounds a configured delay: a demo's pause, not a hang.
const mockMaxDelay = 60 * time.Second

// mockAnswer is one operation's configured answer.
type mockAnswer struct {
	status int
	data   any
	delay  time.Duration
	// err, when set, is raised instead of the answer.
	err *handler.WorkflowError
}

// mock is the catalog's `mock` adapter: it answers each operation with
// the response its manifest entry configures, in the shape of a `realm
// workflow test` fixture's service mocks (operation → {status, data}), for
// demos and tests without the real service. Every service_method reads the
// same table. The spec's catalog says mock takes no config; the responses
// have to be given somewhere, and the manifest entry is where a deployment
// gives an adapter its settings.
type mock struct {
	name    string
	answers map[string]mockAnswer
	clock   interface {
		Sleep(ctx context.Context, d time.Duration) error
	}
	ops ops
}

// newMock builds the adapter from config.responses: operation → {status
// (default 200), data, delay_ms?, error?: {code, message}}.
func newMock(name string, config map[string]any, opts Options) (runner.Adapter, error) {
	s, err := readSettings(config, "responses")
	if err != nil {
		return nil, err
	}
	responses, err := s.object("responses", false)
	if err != nil {
		return nil, err
	}
	m := &mock{name: name, answers: map[string]mockAnswer{}, clock: opts.withDefaults().Limiters.Clock()}
	byOp := map[string]op{}
	for _, opName := range sortedKeys(responses) {
		a, err := readMockAnswer(opName, responses[opName])
		if err != nil {
			return nil, err
		}
		m.answers[opName] = a
		byOp[opName] = m.answer
	}
	m.ops = ops{"fetch": byOp, "create": byOp, "update": byOp, "delete": byOp}
	return m, nil
}

// readMockAnswer reads config.responses.<op>.
func readMockAnswer(opName string, raw any) (mockAnswer, error) {
	where := "config.responses." + opName
	r, ok := raw.(map[string]any)
	if !ok {
		return mockAnswer{}, fmt.Errorf("%s must be an object {status, data, delay_ms?, error?}", where)
	}
	if _, err := readSettings(r, "status", "data", "delay_ms", "error"); err != nil {
		return mockAnswer{}, fmt.Errorf("%s: %w", where, err)
	}
	a := mockAnswer{status: 200, data: r["data"]}
	if v, has := r["status"]; has {
		n, ok := number(v)
		if !ok || n != float64(int(n)) || n < 100 || n > 599 {
			return mockAnswer{}, fmt.Errorf("%s.status must be an HTTP status (100-599)", where)
		}
		a.status = int(n)
	}
	if v, has := r["delay_ms"]; has {
		n, ok := number(v)
		if !ok || n < 0 || time.Duration(n)*time.Millisecond > mockMaxDelay {
			return mockAnswer{}, fmt.Errorf("%s.delay_ms must be a number of milliseconds from 0 to %d", where, mockMaxDelay.Milliseconds())
		}
		a.delay = time.Duration(n * float64(time.Millisecond))
	}
	if v, has := r["error"]; has {
		e, _ := v.(map[string]any)
		code, _ := e["code"].(string)
		message, _ := e["message"].(string)
		if _, known := errcode.Code(code).Info(); !known || message == "" || len(e) != 2 {
			return mockAnswer{}, fmt.Errorf("%s.error must be {code: <a Realm error code>, message: <text>}", where)
		}
		a.err = handler.NewWorkflowError(errcode.Code(code), message)
	}
	return a, nil
}

func (m *mock) Call(ctx context.Context, call runner.AdapterCall) (any, error) {
	if _, ok := m.answers[call.Operation]; !ok {
		// realm workflow test's message for an operation its fixture does
		// not mock.
		return nil, fail(errcode.EngineAdapterFailed, map[string]any{"operation": call.Operation},
			"MockServiceRecorder: no response configured for operation '%s'", call.Operation)
	}
	return m.ops.dispatch(ctx, m.name, errcode.AdapterOpUnsupported, call)
}

// answer waits the configured delay, then raises the configured error, or
// fails as a service answering status would, or answers {status, data}.
func (m *mock) answer(ctx context.Context, call runner.AdapterCall) (any, error) {
	a := m.answers[call.Operation]
	if a.delay > 0 {
		if err := m.clock.Sleep(ctx, a.delay); err != nil {
			return nil, aborted(fmt.Sprintf("Mock operation '%s' (delay_ms)", call.Operation), err)
		}
	}
	if a.err != nil {
		e := *a.err
		return nil, &e
	}
	if code, failed := errcode.ForHTTPStatus(a.status); failed {
		return nil, fail(code, map[string]any{"status": a.status, "operation": call.Operation},
			"Adapter '%s' (mock) answered %d to %s %s", m.name, a.status, call.Method, call.Operation)
	}
	return reply(a.status, a.data), nil
}
