package handlers_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/realm-go/realm/engine-svc/realmtest"
	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
	"github.com/realm-go/realm/pkg/workflow"
	"github.com/realm-go/realm/services/example-runner/handlers"
)

func TestHandlersDoWhatTheContractShows(t *testing.T) {
	t.Parallel()
	seedResources := map[string]any{"fetch": map[string]any{}, "$settlement": map[string]any{}}
	tests := []struct {
		name     string
		h        handler.Func
		in       map[string]any
		sc       handler.StepContext
		want     handler.Result
		wantErr  string
		wantCode errcode.Code
		retry    bool
	}{
		{name: "order_total multiplies quantity by unit_price", h: handlers.OrderTotal,
			in: map[string]any{"quantity": 4.0}, sc: handler.StepContext{Config: map[string]any{"unit_price": 12.5}},
			want: handler.Data(map[string]any{"total": 50.0})},
		{name: "order_total refuses a missing quantity", h: handlers.OrderTotal,
			in: map[string]any{}, sc: handler.StepContext{Config: map[string]any{"unit_price": 12.5}},
			wantErr: "params.quantity must be a number, got <nil>", wantCode: errcode.ValidationInputSchema},
		{name: "order_total refuses a unit_price that is not a number", h: handlers.OrderTotal,
			in: map[string]any{"quantity": 4.0}, sc: handler.StepContext{Config: map[string]any{"unit_price": "12.5"}},
			wantErr: "config.unit_price must be a number, got 12.5", wantCode: errcode.ValidationInputSchema},
		{name: "show returns what it received", h: handlers.Show,
			in: map[string]any{"order": "A-17"},
			sc: handler.StepContext{RunID: "r", RunParams: map[string]any{"order": "A-17"}, Config: map[string]any{"currency": "EUR"}, Resources: seedResources},
			want: handler.Data(map[string]any{
				"inputs":  map[string]any{"params": map[string]any{"order": "A-17"}},
				"context": map[string]any{"run_id": "r", "run_params": map[string]any{"order": "A-17"}, "config": map[string]any{"currency": "EUR"}, "resources": seedResources},
			})},
		{name: "needs says which declared outputs it found", h: handlers.Needs,
			sc: handler.StepContext{Resources: seedResources}, want: handler.Data(map[string]any{"fetch": true, "parse": false})},
		{name: "check_records warns about one record without email", h: handlers.CheckRecords,
			in:   map[string]any{"records": []any{map[string]any{"email": "a@x"}, map[string]any{}, map[string]any{"email": "c@x"}}},
			want: handler.Warn(map[string]any{"checked": 3}, "One record had no email address.")},
		{name: "check_records counts several without email", h: handlers.CheckRecords,
			in:   map[string]any{"records": []any{map[string]any{}, "x"}},
			want: handler.Warn(map[string]any{"checked": 2}, "2 records had no email address.")},
		{name: "check_records completes quietly when every record has one", h: handlers.CheckRecords,
			in: map[string]any{"records": []any{map[string]any{"email": "a@x"}}}, want: handler.Data(map[string]any{"checked": 1})},
		{name: "close_account aborts the run", h: handlers.CloseAccount, want: handler.AbortRun("The account is closed.")},
		{name: "find_order raises RESOURCE_NOT_FOUND", h: handlers.FindOrder, in: map[string]any{"order": "A-17"},
			wantErr: "Order A-17 is not in the system.", wantCode: "RESOURCE_NOT_FOUND"},
		{name: "throws raises a plain error", h: handlers.Throws, wantErr: "the billing service is down"},
		{name: "flaky is rate limited on attempt 1", h: handlers.Flaky, sc: handler.StepContext{Attempt: 1},
			wantErr: "rate limited", wantCode: errcode.ServiceRateLimited, retry: true},
		{name: "flaky is rate limited on attempt 2", h: handlers.Flaky, sc: handler.StepContext{Attempt: 2},
			wantErr: "rate limited", wantCode: errcode.ServiceRateLimited, retry: true},
		{name: "flaky completes on attempt 3", h: handlers.Flaky, sc: handler.StepContext{Attempt: 3},
			want: handler.Data(map[string]any{"attempt": 3})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.h(context.Background(), handler.Inputs{Params: tt.in}, tt.sc)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				var werr *handler.WorkflowError
				isWorkflow := errors.As(err, &werr)
				if tt.wantCode == "" && isWorkflow {
					t.Errorf("got a WorkflowError %+v, want a plain error", werr)
				}
				if tt.wantCode != "" && (!isWorkflow || werr.Code != tt.wantCode || werr.Retryable != tt.retry) {
					t.Errorf("error %+v, want code %s retryable %v", werr, tt.wantCode, tt.retry)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestFindOrderCarriesTheContractsDetails(t *testing.T) {
	t.Parallel()
	_, err := handlers.FindOrder(context.Background(), handler.Inputs{Params: map[string]any{"order": "A-17"}}, handler.StepContext{})
	var werr *handler.WorkflowError
	if !errors.As(err, &werr) {
		t.Fatalf("%v is not a WorkflowError", err)
	}
	want := &handler.WorkflowError{Message: "Order A-17 is not in the system.", Code: "RESOURCE_NOT_FOUND",
		Category: "RESOURCE", AgentAction: "report_to_user", Details: map[string]any{"order": "A-17"}}
	if !reflect.DeepEqual(werr, want) {
		t.Errorf("got %+v, want %+v", werr, want)
	}
}

func TestSlowStopsWhenItsTimeLimitPasses(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := handlers.Slow(ctx, handler.Inputs{}, handler.StepContext{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want the context's deadline", err)
	}
}

func TestManifestMakeTotalIsTheContractsFactory(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "realm.yaml")
	body := "version: 1\nhandlers:\n  order_total:\n    use: makeTotal\n    config:\n      unit_price: 12.5\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	regs, err := runner.LoadManifest(path, handlers.Registry())
	if err != nil {
		t.Fatal(err)
	}
	r, err := regs[0].Handler.Execute(context.Background(), handler.Inputs{}, handler.StepContext{})
	if err != nil || !reflect.DeepEqual(r, handler.Data(map[string]any{"total": 50.0})) {
		t.Errorf("order_total from the manifest = %+v, %v; want total 50", r, err)
	}

	// Served beside the code's own order_total, the name is refused.
	err = runner.Serve(context.Background(), runner.Options{}, append(handlers.Registrations(), regs...)...)
	want := "Extension handler 'order_total' is declared by both '" + handlers.Source + "' and the deployment manifest '" + path +
		"' — manifest entries and code-module exports share one namespace; names must be unique."
	if !errors.Is(err, runner.ErrDuplicateHandler) || err.Error() != want {
		t.Errorf("Serve error:\n got %v\nwant %s", err, want)
	}
}

func TestRegistrationsAreServable(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, r := range handlers.Registrations() {
		if r.Name == "" || r.Handler == nil || seen[r.Name] {
			t.Errorf("bad registration %+v", r)
		}
		seen[r.Name] = true
	}
	if !seen["order_total"] {
		t.Error("order_total is not served")
	}
}

// The example workflow names order_total and loads cleanly (the same check
// `realm workflow validate examples/orders.yaml` makes against an engine).
func TestOrdersExampleLoads(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "..", "..", "examples", "orders.yaml")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	def, rep := workflow.Load(src, workflow.LoadOptions{Path: path, Strict: true})
	if def == nil || !rep.Valid {
		t.Fatalf("orders.yaml refused: errors %v, diagnostics %+v, parse %v", rep.Errors, rep.Diagnostics, rep.ParseError)
	}
	step, ok := def.Steps["price"]
	if !ok {
		t.Fatal("no step 'price'")
	}
	if step.Handler != "order_total" || step.Execution != "auto" {
		t.Errorf("step price: handler %q, execution %q", step.Handler, step.Execution)
	}
}

// The orders example's fixtures, with the handlers served in-process: the
// way a Go author tests a workflow and its handlers in `go test`.
func TestOrdersFixtures(t *testing.T) {
	t.Parallel()
	results := realmtest.Run(t, filepath.Join("..", "..", "..", "examples", "orders.yaml"),
		filepath.Join("..", "..", "..", "examples", "fixtures", "orders"), realmtest.Options{Handlers: handlers.Registrations()})
	if len(results) != 2 {
		t.Fatalf("%d fixtures ran, want 2", len(results))
	}
}
