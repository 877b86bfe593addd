package runner_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
)

type order struct {
	Quantity float64 `json:"quantity"`
}

type price struct {
	UnitPrice float64 `json:"unit_price"`
}

// Serve registers the runner's handlers with the engine, then runs the
// steps the engine sends. Here a stand-in for engine-svc's registry says
// what it was told, and then calls the handler the way the engine does.
func ExampleServe() {
	orderTotal := handler.TypedConfig(func(_ context.Context, in order, c price, _ handler.StepContext) (map[string]float64, error) {
		return map[string]float64{"total": in.Quantity * c.UnitPrice}, nil
	})

	engine := startEngineStandIn()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() {
		served <- runner.Serve(ctx, runner.Options{
			Name:       "shop",
			EngineAddr: engine.addr,
			Logger:     slog.New(slog.DiscardHandler),
		}, runner.Registration{Name: "order_total", Handler: orderTotal})
	}()

	reg := <-engine.registered
	fmt.Println("registered:", reg.GetRunnerName(), reg.GetHandlers()[0].GetName())

	conn, _ := grpc.NewClient(reg.GetEndpoint(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	inputs, _ := structpb.NewStruct(map[string]any{"params": map[string]any{"quantity": 4}})
	config, _ := structpb.NewStruct(map[string]any{"unit_price": 12.5})
	resp, err := realmv1.NewRunnerServiceClient(conn).ExecuteHandler(ctx, &realmv1.ExecuteHandlerRequest{
		Handler: "order_total", Inputs: inputs, Config: config, Attempt: 1,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("output:", resp.GetData().GetStructValue().AsMap())

	stop() // deregisters, lets running steps finish, and returns
	fmt.Println("stopped:", <-served)
	// Output:
	// registered: shop order_total
	// output: map[total:50]
	// stopped: <nil>
}

// engineStandIn is the part of engine-svc a runner talks to: the
// capability registry.
type engineStandIn struct {
	realmv1.UnimplementedRegistryServiceServer
	addr       string
	registered chan *realmv1.RegisterRequest
}

func startEngineStandIn() *engineStandIn {
	e := &engineStandIn{registered: make(chan *realmv1.RegisterRequest, 1)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	e.addr = lis.Addr().String()
	srv := grpc.NewServer()
	realmv1.RegisterRegistryServiceServer(srv, e)
	go func() { _ = srv.Serve(lis) }()
	return e
}

func (e *engineStandIn) Register(_ context.Context, req *realmv1.RegisterRequest) (*realmv1.RegisterResponse, error) {
	select {
	case e.registered <- req:
	default:
	}
	return &realmv1.RegisterResponse{RunnerId: "runner-1"}, nil
}

func (e *engineStandIn) Renew(context.Context, *realmv1.RenewRequest) (*realmv1.RenewResponse, error) {
	return &realmv1.RenewResponse{}, nil
}

func (e *engineStandIn) Deregister(context.Context, *realmv1.DeregisterRequest) (*realmv1.DeregisterResponse, error) {
	return &realmv1.DeregisterResponse{}, nil
}
