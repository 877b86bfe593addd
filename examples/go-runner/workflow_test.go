package main

import (
	"context"
	"errors"
	"testing"

	"github.com/realm-go/realm/engine-svc/realmtest"
	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/handler"
)

// Every fixture passes on an in-process engine with these handlers served.
func TestWorkflowFixtures(t *testing.T) {
	t.Parallel()
	realmtest.Run(t, "workflow.yaml", "fixtures", realmtest.Options{Handlers: registrations()})
}

func TestQuoteShipping(t *testing.T) {
	t.Parallel()
	h := handler.TypedConfig(quoteShipping)
	config := map[string]any{"per_kg": 4.5, "express_factor": 2.0}
	tests := []struct {
		name     string
		params   map[string]any
		want     quote
		wantCode errcode.Code
	}{
		{"by weight", map[string]any{"weight_kg": 2.0}, quote{Price: 9, Currency: "EUR"}, ""},
		{"express costs double", map[string]any{"weight_kg": 2.0, "express": true}, quote{Price: 18, Currency: "EUR"}, ""},
		{"no weight is refused", map[string]any{"weight_kg": 0.0}, quote{}, errcode.ValidationInputSchema},
		{"a weight that is not a number is refused", map[string]any{"weight_kg": "heavy"}, quote{}, errcode.ValidationInputSchema},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := h.Execute(context.Background(), handler.Inputs{Params: tt.params}, handler.StepContext{Config: config})
			if tt.wantCode != "" {
				var werr *handler.WorkflowError
				if !errors.As(err, &werr) || werr.Code != tt.wantCode {
					t.Fatalf("err = %v, want %s", err, tt.wantCode)
				}
				return
			}
			if err != nil || r.Data != tt.want {
				t.Errorf("Execute = %+v, %v; want %+v", r.Data, err, tt.want)
			}
		})
	}
}
