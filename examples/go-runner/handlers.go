package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
)

// registrations are the handlers this runner serves, by the names the
// workflow's steps use.
func registrations() []runner.Registration {
	return []runner.Registration{
		{Name: "check_destination", Handler: handler.TypedConfig(checkDestination)},
		{Name: "quote_shipping", Handler: handler.TypedConfig(quoteShipping)},
	}
}

// destination is check_destination's input (its step's input_map).
type destination struct {
	Country string `json:"country"`
}

// served is check_destination's config: the countries shipped to.
type served struct {
	Countries []string `json:"countries"`
}

// checkDestination ends the run when the parcel's country is not served:
// no price is wrong for such a parcel, so the run is aborted, not failed.
func checkDestination(_ context.Context, in destination, cfg served, _ handler.StepContext) (handler.Result, error) {
	if !slices.Contains(cfg.Countries, in.Country) {
		return handler.AbortRun(fmt.Sprintf("We do not ship to %q.", in.Country)), nil
	}
	return handler.Data(map[string]any{"country": in.Country}), nil
}

// parcel is quote_shipping's input.
type parcel struct {
	WeightKg float64 `json:"weight_kg"`
	Express  bool    `json:"express"`
}

// Validate refuses a parcel that weighs nothing: the step then fails with
// VALIDATION_INPUT_SCHEMA, before quoteShipping runs.
func (p parcel) Validate() error {
	if p.WeightKg <= 0 {
		return errors.New("weight_kg must be more than 0")
	}
	return nil
}

// rates is quote_shipping's config.
type rates struct {
	PerKg         float64 `json:"per_kg"`
	ExpressFactor float64 `json:"express_factor"`
}

// quote is quote_shipping's output.
type quote struct {
	Price    float64 `json:"price"`
	Currency string  `json:"currency"`
}

// quoteShipping prices a parcel by weight, express parcels at a multiple.
func quoteShipping(_ context.Context, p parcel, r rates, _ handler.StepContext) (quote, error) {
	price := p.WeightKg * r.PerKg
	if p.Express {
		price *= r.ExpressFactor
	}
	return quote{Price: math.Round(price*100) / 100, Currency: "EUR"}, nil
}
