package runner_test

import (
	"context"
	"flag"

	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
)

// A runner's whole main function: Main owns the flags (-engine-addr,
// -listen, -manifest, …, each with its environment variable), the
// signals, logging, tracing and metrics.
func ExampleMain() {
	greet := handler.Typed(func(_ context.Context, in struct {
		Name string `json:"name"`
	}, _ handler.StepContext) (map[string]string, error) {
		return map[string]string{"greeting": "Hello, " + in.Name}, nil
	})
	runner.Main(runner.Program{
		Name:     "greeter",
		Handlers: []runner.Registration{{Name: "greet", Handler: greet}},
		// What a realm.yaml handlers entry may `use` (-manifest).
		Registry: map[string]handler.Handler{"greet": greet},
	})
}

// A program's own flags sit next to the runner's; Setup reads them once
// the command line is parsed, before the runner starts.
func ExampleMain_ownFlags() {
	var region string
	runner.Main(runner.Program{
		Name:  "regional",
		Flags: func(fs *flag.FlagSet) { fs.StringVar(&region, "region", "eu", "the region served") },
		Setup: func(_ context.Context, f *runner.Flags) error {
			f.Name += "-" + region
			return nil
		},
		Handlers: []runner.Registration{{Name: "noop", Handler: handler.Func(
			func(context.Context, handler.Inputs, handler.StepContext) (handler.Result, error) {
				return handler.Result{}, nil // the zero Result completes the step with {}
			})}},
	})
}
