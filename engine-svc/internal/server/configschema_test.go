package server_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// httpSchema is a config_schema like the http adapter's: the keys it
// reads, nothing else.
const httpSchema = `{"type":"object","additionalProperties":false,"required":["base_url"],
"properties":{"base_url":{"type":"string","pattern":"^https?://"},"headers":{"type":"object","additionalProperties":{"type":"string"}}}}`

// answers is an adapter for tests that only register: it answers with
// nothing.
func answers(*realmv1.CallAdapterRequest) *realmv1.CallAdapterResponse {
	return &realmv1.CallAdapterResponse{}
}

// crmWith is the crm workflow whose add_contact step (at line 7) carries
// config.
func crmWith(config string) []byte {
	return []byte(fmt.Sprintf(crm, "    config: "+config+"\n"))
}

// specs registers http with a spec.
func specs(schema string) *realmv1.RegisterRequest {
	return &realmv1.RegisterRequest{Adapters: []string{"http"}, AdapterSpecs: []*realmv1.AdapterSpec{{Name: "http", ConfigSchemaJson: schema}}}
}

func TestRegistrationChecksAServiceStepsConfigAgainstItsAdaptersConfigSchema(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		runner *realmv1.RegisterRequest // nil: no runner serves the adapter
		config string
		want   string // the report's error, "" when registered
	}{
		{"a config that fits the schema", specs(httpSchema), "{ base_url: 'https://crm.test', headers: { X-Tenant: acme } }", ""},
		{"a config with a key the schema does not allow", specs(httpSchema), "{ base_url: 'https://crm.test', list: vip }",
			"Step 'add_contact': config validation failed against adapter config_schema: (root) must NOT have additional properties ('list') (step at line 7)"},
		{"a config missing what the schema requires", specs(httpSchema), "{ headers: { X-Tenant: acme } }",
			"Step 'add_contact': config validation failed against adapter config_schema: (root) must have required property 'base_url' (step at line 7)"},
		{"a config of the wrong type", specs(httpSchema), "{ base_url: 'ftp://crm.test' }",
			`Step 'add_contact': config validation failed against adapter config_schema: /base_url must match pattern "^https?://" (step at line 7)`},
		{"config on an adapter that declares no schema", specs(""), "{ list: vip }",
			"Step 'add_contact': 'config' declared but adapter 'http' does not declare 'config_schema' (step at line 7)"},
		// The loader drops an empty config: it merges nothing.
		{"an empty config on an adapter that declares no schema", specs(""), "{}", ""},
		// Unknown here: the step waits for a runner, whose adapter refuses
		// config it does not read at the call.
		{"no runner serves the adapter", nil, "{ list: vip }", ""},
		{"its runner sent only names", &realmv1.RegisterRequest{Adapters: []string{"http"}}, "{ list: vip }", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, "miniredis")
			if tt.runner != nil {
				serveAdapters(t, e, tt.runner, answers)
			}
			resp := e.register(t, crmWith(tt.config))
			if tt.want == "" {
				if !resp.GetRegistered() {
					t.Fatalf("refused: %v", resp.GetReport().GetErrors())
				}
				return
			}
			if resp.GetRegistered() || strings.Join(resp.GetReport().GetErrors(), "\n") != tt.want {
				t.Fatalf("registered=%v errors=%q, want %q", resp.GetRegistered(), resp.GetReport().GetErrors(), tt.want)
			}
			if got := resp.GetReport().GetText(); got != "Invalid workflow: "+tt.want+"\n" {
				t.Errorf("text = %q", got)
			}
			// validate says the same, and stores nothing either way.
			v, err := e.client.ValidateWorkflow(ctx(t), &realmv1.ValidateWorkflowRequest{Source: &realmv1.WorkflowSource{Yaml: crmWith(tt.config)}})
			if err != nil {
				t.Fatal(err)
			}
			if v.GetReport().GetValid() || strings.Join(v.GetReport().GetErrors(), "\n") != tt.want {
				t.Errorf("validate: valid=%v errors=%q", v.GetReport().GetValid(), v.GetReport().GetErrors())
			}
		})
	}
}

