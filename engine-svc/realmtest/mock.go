package realmtest

import (
	"context"
	"fmt"
	"sync"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
)

// MockCall is one call a mocked service received: params are what the
// step's input_map built.
type MockCall struct {
	Service   string         `json:"service"`
	Method    string         `json:"method"`
	Operation string         `json:"operation"`
	Params    map[string]any `json:"params"`
}

// mockAdapters stand in for every adapter the workflow's services name.
// The engine calls them like any adapter on a runner; they answer from the
// fixture being run, record each call, and trip on a service the fixture
// did not mock — a fixture never reaches a real service.
type mockAdapters struct {
	mu       sync.Mutex
	services map[string]string // service → adapter, from the workflow
	mocks    map[string]map[string]MockResponse
	calls    []MockCall
	tripped  string // the first unmocked service's or operation's message
}

// use makes the mocks those of the next fixture and forgets the calls.
func (m *mockAdapters) use(mocks map[string]map[string]MockResponse) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mocks, m.calls, m.tripped = mocks, nil, ""
}

// taken returns the calls made and the tripwire's message, if it fired.
func (m *mockAdapters) taken() ([]MockCall, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]MockCall(nil), m.calls...), m.tripped
}

// adapters returns the runner adapters to register, one per adapter name.
func (m *mockAdapters) adapters() map[string]runner.Adapter {
	out := map[string]runner.Adapter{}
	for _, adapter := range m.services {
		out[adapter] = mockAdapter{m: m, name: adapter}
	}
	return out
}

type mockAdapter struct {
	m    *mockAdapters
	name string
}

func (a mockAdapter) Call(_ context.Context, call runner.AdapterCall) (any, error) {
	service, _ := call.Config["service"].(string)
	m := a.m
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, MockCall{Service: service, Method: call.Method, Operation: call.Operation, Params: call.Params})
	ops, mocked := m.mocks[service]
	if !mocked {
		msg := fmt.Sprintf("Adapter '%s' for service '%s' is not registered. Declare this adapter under 'adapters:' in realm.yaml at your deployment root.", a.name, service)
		if m.tripped == "" {
			m.tripped = msg
		}
		return nil, handler.NewWorkflowError(errcode.EngineAdapterFailed, msg)
	}
	resp, ok := ops[call.Operation]
	if !ok {
		// A fixture that forgot an operation is the fixture's fault, not
		// the workflow's: it fails the fixture like an unmocked service.
		msg := fmt.Sprintf("MockServiceRecorder: no response configured for operation '%s'", call.Operation)
		if m.tripped == "" {
			m.tripped = msg
		}
		return nil, handler.NewWorkflowError(errcode.EngineAdapterFailed, msg)
	}
	status := resp.Status
	if status == 0 {
		status = 200
	}
	// A failing status fails the step as the http adapter would.
	if code, failed := errcode.ForHTTPStatus(status); failed {
		return nil, handler.NewWorkflowError(code, fmt.Sprintf("Service '%s' (mocked) answered %d to %s %s", service, status, call.Method, call.Operation))
	}
	return map[string]any{"status": status, "data": resp.Data}, nil
}
