package handler_test

import (
	"context"
	"errors"
	"testing"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/handler"
)

type orderIn struct {
	Order    string `json:"order"`
	Quantity int    `json:"quantity"`
}

func (o orderIn) Validate() error {
	if o.Quantity < 0 {
		return errors.New("quantity must not be negative")
	}
	return nil
}

type priceConfig struct {
	UnitPrice float64 `json:"unit_price"`
}

type totalOut struct {
	Order string  `json:"order"`
	Total float64 `json:"total"`
}

var total = handler.TypedConfig(func(_ context.Context, in orderIn, c priceConfig, _ handler.StepContext) (totalOut, error) {
	return totalOut{Order: in.Order, Total: float64(in.Quantity) * c.UnitPrice}, nil
})

func TestTypedDecodesParamsAndConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		h         handler.Handler
		params    map[string]any
		config    map[string]any
		wantData  string // JSON, when the step completes
		wantWarn  string
		wantField string // Details["field"] of the VALIDATION_INPUT_SCHEMA error
		wantMsg   string
	}{
		{name: "params and config fill the structs; the output is Out",
			h: total, params: map[string]any{"order": "A-17", "quantity": 4.0, "extra": true}, config: map[string]any{"unit_price": 12.5},
			wantData: `{"order":"A-17","total":50}`},
		{name: "absent fields are zero values",
			h: total, params: nil, config: nil, wantData: `{"order":"","total":0}`},
		{name: "a param of the wrong kind is refused with its field",
			h: total, params: map[string]any{"quantity": "four"}, config: map[string]any{"unit_price": 1.0},
			wantField: "params.quantity", wantMsg: "params.quantity must be an integer, got string"},
		{name: "a fraction where an integer is wanted is refused",
			h: total, params: map[string]any{"quantity": 2.5},
			wantField: "params.quantity", wantMsg: "params.quantity must be an integer, got number 2.5"},
		{name: "a config value of the wrong kind is refused with its field",
			h: total, params: map[string]any{"quantity": 1.0}, config: map[string]any{"unit_price": "cheap"},
			wantField: "config.unit_price", wantMsg: "config.unit_price must be a number, got string"},
		{name: "Validate's refusal is a VALIDATION_INPUT_SCHEMA too",
			h: total, params: map[string]any{"quantity": -1.0},
			wantField: "params", wantMsg: "params: quantity must not be negative"},
		{name: "a Result from the function passes through",
			h: handler.Typed(func(_ context.Context, in orderIn, _ handler.StepContext) (handler.Result, error) {
				return handler.Warn(map[string]any{"order": in.Order}, "late"), nil
			}),
			params: map[string]any{"order": "A-1"}, wantData: `{"order":"A-1"}`, wantWarn: "late"},
		{name: "a map In takes the params as they are",
			h: handler.Typed(func(_ context.Context, in map[string]any, _ handler.StepContext) (map[string]any, error) {
				return in, nil
			}),
			params: map[string]any{"a": []any{1.0}}, wantData: `{"a":[1]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := tt.h.Execute(context.Background(), handler.Inputs{Params: tt.params}, handler.StepContext{Config: tt.config})
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				sameJSON(t, r.Data, tt.wantData)
				if r.Warn != tt.wantWarn {
					t.Errorf("Warn = %q, want %q", r.Warn, tt.wantWarn)
				}
				return
			}
			var werr *handler.WorkflowError
			if !errors.As(err, &werr) {
				t.Fatalf("err = %v, want a WorkflowError", err)
			}
			if werr.Code != errcode.ValidationInputSchema || werr.Retryable || werr.Details["field"] != tt.wantField || werr.Message != tt.wantMsg {
				t.Errorf("err = %+v, want field %q, message %q", werr, tt.wantField, tt.wantMsg)
			}
		})
	}
}

func TestTypedPassesTheFunctionsErrorThrough(t *testing.T) {
	t.Parallel()
	down := errors.New("the billing service is down")
	h := handler.Typed(func(context.Context, struct{}, handler.StepContext) (any, error) { return nil, down })
	if _, err := h.Execute(context.Background(), handler.Inputs{}, handler.StepContext{}); !errors.Is(err, down) {
		t.Errorf("err = %v, want %v", err, down)
	}
}
