package webhook_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/realm-go/realm/engine-svc/enginetest"
	"github.com/realm-go/realm/listen-svc/webhook"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// secrets are the test workflows' secret_from variables.
var secrets = map[string]string{
	"LISTEN_TEST_SHARED": "s3cret-token",
	"LISTEN_TEST_GH":     "gh-secret",
	"LISTEN_TEST_STRIPE": "whsec_test",
	"LISTEN_TEST_HMAC":   "hmac-secret",
}

func getenv(k string) string { return secrets[k] }

var testWorkflows = []string{"tickets", "gh", "stripe", "invoices", "open", "hmac-plain", "gh-plain", "stripe-plain", "limited"}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// fakeDispatcher records the runs handed to it; err fails every handover;
// hold, when set, is waited on before a handover counts.
type fakeDispatcher struct {
	mu   sync.Mutex
	runs []string
	err  error
	hold chan struct{}
}

func (f *fakeDispatcher) Dispatch(_ context.Context, runID string) error {
	f.mu.Lock()
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.runs = append(f.runs, runID)
	return nil
}

// set changes how the next handovers go.
func (f *fakeDispatcher) set(err error, hold chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.hold = err, hold
}

func (f *fakeDispatcher) handed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.runs...)
}

type harness struct {
	t    testing.TB
	eng  realmv1.EngineServiceClient
	srv  *webhook.Server
	url  string
	disp *fakeDispatcher
	logs *bytes.Buffer
}

func dialEngine(t testing.TB) realmv1.EngineServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(engineStart(t), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return realmv1.NewEngineServiceClient(conn)
}

func source(t testing.TB, name string) *realmv1.WorkflowSource {
	t.Helper()
	y, err := os.ReadFile("testdata/" + name + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	return &realmv1.WorkflowSource{Yaml: y, Path: name + ".yaml"}
}

// declare is what listen reads of testdata/<name>.yaml.
func declare(t testing.TB, name string) webhook.Declared {
	t.Helper()
	d, err := webhook.Declare(source(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func engineStart(t testing.TB) string { return enginetest.Start(t, "miniredis") }

// register registers testdata/<name>.yaml and returns what listen reads of it.
func register(t testing.TB, eng realmv1.EngineServiceClient, name string) webhook.Declared {
	t.Helper()
	src := source(t, name)
	d := declare(t, name)
	resp, err := eng.RegisterWorkflow(ctx(t), &realmv1.RegisterWorkflowRequest{Source: src})
	if err != nil || !resp.GetRegistered() {
		t.Fatalf("register %s: %v %s", name, err, resp.GetReport().GetText())
	}
	return d
}

// newHarness serves the test workflows from a static table over a real
// engine, handing runs to a fake dispatcher.
func newHarness(t testing.TB, tune func(*webhook.Options)) *harness {
	t.Helper()
	eng := dialEngine(t)
	var decls []webhook.Declared
	for _, n := range testWorkflows {
		decls = append(decls, register(t, eng, n))
	}
	table, problems := webhook.Build(decls, getenv, true)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	h := &harness{t: t, eng: eng, disp: &fakeDispatcher{}, logs: &bytes.Buffer{}}
	log := webhook.NewLogger(&syncWriter{b: h.logs}, &syncWriter{b: h.logs}, webhook.LevelDebug)
	o := webhook.Options{Catalog: webhook.Static{T: table}, Engine: eng, Dispatcher: h.disp, Log: log, MaxConcurrent: 20}
	if tune != nil {
		tune(&o)
	}
	h.srv = webhook.New(o)
	ts := httptest.NewServer(h.srv)
	t.Cleanup(ts.Close)
	h.url = ts.URL
	return h
}

type syncWriter struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// post sends body to path with headers (Content-Type defaults to JSON) and
// returns the status and body.
func (h *harness) post(path string, body string, headers map[string]string) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+path, bytes.NewBufferString(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// runs counts the runs of a workflow in the store.
func (h *harness) runs(workflowID string) []*realmv1.RunSummary {
	h.t.Helper()
	resp, err := h.eng.ListRuns(ctx(h.t), &realmv1.ListRunsRequest{WorkflowId: workflowID, Limit: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.GetRuns()
}
