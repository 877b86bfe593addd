package replicas

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/services/adapter-runner/apistub"
)

// catalogExamples are the catalog adapters' end-to-end cases, each on its
// service's stub.
var catalogExamples = []func(testing.TB) apistub.Example{
	httpExample,
	func(tb testing.TB) apistub.Example { return apistub.GorgiasExample(apistub.NewGorgias(tb)) },
	func(tb testing.TB) apistub.Example { return apistub.ShopifyExample(apistub.NewShopify(tb)) },
	func(tb testing.TB) apistub.Example { return apistub.ParcelPanelExample(apistub.NewParcelPanel(tb)) },
	func(tb testing.TB) apistub.Example { return apistub.AirtableExample(apistub.NewAirtable(tb)) },
	func(tb testing.TB) apistub.Example { return apistub.NotionExample(apistub.NewNotion(tb)) },
	func(testing.TB) apistub.Example { return apistub.MockExample() },
	func(tb testing.TB) apistub.Example { return apistub.GitHubExample(apistub.NewGitHub(tb)) },
	func(tb testing.TB) apistub.Example { return apistub.SlackExample(apistub.NewSlack(tb)) },
}

// httpExample is the http adapter built from a manifest entry, on a local
// service that answers the contact it was sent.
func httpExample(tb testing.TB) apistub.Example {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/contacts" || r.Header.Get("Authorization") != "Bearer crm-token" {
			http.Error(w, `{"error":"unexpected request"}`, http.StatusBadRequest)
			return
		}
		var in map[string]any
		_ = json.NewDecoder(r.Body).Decode(&in)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "c-1", "email": in["email"]})
	}))
	tb.Cleanup(srv.Close)
	return apistub.Example{
		Adapter: "http",
		Config: map[string]any{"base_url": srv.URL + "/v1", "allow_hosts": []any{strings.TrimPrefix(srv.URL, "http://")},
			"auth": map[string]any{"type": "bearer", "token": "${secret:CRM_TOKEN}"}},
		Env:    map[string]string{"CRM_TOKEN": "crm-token"},
		Method: "create", Operation: "contacts",
		Params: map[string]any{"email": "ana@example.com"},
		Output: map[string]any{"id": "c-1", "email": "ana@example.com"},
	}
}

// TestEachCatalogAdapterRunsAStepThroughTheEngine runs, for every catalog
// adapter, a workflow whose one step uses a service on that adapter: the
// adapter runner (a program, built from a manifest naming every adapter on
// its stub, secrets from its environment) registers with engine-svc (a
// program on the real Redis), and the run completes with the output the
// stub's answer gives.
func TestEachCatalogAdapterRunsAStepThroughTheEngine(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	dir := t.TempDir()
	build := exec.Command(goTool(), "build", "-o", dir+string(os.PathSeparator), "./engine-svc/cmd/engine-svc", "./services/adapter-runner/cmd/adapter-runner")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	examples := make([]apistub.Example, len(catalogExamples))
	adapters := map[string]any{}
	env := os.Environ()
	for i, f := range catalogExamples {
		ex := f(t)
		examples[i] = ex
		adapters[entryName(i, ex)] = map[string]any{"use": ex.Adapter, "config": ex.Config}
		for k, v := range ex.Env {
			env = append(env, k+"="+v)
		}
	}
	manifest, err := yaml.Marshal(map[string]any{"version": 1, "secrets": map[string]any{"sources": []any{"env"}}, "adapters": adapters})
	if err != nil {
		t.Fatal(err)
	}
	manifestPath := filepath.Join(dir, "realm.yaml")
	if err := os.WriteFile(manifestPath, manifest, 0o600); err != nil {
		t.Fatal(err)
	}

	url := redisURL()
	prefix := isolatedPrefix(t, url)
	engineAddr := freeAddr(t)
	bins := binaries{engine: filepath.Join(dir, "engine-svc")}
	eng, err := startEngine(bins, "engine-svc", engineAddr, url, prefix, 30*time.Second, t)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.kill()
	ar, err := startEnv(t, "adapter-runner", filepath.Join(dir, "adapter-runner"), env,
		"-engine-addr", engineAddr, "-listen", freeAddr(t), "-manifest", manifestPath, "-lease", "10s")
	if err != nil {
		t.Fatal(err)
	}
	defer ar.kill()

	conn, err := grpc.NewClient(engineAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	regs := realmv1.NewRegistryServiceClient(conn)
	if err := poll("the adapter runner to register", 20*time.Second, func() bool {
		caps, err := regs.ListCapabilities(ctx, &realmv1.ListCapabilitiesRequest{})
		return err == nil && len(caps.GetRunners()) > 0
	}); err != nil {
		t.Fatalf("%v\nadapter-runner: %s", err, ar.out.String())
	}

	eng2 := realmv1.NewEngineServiceClient(conn)
	for i, ex := range examples {
		t.Run(ex.Adapter, func(t *testing.T) {
			id := "catalog-" + entryName(i, ex)
			if reg, err := eng2.RegisterWorkflow(ctx, &realmv1.RegisterWorkflowRequest{Source: &realmv1.WorkflowSource{
				Yaml: []byte(catalogWorkflow(id, entryName(i, ex), ex))}}); err != nil || !reg.GetRegistered() {
				t.Fatalf("register: %v %v", reg, err)
			}
			params, err := structpb.NewStruct(ex.Params)
			if err != nil {
				t.Fatal(err)
			}
			started, err := eng2.StartRun(ctx, &realmv1.StartRunRequest{WorkflowId: id, Params: params})
			run := started.GetReply()
			if err != nil {
				t.Fatal(err)
			}
			if run.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
				t.Fatalf("run = %v\nadapter-runner: %s", run, tail(ar.out.String(), 30))
			}
			exp, err := eng2.ExportRun(ctx, &realmv1.ExportRunRequest{RunId: run.GetRunId()})
			if err != nil {
				t.Fatal(err)
			}
			var bundle struct {
				Run struct {
					Outputs map[string]any `json:"outputs"`
				} `json:"run"`
			}
			if err := json.Unmarshal(exp.GetBundle(), &bundle); err != nil {
				t.Fatal(err)
			}
			if got := bundle.Run.Outputs["call"]; !reflect.DeepEqual(jsonRoundTrip(t, got), jsonRoundTrip(t, ex.Output)) {
				t.Errorf("output = %v, want %v", pretty(got), pretty(ex.Output))
			}
		})
	}
}

// entryName is the manifest entry of example i.
func entryName(i int, ex apistub.Example) string { return fmt.Sprintf("%s_%d", ex.Adapter, i) }

// catalogWorkflow is a workflow of one service step calling ex's
// operation, its params taken from the run's params.
func catalogWorkflow(id, adapter string, ex apistub.Example) string {
	var b strings.Builder
	fmt.Fprintf(&b, "id: %s\nname: %s\nversion: 1\nservices:\n  svc: { adapter: %s, trust: engine_managed }\n", id, id, adapter)
	fmt.Fprintf(&b, "steps:\n  call:\n    description: Call the service.\n    execution: auto\n    uses_service: svc\n    service_method: %s\n    operation: %s\n", ex.Method, ex.Operation)
	if len(ex.Params) > 0 {
		b.WriteString("    input_map:\n")
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range ex.Params {
				if !yield(k) {
					return
				}
			}
		}) {
			fmt.Fprintf(&b, "      %s: run.params.%s\n", k, k)
		}
	}
	return b.String()
}

func jsonRoundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
