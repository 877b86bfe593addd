// Package apistub holds local stand-ins for the outside APIs the catalog
// adapters speak to (GitHub, Slack, Airtable, …): httptest servers that
// record each request and answer as the real service does, including its
// failures. The adapters' unit tests and the end-to-end tests (engine-svc
// and adapter-runner as programs) share them.
package apistub

// Example is one catalog adapter's end-to-end case: the manifest entry
// that builds it on a running stub, one call, and what the step records.
type Example struct {
	// Adapter is the catalog name (the entry's `use:`).
	Adapter string
	// Config is the entry's `config:`, pointing at the stub; credentials
	// are `${secret:NAME}` references whose values Env holds.
	Config map[string]any
	// Env is the adapter runner's environment the secrets come from.
	Env map[string]string
	// Method and Operation are the step's service_method and operation.
	Method, Operation string
	// Params are the step's params (its input_map from run.params).
	Params map[string]any
	// Output is the step's recorded output.
	Output map[string]any
}
