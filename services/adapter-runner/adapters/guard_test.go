package adapters_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/services/adapter-runner/adapters"
)

// guardedRunner serves the http adapter as a deployment runs it: the
// catalog's, plus a manifest entry "ledger" with config, under opts.
func guardedRunner(t *testing.T, opts adapters.Options, ledger map[string]any) *served {
	t.Helper()
	adps, err := adapters.Catalog(opts, "")
	if err != nil {
		t.Fatal(err)
	}
	if ledger != nil {
		if adps["ledger"], err = adapters.NewHTTP("ledger", ledger, opts); err != nil {
			t.Fatal(err)
		}
	}
	return serve(t, adps)
}

func callAdapter(t *testing.T, s *served, adapter string, config map[string]any) *realmv1.CallAdapterResponse {
	t.Helper()
	// Short: an unguarded call to an address nothing answers at would
	// otherwise hang until the limit (and then not be the refusal).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := s.client.CallAdapter(ctx, &realmv1.CallAdapterRequest{Adapter: adapter, Method: "fetch", Operation: "latest/meta-data",
		Params: mustStruct(t, nil), Config: mustStruct(t, config), RunId: "run-1", Step: "step"})
	if err != nil {
		t.Fatalf("CallAdapter: %v", err)
	}
	return resp
}

func TestTheHTTPAdapterRefusesAddressesInsideTheDeployment(t *testing.T) {
	t.Parallel()
	svc := newService(t, reply{status: 200, body: `{"secret":"instance credentials"}`})
	port := svc.srv.Listener.Addr().(*net.TCPAddr).Port
	local := func(host string) string { return "http://" + net.JoinHostPort(host, strconv.Itoa(port)) }
	tests := []struct {
		name, baseURL string
		allow         []string
		wantCode      errcode.Code
		wantMessage   string
	}{
		{"loopback 127.0.0.1", svc.srv.URL, nil, errcode.EngineAdapterFailed, "127.0.0.1 is a loopback address"},
		{"a name resolving to loopback", local("localhost"), nil, errcode.EngineAdapterFailed, "a loopback address"},
		{"loopback ::1", "http://[::1]:9", nil, errcode.EngineAdapterFailed, "::1 is a loopback address"},
		{"the cloud metadata service", "http://169.254.169.254", nil, errcode.EngineAdapterFailed, "169.254.169.254 is a link-local (cloud metadata) address"},
		{"IPv4-mapped metadata", "http://[::ffff:169.254.169.254]", nil, errcode.EngineAdapterFailed, "link-local"},
		{"IPv6 link-local", "http://[fe80::1]:9", nil, errcode.EngineAdapterFailed, "link-local"},
		{"10/8", "http://10.0.0.1:9", nil, errcode.EngineAdapterFailed, "private-network"},
		{"172.16/12", "http://172.16.5.4:9", nil, errcode.EngineAdapterFailed, "private-network"},
		{"192.168/16", "http://192.168.1.1:9", nil, errcode.EngineAdapterFailed, "private-network"},
		{"fc00::/7", "http://[fd00::1]:9", nil, errcode.EngineAdapterFailed, "private-network"},
		{"metadata through NAT64", "http://[64:ff9b::a9fe:a9fe]", nil, errcode.EngineAdapterFailed, "link-local"},
		{"carrier-grade NAT", "http://100.100.100.200", nil, errcode.EngineAdapterFailed, "shared"},
		{"unspecified", "http://0.0.0.0:9", nil, errcode.EngineAdapterFailed, "unspecified"},
		{"an allowance for another port", svc.srv.URL, []string{"127.0.0.1:1"}, errcode.EngineAdapterFailed, "loopback"},
		{"an allowance for another host", svc.srv.URL, []string{"localhost"}, errcode.EngineAdapterFailed, "loopback"},
		{"file://", "file:///etc/passwd", nil, errcode.AdapterValidationFailed, "must be an http:// or https:// URL"},
		{"gopher://", "gopher://127.0.0.1:70", nil, errcode.AdapterValidationFailed, "must be an http:// or https:// URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := guardedRunner(t, adapters.Options{AllowHosts: tt.allow}, nil)
			e := callAdapter(t, s, "http", map[string]any{"base_url": tt.baseURL}).GetError()
			if e.GetCode() != string(tt.wantCode) || e.GetRetryable() || !strings.Contains(e.GetMessage(), tt.wantMessage) {
				t.Errorf("error = %s retryable %v (%s), want %s not retryable, saying %q", e.GetCode(), e.GetRetryable(), e.GetMessage(), tt.wantCode, tt.wantMessage)
			}
		})
	}
	if n := len(svc.got()); n != 0 {
		t.Errorf("the loopback service got %d requests, want none", n)
	}
}

