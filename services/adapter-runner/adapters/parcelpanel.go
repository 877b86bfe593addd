package adapters

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/runner"
)

// NameParcelPanel is the catalog name of the ParcelPanel tracking adapter.
const NameParcelPanel = "parcelpanel"

// parcelPanelBase is the ParcelPanel (ParcelWILL) open API; the former
// open.parcelpanel.com is deprecated.
const parcelPanelBase = "https://open.parcelwill.com"

// parcelPanel looks orders up in the tracking API v2 of one of its stores
// (each with its own API key); results are the API's bodies.
type parcelPanel struct {
	name   string
	stores map[string]*api
	ops    ops
}

func newParcelPanel(name string, config map[string]any, opts Options) (runner.Adapter, error) {
	s, err := readSettings(config, "base_url", "stores")
	if err != nil {
		return nil, err
	}
	base, err := s.baseURL(parcelPanelBase)
	if err != nil {
		return nil, err
	}
	pp := &parcelPanel{name: name, stores: map[string]*api{}}
	err = storeKeys(s, func(key string, v any) error {
		k, ok := v.(string)
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("config.stores.%s must be the store's ParcelPanel API key (is its secret set?)", key)
		}
		a, err := newAPI(name, base, http.Header{"X-Parcelpanel-Api-Key": {k}}, opts, rules{defaultRetryAfter: commerceRetryAfter})
		if err != nil {
			return err
		}
		pp.stores[key] = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	pp.ops = ops{"fetch": {
		"get_tracking":       pp.track("order_number", orderNumber),
		"get_tracking_by_id": pp.track("order_id", orderID),
	}}
	return pp, nil
}

func (pp *parcelPanel) Call(ctx context.Context, call runner.AdapterCall) (any, error) {
	return pp.ops.dispatch(ctx, pp.name, errcode.AdapterOpUnsupported, call)
}

// track is GET /api/v2/tracking/order?<key>=<value read by read>.
func (pp *parcelPanel) track(key string, read func(args) (string, error)) op {
	return func(ctx context.Context, call runner.AdapterCall) (any, error) {
		p := args(call.Params)
		if err := p.only(call.Operation, "store", key); err != nil {
			return nil, err
		}
		a, err := store(p, pp.stores)
		if err != nil {
			return nil, err
		}
		v, err := read(p)
		if err != nil {
			return nil, err
		}
		var body any
		resp, err := a.call(ctx, call.Config, request{method: http.MethodGet, path: "api/v2/tracking/order", query: url.Values{key: {v}}}, &body)
		if err != nil {
			return nil, err
		}
		return reply(resp.status, body), nil
	}
}

// orderNumber is the param order_number as ParcelPanel takes it: without
// Shopify's leading '#' and surrounding whitespace ("#1030" → "1030").
func orderNumber(p args) (string, error) {
	var s string
	switch v := p["order_number"].(type) {
	case string:
		s = strings.TrimSpace(v)
		s = strings.TrimSpace(strings.TrimPrefix(s, "#"))
	case float64:
		n, err := p.positive("order_number")
		if err != nil {
			return "", err
		}
		s = strconv.FormatInt(n, 10)
	case nil:
		return "", invalid("param 'order_number' is required")
	default:
		return "", invalid("param 'order_number' must be a string like '#1030' or '1030'")
	}
	if s == "" {
		return "", invalid("param 'order_number' must not be empty (after its leading '#')")
	}
	return s, nil
}

// orderID is the param order_id: Shopify's numeric order id, a positive
// whole number or a non-empty string.
func orderID(p args) (string, error) {
	if s, ok := p["order_id"].(string); ok {
		if s = strings.TrimSpace(s); s == "" {
			return "", invalid("param 'order_id' must not be empty")
		}
		return s, nil
	}
	n, err := p.positive("order_id")
	if err != nil {
		return "", err
	}
	return strconv.FormatInt(n, 10), nil
}
