package golden

import (
	"encoding/json"
	"testing"
)

// priced builds its handler's input with an input_map from run.params, and
// its input_schema checks what the map builds (seed 000, execute_step).
const priced = `id: priced
name: Priced
version: 1
steps:
  price:
    description: Price the order.
    execution: auto
    handler: order_total
    config: { unit_price: 12.5 }
    input_map:
      quantity: run.params.count
    input_schema:
      type: object
      required: [quantity]
      properties:
        quantity: { type: number, minimum: 1 }
`

// mappedRefusal is execute_step's reply, as an MCP client reads it, for
// an input_map step whose map builds what its schema refuses. The seeds
// show no example of it, so it is kept here rather than among the
// seed-verbatim goldens of testdata; it is compared by the same rules: a
// field it leaves out (rejections, threshold, blocked_reason) must be
// absent or empty.
const mappedRefusal = `{
  "command": "price",
  "run_id": "…",
  "run_version": 0,
  "status": "error",
  "errors": ["Invalid input for step 'price'"],
  "error_code": "VALIDATION_INPUT_SCHEMA",
  "error_details": {
    "errors": [
      {
        "instancePath": "/quantity",
        "schemaPath": "#/properties/quantity/minimum",
        "keyword": "minimum",
        "params": { "comparison": ">=", "limit": 1 },
        "message": "must be >= 1"
      }
    ]
  },
  "agent_action": "report_to_user",
  "context_hint": "'price' cannot run (input_schema): /quantity must be >= 1. For 'price', start a run with params that fit, or correct its input_map or its input_schema and register the workflow again; then, after a fix, call advance_run; or end the run with abandon_run.",
  "run_phase": "running"
}`

func TestAnInputMapStepRefusedForWhatItsMapBuildsThroughMCP(t *testing.T) {
	t.Parallel()
	var want any
	if err := json.Unmarshal([]byte(mappedRefusal), &want); err != nil {
		t.Fatal(err)
	}
	eachBackend(t, func(t *testing.T, backend string) {
		st := newStack(t, backend)
		st.serveOrderTotal()
		st.register([]byte(priced))
		// What the map builds fits: the run completes, though its params
		// ({count}) do not.
		if r := st.start("priced", map[string]any{"count": 3}); r["run_phase"] != "completed" {
			t.Errorf("a map that fits: %s", pretty(r))
		}
		run := runID(st.start("priced", map[string]any{"count": 0}))
		got := st.execute(run, "price", map[string]any{})
		if diffs := Compare(want, got, Options{}); len(diffs) > 0 {
			t.Errorf("%s\nthe reply:\n%s", Report("mapped_refusal", diffs), pretty(got))
		}
	})
}
