package adapters_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/services/adapter-runner/apistub"
)

func TestShopifyQueryPostsGraphQLToTheStoresAdminAPI(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		params   map[string]any
		wantTok  string
		wantBody string
		wantData string
	}{
		{"the eu store with variables", map[string]any{"store": "eu", "query": apistub.ShopifyOrderQuery, "variables": map[string]any{"query": "name:#1030"}},
			apistub.ShopifyTokenEU, `{"query":` + jsonString(apistub.ShopifyOrderQuery) + `,"variables":{"query":"name:#1030"}}`, `"name":"#1030"`},
		{"the us store, variables omitted", map[string]any{"store": "us", "query": "{ shop { name } }"},
			apistub.ShopifyTokenUS, `{"query":"{ shop { name } }"}`, `{"data":{"shop":{"name":"Acme Goods"}},"extensions":{"cost":`},
		{"GraphQL errors other than THROTTLED are the result, not a failure", map[string]any{"store": "eu", "query": "{ unknown }"},
			apistub.ShopifyTokenEU, `{"query":"{ unknown }"}`, `{"errors":[{"extensions":{"code":"undefinedField"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := apistub.NewShopify(t)
			a, _ := mustBuild(t, apistub.ShopifyExample(s))
			out, e := invoke(t, a, "fetch", "query", tt.params)
			if e != nil {
				t.Fatal(e)
			}
			reqs := s.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != "POST" || r.Path != "/admin/api/2024-04/graphql.json" || len(r.Query) != 0 {
				t.Errorf("request = %s %s?%s", r.Method, r.Path, r.Query.Encode())
			}
			if r.Header.Get("X-Shopify-Access-Token") != tt.wantTok || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Authorization") != "" {
				t.Errorf("headers = %v", r.Header)
			}
			if r.Body != tt.wantBody {
				t.Errorf("body = %s\nwant %s", r.Body, tt.wantBody)
			}
			if got := dataOf(t, out); !strings.HasPrefix(got, tt.wantData) && !strings.Contains(got, tt.wantData) {
				t.Errorf("data = %s, want %s", got, tt.wantData)
			}
		})
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
func TestShopifyAPIVersionIsThePathsVersion(t *testing.T) {
	t.Parallel()
	s := apistub.NewShopify(t)
	ex := apistub.ShopifyExample(s)
	ex.Config = maps.Clone(ex.Config)
	ex.Config["api_version"] = "2025-01"
	a, _ := mustBuild(t, ex)
	_, e := invoke(t, a, "fetch", "query", ex.Params)
	// The stub serves 2024-04 only, as Shopify answers an unknown version.
	wantErr{errcode.ServiceNotFound, errcode.ActionProvideInput, false, nil}.check(t, e)
	if got := s.Requests()[0].Path; got != "/admin/api/2025-01/graphql.json" {
		t.Errorf("path = %s", got)
	}
}

func TestShopifyThrottledIsARateLimitWithRetryAfterTwo(t *testing.T) {
	t.Parallel()
	two := 2 * time.Second
	tests := []struct {
		name      string
		throttled int
		sleeps    []time.Duration
		sent      int
		fails     bool
	}{
		{"once: waited out, then answered", 1, []time.Duration{two}, 2, false},
		{"persisting: rate-limited, retry_after 2", 10, []time.Duration{two, two, two}, 4, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := apistub.NewShopify(t)
			s.Throttle(tt.throttled)
			ex := apistub.ShopifyExample(s)
			a, clock := mustBuild(t, ex)
			out, e := invoke(t, a, "fetch", "query", ex.Params)
			if got := clock.recorded(); !slices.Equal(got, tt.sleeps) {
				t.Errorf("sleeps = %v, want %v", got, tt.sleeps)
			}
			if n := len(s.Requests()); n != tt.sent {
				t.Errorf("%d requests, want %d", n, tt.sent)
			}
			if !tt.fails {
				if e != nil {
					t.Fatal(e)
				}
				if got := dataOf(t, out); got != asJSON(t, ex.Output) {
					t.Errorf("data = %s", got)
				}
				return
			}
			wantErr{errcode.ServiceRateLimited, errcode.ActionWaitAndProceed, true, 2.0}.check(t, e)
			if e != nil && (e.Details["graphql_code"] != "THROTTLED" || !strings.Contains(e.Message, "THROTTLED")) {
				t.Errorf("error %q %v does not say THROTTLED", e.Message, e.Details)
			}
		})
	}
}

func TestShopifyRefusesBadParamsBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	q := apistub.ShopifyOrderQuery
	tests := []struct {
		name    string
		params  map[string]any
		wantMsg string
	}{
		{"an unknown store names the known keys", map[string]any{"store": "asia", "query": q}, "param 'store': unknown store 'asia' (known: eu, us)"},
		{"no store", map[string]any{"query": q}, "param 'store' is required"},
		{"no query", map[string]any{"store": "eu"}, "param 'query' is required"},
		{"an empty query", map[string]any{"store": "eu", "query": "  "}, "param 'query' must not be empty"},
		{"variables that are not an object", map[string]any{"store": "eu", "query": q, "variables": []any{"x"}}, "param 'variables' must be an object"},
		{"a misspelt param", map[string]any{"store": "eu", "query": q, "vars": map[string]any{}}, "param 'vars' is not a param of query (it takes: store, query, variables)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := apistub.NewShopify(t)
			a, _ := mustBuild(t, apistub.ShopifyExample(s))
			_, e := invoke(t, a, "fetch", "query", tt.params)
			wantErr{errcode.AdapterValidationFailed, errcode.ActionProvideInput, false, nil}.check(t, e)
			if e != nil && (!strings.Contains(e.Message, tt.wantMsg) || strings.Contains(e.Message, "shpat_")) {
				t.Errorf("message %q, want %q (and no token)", e.Message, tt.wantMsg)
			}
			if n := len(s.Requests()); n != 0 {
				t.Errorf("%d requests sent, want none", n)
			}
		})
	}
}

func TestShopifyConstructionConfigIsChecked(t *testing.T) {
	t.Parallel()
	store := func(domain, token string) map[string]any {
		return map[string]any{"shop_domain": domain, "access_token": token}
	}
	tests := []struct {
		name    string
		config  map[string]any
		wantErr string // "" builds
	}{
		{"a full and a short shop_domain", map[string]any{"stores": map[string]any{"a": store("a.myshopify.com", "t"), "b": store("b-2", "t")}}, ""},
		{"no stores", map[string]any{}, "config.stores is required"},
		{"no store in stores", map[string]any{"stores": map[string]any{}}, "config.stores must name at least one store"},
		{"a store that is a token", map[string]any{"stores": map[string]any{"a": "shpat_x"}}, "config.stores.a must be an object {shop_domain, access_token}"},
		{"a shop_domain elsewhere", map[string]any{"stores": map[string]any{"a": store("evil.example.com", "t")}}, "config.stores.a.shop_domain 'evil.example.com' must be <shop>.myshopify.com"},
		{"no access_token", map[string]any{"stores": map[string]any{"a": store("a", "")}}, "config.stores.a.access_token is required"},
		{"an unknown store key", map[string]any{"stores": map[string]any{"a": map[string]any{"shop_domain": "a", "access_token": "t", "api_key": "k"}}}, "config.stores.a: unknown key 'api_key'"},
		{"a malformed api_version", map[string]any{"api_version": "latest", "stores": map[string]any{"a": store("a", "t")}}, "config.api_version 'latest' must be a Shopify API version"},
		{"an unknown key", map[string]any{"version": "2024-04", "stores": map[string]any{"a": store("a", "t")}}, "config: unknown key 'version' (known: api_version, base_url, stores)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := fromManifest(t, "shopify", tt.config, nil)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
