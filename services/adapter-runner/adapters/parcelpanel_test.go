package adapters_test

import (
	"strings"
	"testing"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/services/adapter-runner/apistub"
)

func TestParcelPanelLooksOrdersUpWithTheStoresKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		op        string
		params    map[string]any
		wantKey   string
		wantQuery string
	}{
		{"an order number with Shopify's #", "get_tracking", map[string]any{"store": "main", "order_number": "#1030"}, apistub.ParcelPanelKeyMain, "order_number=1030"},
		{"whitespace around it", "get_tracking", map[string]any{"store": "outlet", "order_number": "  # 1030 \n"}, apistub.ParcelPanelKeyOutlet, "order_number=1030"},
		{"a bare order number", "get_tracking", map[string]any{"store": "main", "order_number": "1030"}, apistub.ParcelPanelKeyMain, "order_number=1030"},
		{"an order number as a number", "get_tracking", map[string]any{"store": "main", "order_number": 1030.0}, apistub.ParcelPanelKeyMain, "order_number=1030"},
		{"an order id as a number", "get_tracking_by_id", map[string]any{"store": "main", "order_id": 6140516335690.0}, apistub.ParcelPanelKeyMain, "order_id=6140516335690"},
		{"an order id as text", "get_tracking_by_id", map[string]any{"store": "outlet", "order_id": "6140516335690"}, apistub.ParcelPanelKeyOutlet, "order_id=6140516335690"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := apistub.NewParcelPanel(t)
			a, _ := mustBuild(t, apistub.ParcelPanelExample(p))
			out, e := invoke(t, a, "fetch", tt.op, tt.params)
			if e != nil {
				t.Fatal(e)
			}
			r := p.Requests()[0]
			if r.Method != "GET" || r.Path != "/api/v2/tracking/order" || r.Query.Encode() != tt.wantQuery || r.Body != "" {
				t.Errorf("request = %s %s?%s %q", r.Method, r.Path, r.Query.Encode(), r.Body)
			}
			if r.Header.Get("X-Parcelpanel-Api-Key") != tt.wantKey || r.Header.Get("Authorization") != "" {
				t.Errorf("headers = %v", r.Header)
			}
			if got := dataOf(t, out); got != asJSON(t, apistub.ParcelPanelOrder) {
				t.Errorf("data = %s", got)
			}
		})
	}
}

func TestParcelPanelUnknownOrderIsNotFound(t *testing.T) {
	t.Parallel()
	p := apistub.NewParcelPanel(t)
	a, _ := mustBuild(t, apistub.ParcelPanelExample(p))
	_, e := invoke(t, a, "fetch", "get_tracking", map[string]any{"store": "main", "order_number": "#9999"})
	wantErr{errcode.ServiceNotFound, errcode.ActionProvideInput, false, nil}.check(t, e)
	if e != nil && !strings.Contains(asJSON(t, e.Details), "Order not found") {
		t.Errorf("details %v lack the service's body", e.Details)
	}
}

func TestParcelPanelRefusesBadParamsBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, op string
		params   map[string]any
		wantMsg  string
	}{
		{"an unknown store names the known keys", "get_tracking", map[string]any{"store": "eu", "order_number": "1"}, "param 'store': unknown store 'eu' (known: main, outlet)"},
		{"only a #", "get_tracking", map[string]any{"store": "main", "order_number": " # "}, "param 'order_number' must not be empty"},
		{"no order number", "get_tracking", map[string]any{"store": "main"}, "param 'order_number' is required"},
		{"a fractional order number", "get_tracking", map[string]any{"store": "main", "order_number": 10.5}, "'order_number' must be a whole number"},
		{"an order number as a list", "get_tracking", map[string]any{"store": "main", "order_number": []any{"1"}}, "'order_number' must be a string"},
		{"an order id of zero", "get_tracking_by_id", map[string]any{"store": "main", "order_id": 0.0}, "'order_id' must be a positive whole number"},
		{"an empty order id", "get_tracking_by_id", map[string]any{"store": "main", "order_id": " "}, "'order_id' must not be empty"},
		{"the other op's param", "get_tracking_by_id", map[string]any{"store": "main", "order_number": "1"}, "param 'order_number' is not a param of get_tracking_by_id (it takes: store, order_id)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := apistub.NewParcelPanel(t)
			a, _ := mustBuild(t, apistub.ParcelPanelExample(p))
			_, e := invoke(t, a, "fetch", tt.op, tt.params)
			wantErr{errcode.AdapterValidationFailed, errcode.ActionProvideInput, false, nil}.check(t, e)
			if e != nil && (!strings.Contains(e.Message, tt.wantMsg) || strings.Contains(e.Message, "pp_key")) {
				t.Errorf("message %q, want %q (and no key)", e.Message, tt.wantMsg)
			}
			if n := len(p.Requests()); n != 0 {
				t.Errorf("%d requests sent, want none", n)
			}
		})
	}
}

func TestParcelPanelConstructionConfigIsChecked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		config  map[string]any
		secrets map[string]string
		wantErr string // "" builds
	}{
		{"one store", map[string]any{"stores": map[string]any{"main": "${secret:K}"}}, map[string]string{"K": "k"}, ""},
		{"no stores", map[string]any{}, nil, "config.stores is required"},
		{"an empty stores", map[string]any{"stores": map[string]any{}}, nil, "config.stores must name at least one store"},
		{"an empty key", map[string]any{"stores": map[string]any{"main": ""}}, nil, "config.stores.main must be the store's ParcelPanel API key"},
		{"a key that is an object", map[string]any{"stores": map[string]any{"main": map[string]any{"api_key": "k"}}}, nil, "config.stores.main must be the store's ParcelPanel API key"},
		{"an unknown key", map[string]any{"api_key": "k", "stores": map[string]any{"main": "k"}}, nil, "config: unknown key 'api_key' (known: base_url, stores)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := fromManifest(t, "parcelpanel", tt.config, tt.secrets)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
