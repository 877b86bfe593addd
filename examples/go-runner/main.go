// Command go-runner is a Realm handler runner written the way a project
// outside this repository writes one: its handlers (handlers.go) are typed
// with handler.TypedConfig, its main is runner.Main, and its workflow
// (workflow.yaml) is tested offline with realmtest (workflow_test.go).
//
//	go run . -engine-addr 127.0.0.1:7070
//
// -help lists the flags.
package main

import "github.com/realm-go/realm/pkg/runner"

func main() {
	runner.Main(runner.Program{Name: "shipping-runner", Handlers: registrations()})
}