func TestAnAllowedHostIsReachedAndOnlyTheDeploymentAllowsIt(t *testing.T) {
	t.Parallel()
	svc := newService(t, reply{status: 200, body: `{"ok":true}`})
	exact := svc.srv.Listener.Addr().String()
	tests := []struct {
		name    string
		opts    adapters.Options
		adapter string
		config  map[string]any
		ledger  map[string]any
		want    errcode.Code
	}{
		{"the runner's allowance, exact host:port", adapters.Options{AllowHosts: []string{exact}}, "http", map[string]any{"base_url": svc.srv.URL}, nil, ""},
		{"the runner's allowance, any port", adapters.Options{AllowHosts: []string{"127.0.0.1"}}, "http", map[string]any{"base_url": svc.srv.URL}, nil, ""},
		{"a manifest entry's allow_hosts", adapters.Options{}, "ledger", nil, map[string]any{"base_url": svc.srv.URL, "allow_hosts": []any{exact}}, ""},
		{"a manifest entry's allowance is its own", adapters.Options{}, "http", map[string]any{"base_url": svc.srv.URL}, map[string]any{"base_url": svc.srv.URL, "allow_hosts": []any{exact}}, errcode.EngineAdapterFailed},
		{"a workflow cannot allow itself", adapters.Options{}, "http", map[string]any{"base_url": svc.srv.URL, "allow_hosts": []any{exact}}, nil, errcode.EngineAdapterFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := guardedRunner(t, tt.opts, tt.ledger)
			e := callAdapter(t, s, tt.adapter, tt.config).GetError()
			if e.GetCode() != string(tt.want) {
				t.Errorf("error = %s (%s), want %q", e.GetCode(), e.GetMessage(), tt.want)
			}
		})
	}
}

func TestARedirectFromAnAllowedHostToARefusedAddressIsRefused(t *testing.T) {
	t.Parallel()
	inside := newService(t, reply{status: 200, body: `{"secret":"x"}`})
	// The allowed service is allowed by its exact host:port; the one it
	// redirects to listens on another loopback port, which is not.
	allowed := newService(t, reply{status: 302, header: map[string]string{"Location": inside.srv.URL + "/admin"}})
	s := guardedRunner(t, adapters.Options{AllowHosts: []string{allowed.srv.Listener.Addr().String()}}, nil)
	e := callAdapter(t, s, "http", map[string]any{"base_url": allowed.srv.URL}).GetError()
	if e.GetCode() != string(errcode.EngineAdapterFailed) || !strings.Contains(e.GetMessage(), "is a loopback address") {
		t.Errorf("error = %s (%s), want ENGINE_ADAPTER_FAILED naming the loopback address", e.GetCode(), e.GetMessage())
	}
	if len(allowed.got()) != 1 || len(inside.got()) != 0 {
		t.Errorf("requests: allowed %d, inside %d; want 1 and 0", len(allowed.got()), len(inside.got()))
	}
}

func TestAWorkflowsSecretGoesOnlyToTheHostsItIsBoundTo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		bound func(service string) map[string][]string
		want  errcode.Code
	}{
		{"bound to the host", func(svc string) map[string][]string { return map[string][]string{"REALM_SECRET_GITHUB": {svc}} }, ""},
		{"bound to another host", func(string) map[string][]string {
			return map[string][]string{"REALM_SECRET_GITHUB": {"api.github.com"}}
		}, errcode.AdapterValidationFailed},
		{"bound to the host on another port", func(string) map[string][]string { return map[string][]string{"REALM_SECRET_GITHUB": {"127.0.0.1:1"}} }, errcode.AdapterValidationFailed},
		{"bound to no host", func(string) map[string][]string { return nil }, errcode.AdapterValidationFailed},
		{"another variable bound to the host", func(svc string) map[string][]string { return map[string][]string{"REALM_SECRET_OTHER": {svc}} }, errcode.AdapterValidationFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			svc := newService(t, reply{status: 200, body: `{}`})
			s := guardedRunner(t, adapters.Options{AllowHosts: []string{"127.0.0.1"}, SecretHosts: tt.bound(svc.srv.Listener.Addr().String()),
				LookupEnv: env(map[string]string{"REALM_SECRET_GITHUB": "ghp_secret"})}, nil)
			e := callAdapter(t, s, "http", map[string]any{"base_url": svc.srv.URL, "auth": map[string]any{"token_env": "REALM_SECRET_GITHUB"}}).GetError()
			if e.GetCode() != string(tt.want) {
				t.Fatalf("error = %s (%s), want %q", e.GetCode(), e.GetMessage(), tt.want)
			}
			got := svc.got()
			switch {
			case tt.want == "" && (len(got) != 1 || got[0].header.Get("Authorization") != "Bearer ghp_secret"):
				t.Errorf("requests %d, want 1 carrying the token", len(got))
			case tt.want != "" && len(got) != 0:
				t.Errorf("%d requests sent (Authorization %q), want none", len(got), got[0].header.Get("Authorization"))
			case tt.want != "" && !strings.Contains(e.GetMessage(), "REALM_SECRET_GITHUB"):
				t.Errorf("message %q does not name the variable", e.GetMessage())
			}
		})
	}
}

func TestAManifestEntryThatCouldLeakOrWidenIsRefused(t *testing.T) {
	t.Parallel()
	for _, cfg := range []map[string]any{
		{"base_url": "https://x.example", "allow_private_network": true},
		{"base_url": "https://x.example", "allow_hosts": "10.0.0.1"},
		{"base_url": "https://x.example", "allow_hosts": []any{"http://10.0.0.1/"}},
		// A credential without its own base_url would go wherever a step says.
		{"auth": map[string]any{"token": "from-the-manifest"}},
	} {
		if _, err := adapters.NewHTTP("ledger", cfg, adapters.Options{}); err == nil {
			t.Errorf("NewHTTP(%v) = nil error, want a refusal", cfg)
		}
	}
}
