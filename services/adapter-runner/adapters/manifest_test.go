package adapters_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/services/adapter-runner/adapters"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAManifestAdapterSendsItsSecretFromTheConfiguredSources(t *testing.T) {
	t.Parallel()
	svc := newService(t, reply{status: 200, body: `{"id":1}`})
	dir := t.TempDir()
	writeFile(t, dir, ".env", "# local\nLEDGER_TOKEN='from-dotenv'\nOTHER=x\n")
	path := writeFile(t, dir, "realm.yaml", `version: 1
secrets: { sources: [env, dotenv] }
adapters:
  ledger:
    use: http
    config:
      base_url: `+svc.srv.URL+`/v2
      allow_hosts: [`+svc.srv.Listener.Addr().String()+`]
      headers: { X-Cost: "$$5" }
      auth: { type: bearer, token: '${secret:LEDGER_TOKEN}' }
  disk:
    use: filesystem
handlers:
  left_alone: { use: ./x.mjs }
`)
	for _, tt := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"env first", map[string]string{"LEDGER_TOKEN": "from-env"}, "Bearer from-env"},
		{"then the dotenv file", nil, "Bearer from-dotenv"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			adps, err := adapters.LoadManifest(path, adapters.Options{LookupEnv: env(tt.env)}, dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Sorted(maps.Keys(adps)); !slices.Equal(got, []string{"disk", "ledger"}) {
				t.Fatalf("adapters = %v", got)
			}
			s := serve(t, adps)
			resp, err := s.client.CallAdapter(context.Background(), &realmv1.CallAdapterRequest{Adapter: "ledger", Method: "create", Operation: "claims",
				Params: mustStruct(t, map[string]any{"amount": 3.0}), Config: mustStruct(t, map[string]any{"adapter": "ledger", "trust": "engine_managed", "service": "ledger"})})
			if err != nil || resp.GetError() != nil {
				t.Fatalf("CallAdapter: %v %v", err, resp.GetError())
			}
			reqs := svc.got()
			r := reqs[len(reqs)-1]
			if r.path != "/v2/claims" || r.header.Get("Authorization") != tt.want || r.header.Get("X-Cost") != "$5" {
				t.Errorf("request %s, Authorization %q, X-Cost %q", r.path, r.header.Get("Authorization"), r.header.Get("X-Cost"))
			}
		})
	}
}

// TestEveryCatalogNameIsBuiltIn: the spec's ten catalog names all build
// (§13.2); none is refused as missing from the runner.
func TestEveryCatalogNameIsBuiltIn(t *testing.T) {
	t.Parallel()
	for _, name := range adapters.CatalogNames {
		if name != adapters.NameFilesystem && !slices.Contains(adapters.Built(), name) {
			t.Errorf("catalog adapter '%s' is not built into the adapter runner", name)
		}
	}
}

func TestABadManifestIsRefusedWithItsReason(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, want string
	}{
		{"no version", "adapters: {}\n", "must have required property 'version'"},
		{"unknown key", "version: 1\nextra: 1\n", "manifest: unknown key 'extra'"},
		{"unresolved secret", "version: 1\nsecrets: { sources: [env] }\nadapters:\n  l: { use: http, config: { base_url: 'http://x', auth: { token: '${secret:NOPE}' } } }\n",
			"adapters.l.config.auth.token → ${secret:NOPE}"},
		{"malformed secret", "version: 1\nadapters:\n  l: { use: http, config: { base_url: '${secret:lower}' } }\n", "malformed secret reference '${secret:lower}'"},
		{"an unknown catalog name", "version: 1\nadapters:\n  x: { use: ftp }\n", "unknown catalog adapter 'ftp'"},
		{"filesystem with config", "version: 1\nadapters:\n  d: { use: filesystem, config: { root: / } }\n", "catalog adapter 'filesystem' takes no config"},
		{"no use", "version: 1\nadapters:\n  d: { config: {} }\n", "adapters.d needs 'use:'"},
		{"an http config key it does not know", "version: 1\nadapters:\n  l: { use: http, config: { base_url: 'https://x', allow_private_network: true } }\n",
			"constructing adapters.l (use: http) failed: adapter 'l': config: unknown key 'allow_private_network' (known: allow_hosts, auth, base_url, headers)"},
		{"allow_hosts that are not hosts", "version: 1\nadapters:\n  l: { use: http, config: { base_url: 'https://x', allow_hosts: ['http://10.0.0.1/'] } }\n",
			"config.allow_hosts[0] must be a host or host:port"},
		{"a credential without its base_url", "version: 1\nadapters:\n  l: { use: http, config: { auth: { token: t } } }\n",
			"config.auth needs config.base_url next to it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := writeFile(t, dir, "realm.yaml", tt.body)
			_, err := adapters.LoadManifest(path, adapters.Options{LookupEnv: env(nil)}, dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
