package realmtest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/realm-go/realm/engine-svc/realmtest"
	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
)

type order struct {
	Quantity float64 `json:"quantity"`
}

type price struct {
	UnitPrice float64 `json:"unit_price"`
}

// orderTotal is examples/orders.yaml's order_total handler.
var orderTotal = runner.Registration{Name: "order_total", Handler: handler.TypedConfig(
	func(_ context.Context, in order, c price, _ handler.StepContext) (map[string]float64, error) {
		return map[string]float64{"total": in.Quantity * c.UnitPrice}, nil
	})}

// In a test, Run plays every fixture of a folder against the workflow, one
// subtest per fixture, with the handlers served by a runner in the test
// process:
//
//	func TestOrders(t *testing.T) {
//		realmtest.Run(t, "orders.yaml", "fixtures/orders", realmtest.Options{
//			Handlers: []runner.Registration{orderTotal},
//		})
//	}
func ExampleRun() {
	testOrders := func(t *testing.T) {
		realmtest.Run(t, filepath.Join("..", "..", "examples", "orders.yaml"),
			filepath.Join("..", "..", "examples", "fixtures", "orders"),
			realmtest.Options{Handlers: []runner.Registration{orderTotal}})
	}
	_ = testOrders // a test function: go test runs it
}

// Outside a test (a command, a CI report), Open starts the in-process
// engine and Suite.Run plays one fixture at a time; Run does the same for
// each fixture of a folder.
func ExampleOpen() {
	examples := filepath.Join("..", "..", "examples")
	suite, err := realmtest.Open(context.Background(), filepath.Join(examples, "orders.yaml"),
		realmtest.Options{Handlers: []runner.Registration{orderTotal}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer suite.Close()

	fixtures, err := realmtest.LoadFixturesFromDir(filepath.Join(examples, "fixtures", "orders"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range fixtures {
		res := suite.Run(context.Background(), f)
		fmt.Printf("%v %s: %s\n", res.Passed, res.Name, res.Phase)
	}
	// Output:
	// true a large order is priced by hand: aborted
	// true a small order is priced and confirmed: completed
}
