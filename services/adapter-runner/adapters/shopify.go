package adapters

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/runner"
)

// NameShopify is the catalog name of the Shopify Admin GraphQL adapter.
const NameShopify = "shopify"

// Shopify defaults (spec §13.3).
const (
	shopifyAPIVersion = "2024-04"
	// shopifyThrottledWait is the wait after a GraphQL THROTTLED error,
	// which names none.
	shopifyThrottledWait = "2"
)

var (
	shopifyVersion = regexp.MustCompile(`^\d{4}-\d{2}$`)
	shopifyShop    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*$`)
)

// shopify runs GraphQL queries against the Admin API of one of its
// stores: the raw body is the result, GraphQL errors included (the caller
// reads them), except THROTTLED, which is a rate limit.
type shopify struct {
	name    string
	version string
	stores  map[string]*api
	ops     ops
}

func newShopify(name string, config map[string]any, opts Options) (runner.Adapter, error) {
	s, err := readSettings(config, "api_version", "base_url", "stores")
	if err != nil {
		return nil, err
	}
	version, err := s.text("api_version", false, shopifyAPIVersion)
	if err != nil {
		return nil, err
	}
	if !shopifyVersion.MatchString(version) {
		return nil, fmt.Errorf("config.api_version '%s' must be a Shopify API version like %s (YYYY-MM)", version, shopifyAPIVersion)
	}
	sh := &shopify{name: name, version: version, stores: map[string]*api{}}
	err = storeKeys(s, func(key string, v any) error {
		st, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("config.stores.%s must be an object {shop_domain, access_token}", key)
		}
		for _, k := range sortedKeys(st) {
			if k != "shop_domain" && k != "access_token" {
				return fmt.Errorf("config.stores.%s: unknown key '%s' (known: access_token, shop_domain)", key, k)
			}
		}
		domain, err := shopDomain(key, st["shop_domain"])
		if err != nil {
			return err
		}
		token, _ := st["access_token"].(string)
		if strings.TrimSpace(token) == "" {
			return fmt.Errorf("config.stores.%s.access_token is required (is its secret set?)", key)
		}
		base, err := s.baseURL("https://" + domain)
		if err != nil {
			return err
		}
		a, err := newAPI(name, base, http.Header{"X-Shopify-Access-Token": {token}}, opts, rules{})
		if err != nil {
			return err
		}
		sh.stores[key] = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	sh.ops = ops{"fetch": {"query": sh.query}}
	return sh, nil
}

// shopDomain is the store's host: "acme" or "acme.myshopify.com".
func shopDomain(key string, v any) (string, error) {
	d, _ := v.(string)
	d = strings.ToLower(strings.TrimSpace(d))
	shop, isFull := strings.CutSuffix(d, ".myshopify.com")
	if !shopifyShop.MatchString(shop) {
		return "", fmt.Errorf("config.stores.%s.shop_domain '%v' must be <shop>.myshopify.com (or just <shop>)", key, v)
	}
	if !isFull {
		d += ".myshopify.com"
	}
	return d, nil
}

func (sh *shopify) Call(ctx context.Context, call runner.AdapterCall) (any, error) {
	return sh.ops.dispatch(ctx, sh.name, errcode.AdapterOpUnsupported, call)
}

// query is POST /admin/api/<version>/graphql.json {query, variables?}.
func (sh *shopify) query(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	if err := p.only(call.Operation, "store", "query", "variables"); err != nil {
		return nil, err
	}
	a, err := store(p, sh.stores)
	if err != nil {
		return nil, err
	}
	q, err := p.text("query", true)
	if err != nil {
		return nil, err
	}
	vars, err := p.object("variables", false)
	if err != nil {
		return nil, err
	}
	payload := map[string]any{"query": q}
	if vars != nil {
		payload["variables"] = vars
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return nil, invalid("param 'variables' cannot be sent as JSON: %v", err)
	}
	u, err := a.url(request{path: "admin/api/" + sh.version + "/graphql.json"})
	if err != nil {
		return nil, err
	}
	// A THROTTLED answer (HTTP 200) is handled as a 429 naming a wait of
	// 2 s: waited out within the service's bounds, then rate-limited.
	throttled := false
	resp, err := a.exchange(ctx, call.Config, http.MethodPost, u, func() (answer, error) {
		r, err := a.send(ctx, http.MethodPost, u, body, a.header.Clone())
		if throttled = err == nil && r.status == http.StatusOK && graphqlThrottled(r.body); throttled {
			r.status, r.header = http.StatusTooManyRequests, r.header.Clone()
			r.header.Set("Retry-After", shopifyThrottledWait)
		}
		return r, err
	})
	if err != nil {
		if we := asWorkflowError(err); we != nil && throttled && we.Code == errcode.ServiceRateLimited {
			we.Message = "Shopify answered a GraphQL THROTTLED error (the query cost limit), handled as a 429 with Retry-After 2: " + we.Message
			we.Details["status"], we.Details["graphql_code"] = http.StatusOK, "THROTTLED"
		}
		return nil, err
	}
	var out any
	if err := json.Unmarshal(resp.body, &out); err != nil {
		return nil, fail(errcode.ServiceResponseInvalid, resp.details(http.MethodPost, u),
			"POST %s answered %d with a body that is not JSON: %v", redact(u), resp.status, err)
	}
	return reply(resp.status, out), nil
}

// graphqlThrottled reports whether a GraphQL body has an error whose
// extensions.code is THROTTLED.
func graphqlThrottled(body []byte) bool {
	var b struct {
		Errors json.RawMessage `json:"errors"`
	}
	if json.Unmarshal(body, &b) != nil {
		return false
	}
	var errs []struct {
		Extensions struct {
			Code string `json:"code"`
		} `json:"extensions"`
	}
	if json.Unmarshal(b.Errors, &errs) != nil { // errors may be a string
		return false
	}
	for _, e := range errs {
		if e.Extensions.Code == "THROTTLED" {
			return true
		}
	}
	return false
}
