// Command example-runner is a handler runner serving the example handlers
// (package handlers) to engine-svc: it registers them with the engine's
// capability registry and runs the auto steps that name them.
//
//	example-runner [-engine-addr host:port] [-listen host:port] [-manifest realm.yaml]
//
// -help lists every flag. SIGINT or SIGTERM deregisters it and stops it
// gracefully.
package main

import (
	"github.com/realm-go/realm/pkg/runner"
	"github.com/realm-go/realm/services/example-runner/handlers"
)

func main() {
	runner.Main(runner.Program{
		Name:     "example-runner",
		Handlers: handlers.Registrations(),
		Registry: handlers.Registry(),
	})
}
