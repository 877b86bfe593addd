package apistub

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// Shopify stand-in tokens: one per store of the example.
const (
	ShopifyTokenEU = "shpat_eu_1"
	ShopifyTokenUS = "shpat_us_1"
	// ShopifyVersion is the Admin API version the stub serves.
	ShopifyVersion = "2024-04"
)

// ShopifyOrderQuery is a query the stub answers with order #1030.
const ShopifyOrderQuery = `query OrderByName($query: String!) { orders(first: 1, query: $query) { edges { node { id name displayFulfillmentStatus } } } }`

// Shopify stands in for the Admin GraphQL API: POST
// /admin/api/<version>/graphql.json with X-Shopify-Access-Token. It is no
// GraphQL server: a query naming orders( gets order #1030, one naming
// shop gets the shop, anything else the field error Shopify gives; each
// answer carries the cost extensions. Throttle makes answers THROTTLED.
type Shopify struct {
	stub
	mu        sync.Mutex
	throttled int
}

// NewShopify starts the stub; t's cleanup stops it.
func NewShopify(t testing.TB) *Shopify {
	s := &Shopify{}
	s.errBody = func(status int) any {
		if status == http.StatusUnauthorized {
			return map[string]any{"errors": "[API] Invalid API key or access token (unrecognized login or wrong password)"}
		}
		return map[string]any{"errors": http.StatusText(status)}
	}
	s.start(t, s.route)
	return s
}

// URL is the stores' base URL (a config's base_url).
func (s *Shopify) URL() string { return s.srv.URL }

// Throttle makes the next n answers a GraphQL THROTTLED error (HTTP 200).
func (s *Shopify) Throttle(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttled = n
}

var shopifyCost = map[string]any{"cost": map[string]any{
	"requestedQueryCost": 3.0, "actualQueryCost": 3.0,
	"throttleStatus": map[string]any{"maximumAvailable": 2000.0, "currentlyAvailable": 1997.0, "restoreRate": 100.0},
}}

// ShopifyOrderData is the stub's answer to ShopifyOrderQuery.
var ShopifyOrderData = map[string]any{
	"data": map[string]any{"orders": map[string]any{"edges": []any{map[string]any{"node": map[string]any{
		"id": "gid://shopify/Order/6140516335690", "name": "#1030", "displayFulfillmentStatus": "FULFILLED",
	}}}}},
	"extensions": shopifyCost,
}

func (s *Shopify) route(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/admin/api/"+ShopifyVersion+"/graphql.json" {
		writeJSON(w, http.StatusNotFound, map[string]any{"errors": "Not Found"})
		return
	}
	if tok := r.Header.Get("X-Shopify-Access-Token"); tok != ShopifyTokenEU && tok != ShopifyTokenUS {
		writeJSON(w, http.StatusUnauthorized, s.errBody(http.StatusUnauthorized))
		return
	}
	var body struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Query == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"errors": map[string]any{"query": "Required parameter missing or invalid"}})
		return
	}
	s.mu.Lock()
	throttled := s.throttled > 0
	if throttled {
		s.throttled--
	}
	s.mu.Unlock()
	switch {
	case throttled:
		writeJSON(w, http.StatusOK, map[string]any{
			"errors":     []any{map[string]any{"message": "Throttled", "extensions": map[string]any{"code": "THROTTLED", "documentation": "https://shopify.dev/api/usage/rate-limits"}}},
			"extensions": shopifyCost,
		})
	case strings.Contains(body.Query, "orders("):
		writeJSON(w, http.StatusOK, ShopifyOrderData)
	case strings.Contains(body.Query, "shop"):
		writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"shop": map[string]any{"name": "Acme Goods"}}, "extensions": shopifyCost})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"errors": []any{map[string]any{
			"message": "Field 'unknown' doesn't exist on type 'QueryRoot'", "locations": []any{map[string]any{"line": 1.0, "column": 3.0}},
			"extensions": map[string]any{"code": "undefinedField", "typeName": "QueryRoot", "fieldName": "unknown"},
		}}})
	}
}

// ShopifyExample runs ShopifyOrderQuery on the eu store of s.
func ShopifyExample(s *Shopify) Example {
	return Example{
		Adapter: "shopify",
		Config: map[string]any{
			"base_url": s.URL(),
			"stores": map[string]any{
				"eu": map[string]any{"shop_domain": "acme-eu.myshopify.com", "access_token": "${secret:SHOPIFY_EU_TOKEN}"},
				"us": map[string]any{"shop_domain": "acme-us", "access_token": "${secret:SHOPIFY_US_TOKEN}"},
			},
		},
		Env:       map[string]string{"SHOPIFY_EU_TOKEN": ShopifyTokenEU, "SHOPIFY_US_TOKEN": ShopifyTokenUS},
		Method:    "fetch",
		Operation: "query",
		Params:    map[string]any{"store": "eu", "query": ShopifyOrderQuery, "variables": map[string]any{"query": "name:#1030"}},
		Output:    ShopifyOrderData,
	}
}
