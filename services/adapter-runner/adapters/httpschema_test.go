package adapters_test

import (
	"encoding/json"
	"strings"
	"testing"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/schema"
	"github.com/realm-go/realm/services/adapter-runner/adapters"
)

// publishedSchema compiles the config_schema a registration carries for
// adapter, as the engine does; nil when the adapter declares none.
func publishedSchema(t *testing.T, req *realmv1.RegisterRequest, adapter string) *schema.Schema {
	t.Helper()
	for _, spec := range req.GetAdapterSpecs() {
		if spec.GetName() != adapter {
			continue
		}
		if spec.GetConfigSchemaJson() == "" {
			return nil
		}
		var doc any
		if err := json.Unmarshal([]byte(spec.GetConfigSchemaJson()), &doc); err != nil {
			t.Fatalf("%s's config_schema is not JSON: %v", adapter, err)
		}
		s, problems := schema.Compile("config_schema", doc)
		if s == nil {
			t.Fatalf("%s's config_schema does not compile: %v", adapter, problems)
		}
		return s
	}
	t.Fatalf("the registration has no spec for %s: %v", adapter, req.GetAdapterSpecs())
	return nil
}

func TestHTTPAdapterPublishesAConfigSchemaForTheStepConfigItReads(t *testing.T) {
	t.Parallel()
	s, _ := httpRunner(t, nil)
	sch := publishedSchema(t, s.register, adapters.NameHTTP)
	if sch == nil {
		t.Fatal("the http adapter declares no config_schema: every http step with config would be refused at registration")
	}
	tests := []struct {
		name    string
		config  map[string]any
		refused string // the first validator message, "" when accepted
	}{
		// The step configs the http adapter's own tests call it with.
		{"base_url alone", map[string]any{"base_url": "http://127.0.0.1:8080/api/"}, ""},
		{"bearer auth", map[string]any{"base_url": "https://x.test", "auth": map[string]any{"token_env": "REALM_SECRET_LEDGER"}}, ""},
		{"basic auth", map[string]any{"base_url": "https://x.test", "auth": map[string]any{"type": "basic", "token_env": "REALM_SECRET_BASIC"}}, ""},
		{"header auth, named", map[string]any{"base_url": "https://x.test", "auth": map[string]any{"type": "header", "token_env": "REALM_SECRET_LEDGER", "header_name": "X-Api-Key"}}, ""},
		{"static headers", map[string]any{"base_url": "https://x.test", "headers": map[string]any{"X-Tenant": "acme"}}, ""},
		// What it would not read, or refuse at the call.
		{"a key it does not read", map[string]any{"base_url": "https://x.test", "list": "vip"}, "(root) must NOT have additional properties"},
		{"no base_url", map[string]any{"headers": map[string]any{"X-Tenant": "acme"}}, "(root) must have required property 'base_url'"},
		{"a base_url that is not http", map[string]any{"base_url": "file:///etc"}, `/base_url must match pattern "^https?://"`},
		{"a literal token", map[string]any{"base_url": "https://x.test", "auth": map[string]any{"token": "s3cret", "token_env": "REALM_SECRET_X"}}, "/auth must NOT have additional properties"},
		{"an auth type it does not know", map[string]any{"base_url": "https://x.test", "auth": map[string]any{"type": "oauth", "token_env": "REALM_SECRET_X"}}, "/auth/type must be equal to one of the allowed values"},
		{"a header that is not a string", map[string]any{"base_url": "https://x.test", "headers": map[string]any{"X-N": 3.0}}, "/headers/X-N must be string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := sch.Validate(tt.config)
			switch {
			case tt.refused == "" && len(errs) > 0:
				t.Errorf("refused: %s", errs[0].RootedText())
			case tt.refused != "" && len(errs) == 0:
				t.Errorf("accepted, want %q", tt.refused)
			case tt.refused != "" && errs[0].RootedText() != tt.refused:
				t.Errorf("refused with %q, want %q", errs[0].RootedText(), tt.refused)
			}
		})
	}
}

func TestAManifestEntrysOwnSettingsAreLeftOutOfItsConfigSchema(t *testing.T) {
	t.Parallel()
	h, err := adapters.NewHTTP("crm", map[string]any{
		"base_url": "https://crm.test", "auth": map[string]any{"token": "t", "type": "bearer"},
	}, adapters.Options{})
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(h.ConfigSchema())
	var v any
	_ = json.Unmarshal(doc, &v)
	sch, problems := schema.Compile("config_schema", v)
	if sch == nil {
		t.Fatalf("does not compile: %v", problems)
	}
	// The entry's base_url and auth win over a step's: a step that writes
	// them is refused rather than silently overridden.
	for _, cfg := range []map[string]any{
		{"base_url": "https://elsewhere.test"},
		{"auth": map[string]any{"token_env": "REALM_SECRET_X"}},
	} {
		if errs := sch.Validate(cfg); len(errs) == 0 || !strings.Contains(errs[0].Message, "additional properties") {
			t.Errorf("%v: errors %v, want an additional property refused", cfg, errs)
		}
	}
	if errs := sch.Validate(map[string]any{"headers": map[string]any{"X-Tenant": "acme"}}); len(errs) > 0 {
		t.Errorf("headers refused: %v", errs[0].RootedText())
	}
}

func TestFilesystemAdapterDeclaresNoConfigSchema(t *testing.T) {
	t.Parallel()
	adps, err := adapters.Catalog(loopbackAllowed(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, adps)
	// It takes no step config, so a step of it may not carry one.
	if sch := publishedSchema(t, s.register, adapters.NameFilesystem); sch != nil {
		t.Error("the filesystem adapter declares a config_schema")
	}
}