// Every backend keeps the specs: a step's config is checked against what a
// runner registered through any of them.
func TestRunnerAdapterSpecsAreKeptInTheRegistry(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, e *env) {
		serveAdapters(t, e, specs(httpSchema), answers)
		caps, err := e.registry.ListCapabilities(ctx(t), &realmv1.ListCapabilitiesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		// A renewal rewrites the record: the specs stay.
		if _, err := e.registry.Renew(ctx(t), &realmv1.RenewRequest{RunnerId: caps.GetRunners()[0].GetRunnerId()}); err != nil {
			t.Fatal(err)
		}
		if caps, err = e.registry.ListCapabilities(ctx(t), &realmv1.ListCapabilitiesRequest{}); err != nil {
			t.Fatal(err)
		}
		if got := caps.GetRunners()[0].GetAdapterSpecs(); len(got) != 1 || got[0].GetName() != "http" || got[0].GetConfigSchemaJson() != httpSchema {
			t.Errorf("adapter_specs = %v", got)
		}
		if resp := e.register(t, crmWith("{ list: vip }")); resp.GetRegistered() {
			t.Error("a config the schema refuses was registered")
		}
		if resp := e.register(t, crmWith("{ base_url: 'https://crm.test' }")); !resp.GetRegistered() {
			t.Errorf("refused: %v", resp.GetReport().GetErrors())
		}
	})
}

// A workflow file run without registering (realm agent --workflow) is not
// held to the config_schema rule (spec §13.1).
func TestAFileRunIsNotHeldToTheConfigSchemaRule(t *testing.T) {
	t.Parallel()
	e := setup(t, "miniredis")
	a := serveAdapters(t, e, specs(""), func(*realmv1.CallAdapterRequest) *realmv1.CallAdapterResponse {
		return &realmv1.CallAdapterResponse{Data: value(t, map[string]any{"status": 201.0, "data": map[string]any{"id": "c-1"}})}
	})
	resp := startFromSource(t, e, string(crmWith("{ list: vip }")))
	if rep := resp.GetReport(); rep != nil && !rep.GetValid() {
		t.Fatalf("refused: %v", rep.GetErrors())
	}
	if r := resp.GetReply(); r.GetRunPhase() != realmv1.RunPhase_RUN_PHASE_COMPLETED {
		t.Fatalf("reply = %v", r)
	}
	if got := a.last.GetConfig().AsMap()["list"]; got != "vip" {
		t.Errorf("the adapter was called with config %v", a.last.GetConfig().AsMap())
	}
}

func TestARunnerWhoseConfigSchemaRealmCannotUseIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, "miniredis")
	for _, tt := range []struct{ name, schema, want string }{
		{"not JSON", `{"type":`, "adapter 'http' declares a config_schema realm cannot use: 'config_schema' is not JSON"},
		{"not a schema", `{"type":"obect"}`, "adapter 'http' declares a config_schema realm cannot use: 'config_schema' is not a valid JSON Schema"},
	} {
		req := specs(tt.schema)
		req.Endpoint = "127.0.0.1:1"
		_, err := e.registry.Register(ctx(t), req)
		msg := status.Convert(err).Message()
		if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(msg, tt.want) || !strings.HasSuffix(msg, ". Nothing was registered.") || strings.Contains(msg, "..") {
			t.Errorf("%s: err = %v, want %q…", tt.name, err, tt.want)
		}
	}
	caps, err := e.registry.ListCapabilities(ctx(t), &realmv1.ListCapabilitiesRequest{})
	if err != nil || len(caps.GetRunners()) != 0 {
		t.Errorf("registered after a refusal: %v %v", caps, err)
	}
}

// A step goes to any runner serving its adapter: its config must fit what
// each of them declares.
func TestAStepsConfigMustFitEveryLiveRunnersDeclaration(t *testing.T) {
	t.Parallel()
	e := setup(t, "miniredis")
	serveAdapters(t, e, specs(httpSchema), answers)
	if resp := e.register(t, crmWith("{ base_url: 'https://crm.test' }")); !resp.GetRegistered() {
		t.Fatalf("refused with one runner: %v", resp.GetReport().GetErrors())
	}
	serveAdapters(t, e, specs(""), answers)
	resp := e.register(t, crmWith("{ base_url: 'https://crm.test' }"))
	want := "Step 'add_contact': 'config' declared but adapter 'http' does not declare 'config_schema' (step at line 7)"
	if resp.GetRegistered() || strings.Join(resp.GetReport().GetErrors(), "\n") != want {
		t.Errorf("registered=%v errors=%q, want %q", resp.GetRegistered(), resp.GetReport().GetErrors(), want)
	}
}
