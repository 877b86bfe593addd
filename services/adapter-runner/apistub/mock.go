package apistub

// MockExample is a `mock` manifest entry answering get_order, and the
// output a step calling it records. The mock adapter calls no service, so
// there is no stub.
func MockExample() Example {
	order := map[string]any{"id": "A-17", "total": 40.0, "currency": "EUR"}
	return Example{
		Adapter: "mock",
		Config: map[string]any{"responses": map[string]any{
			"get_order": map[string]any{"status": 200.0, "data": order},
		}},
		Method:    "fetch",
		Operation: "get_order",
		Params:    map[string]any{"id": "A-17"},
		Output:    order,
	}
}
