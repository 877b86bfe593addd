package replicas

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
)

// A gate, a guard behind it and a step served by a handler runner.
const clusterWorkflowYAML = `id: cluster_shipping
name: Shipping on a Cluster
version: 1
steps:
  approve:
    description: Approve the shipment.
    execution: auto
    trust: human_confirmed
    gate:
      choices: [ship, hold]
      message: "Ship order {{ run.params.order }}?"
  only_if_shipping:
    description: Stop unless the order ships.
    execution: guard
    depends_on: [approve]
    abort_unless: ["approve.choice == 'ship'"]
    abort_message: The order was held.
  ship:
    description: Ship it.
    execution: auto
    handler: cluster_ship
    depends_on: [only_if_shipping]
    timeout_seconds: 30
`

// clusterAddrs is $REDIS_CLUSTER_ADDRS, else the Cluster make test starts.
func clusterAddrs() string {
	if v := strings.TrimSpace(os.Getenv("REDIS_CLUSTER_ADDRS")); v != "" {
		return v
	}
	return "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"
}

// clusterPrefix checks that the Cluster serves every slot and returns a key
// prefix of this test's own, deleted from every master when the test ends.
func clusterPrefix(t *testing.T, addrs string) string {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if info, err := c.ClusterInfo(ctx).Result(); err != nil || !strings.Contains(info, "cluster_state:ok") {
		_ = c.Close()
		t.Fatalf("Redis Cluster at %s is not serving (%v): run scripts/redis-cluster.sh (make test starts it) or set REDIS_CLUSTER_ADDRS", addrs, err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "realm-cluster-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			iter := m.Scan(ctx, 0, prefix+":*", 1000).Iterator()
			for iter.Next(ctx) {
				if err := m.Del(ctx, iter.Val()).Err(); err != nil {
					return err
				}
			}
			return iter.Err()
		})
		if err != nil {
			t.Logf("cleanup of %s: %v", prefix, err)
		}
	})
	return prefix
}

type shipHandler struct{ calls atomic.Int64 }

func (h *shipHandler) Execute(context.Context, handler.Inputs, handler.StepContext) (handler.Result, error) {
	h.calls.Add(1)
	return handler.Data(map[string]any{"shipped": true}), nil
}

// The engine-svc binary on the three-master Cluster (--redis-cluster-addrs,
// no REDIS_URL): a run waits at its gate, the answer passes the guard and
// the handler step runs, and the run completes.
func TestEngineBinaryDrivesARunOnTheCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addrs := clusterAddrs()
	prefix := clusterPrefix(t, addrs)
	bins := buildBinaries(t)

	p, addr := startEngineOn(t, bins, "engine-svc (cluster)", "--redis-cluster-addrs", addrs, "--redis-prefix", prefix)
	if !strings.Contains(p.out.String(), "cluster "+addrs) {
		t.Errorf("engine-svc does not log the Cluster it uses:\n%s", p.out.String())
	}

	driveShipping(ctx, t, addr)
}

// driveShipping registers the shipping workflow on the engine at addr,
// serves its handler, and drives a run through the gate, the guard and the
// handler step to completed.
func driveShipping(ctx context.Context, t *testing.T, addr string) {
	t.Helper()
	eng, conn, err := client.DialEngine(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reg, err := eng.RegisterWorkflow(ctx, &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: []byte(clusterWorkflowYAML), Path: "cluster_shipping.yaml"}})
	if err != nil || !reg.GetRegistered() {
		t.Fatalf("register: %v %s", err, reg.GetReport().GetText())
	}

	h := &shipHandler{}
	defer serveHandler(t, ctx, conn, addr, "cluster-runner", runner.Registration{Name: "cluster_ship", Handler: h})()

	params, err := structpb.NewStruct(map[string]any{"order": 4417})
	if err != nil {
		t.Fatal(err)
	}
	started, err := eng.StartRun(ctx, &realmv1.StartRunRequest{WorkflowId: "cluster_shipping", Params: params})
	if err != nil {
		t.Fatal(err)
	}
	opened := started.GetReply()
	gate := opened.GetGate()
	if opened.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_CONFIRM_REQUIRED || gate.GetDisplay() != "Ship order 4417?" {
		t.Fatalf("start: want the gate open, got %v", opened)
	}
	run := opened.GetRunId()
	answered, err := eng.SubmitHumanResponse(ctx, &realmv1.SubmitHumanResponseRequest{RunId: run, GateId: gate.GetGateId(), Choice: "ship",
		Caller: &realmv1.Caller{By: "cluster-test", BySource: "stated"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := answered.GetReply(); r.GetStatus() != realmv1.ReplyStatus_REPLY_STATUS_OK {
		t.Fatalf("answer: %v", r)
	}

	var phase realmv1.RunPhase
	if err := poll("the run to complete", 30*time.Second, func() bool {
		st, err := eng.GetRunState(ctx, &realmv1.GetRunStateRequest{RunId: run})
		if err != nil {
			return false
		}
		phase = st.GetState().GetRunPhase()
		if phase == realmv1.RunPhase_RUN_PHASE_COMPLETED || st.GetRefusal() != nil {
			return true
		}
		if phase != realmv1.RunPhase_RUN_PHASE_RUNNING && phase != realmv1.RunPhase_RUN_PHASE_UNSPECIFIED {
			return true // ended otherwise: reported below
		}
		_, _ = eng.AdvanceRun(ctx, &realmv1.AdvanceRunRequest{RunId: run})
		return false
	}); err != nil || phase != realmv1.RunPhase_RUN_PHASE_COMPLETED {
		t.Fatalf("run %s: phase %v (%v)", run, phase, err)
	}
	if n := h.calls.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want once", n)
	}
}

// The engine-svc binary on a master watched by a Sentinel of the test's
// own (--redis-sentinel-addrs, --redis-sentinel-master) drives the same run.
func TestEngineBinaryDrivesARunThroughSentinel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	master := startRedisServer(t)
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("sentinel monitor realmtest 127.0.0.1 %d 1\n", master)), 0o600); err != nil {
		t.Fatal(err)
	}
	sentinel := startRedisServer(t, conf, "--sentinel")
	bins := buildBinaries(t)
	sentinels := fmt.Sprintf("127.0.0.1:%d", sentinel)
	p, addr := startEngineOn(t, bins, "engine-svc (sentinel)", "--redis-sentinel-addrs", sentinels, "--redis-sentinel-master", "realmtest")
	if !strings.Contains(p.out.String(), "sentinel master realmtest via "+sentinels) {
		t.Errorf("engine-svc does not log the Sentinel it uses:\n%s", p.out.String())
	}
	driveShipping(ctx, t, addr)
	direct := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", master)})
	defer direct.Close()
	if keys, err := direct.Keys(ctx, "realm:*").Result(); err != nil || len(keys) == 0 {
		t.Errorf("the master holds no run keys: %v, %v", keys, err)
	}
}
