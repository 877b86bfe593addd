package apistub

import (
	"net/http"
	"testing"
)

// ParcelPanel API keys the stub accepts, one per store of the example.
const (
	ParcelPanelKeyMain   = "pp_key_main"
	ParcelPanelKeyOutlet = "pp_key_outlet"
)

// ParcelPanelOrder is the stub's order 1030 (Shopify id 6140516335690).
var ParcelPanelOrder = map[string]any{"order": map[string]any{
	"order_id": 6140516335690.0, "order_number": "1030",
	"tracking_link": "https://acme.example/apps/parcelpanel?order=1030",
	"shipments": []any{map[string]any{
		"status": "delivered", "status_label": "Delivered", "tracking_number": "LX123456789NL",
		"carrier": map[string]any{"name": "PostNL", "code": "postnl"},
	}},
}}

// ParcelPanel stands in for the ParcelPanel (ParcelWILL) tracking API v2:
// GET /api/v2/tracking/order?order_number=<n> or ?order_id=<id> with the
// x-parcelpanel-api-key header. It knows order 1030; its order numbers
// have no '#', as ParcelPanel's.
type ParcelPanel struct{ stub }

// NewParcelPanel starts the stub; t's cleanup stops it.
func NewParcelPanel(t testing.TB) *ParcelPanel {
	p := &ParcelPanel{}
	p.errBody = func(status int) any {
		return map[string]any{"code": float64(status), "message": http.StatusText(status)}
	}
	p.start(t, p.route)
	return p
}

// URL is the API's base URL (a config's base_url).
func (p *ParcelPanel) URL() string { return p.srv.URL }

func (p *ParcelPanel) route(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || r.URL.Path != "/api/v2/tracking/order" {
		writeJSON(w, http.StatusNotFound, p.errBody(http.StatusNotFound))
		return
	}
	if k := r.Header.Get("X-Parcelpanel-Api-Key"); k != ParcelPanelKeyMain && k != ParcelPanelKeyOutlet {
		writeJSON(w, http.StatusUnauthorized, p.errBody(http.StatusUnauthorized))
		return
	}
	q := r.URL.Query()
	number, id := q.Get("order_number"), q.Get("order_id")
	switch {
	case number == "" && id == "":
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": 400.0, "message": "order_number or order_id is required"})
	case number == "1030" || id == "6140516335690":
		writeJSON(w, http.StatusOK, ParcelPanelOrder)
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"code": 404.0, "message": "Order not found"})
	}
}

// ParcelPanelExample looks order #1030 up in the main store of p.
func ParcelPanelExample(p *ParcelPanel) Example {
	return Example{
		Adapter: "parcelpanel",
		Config: map[string]any{
			"base_url": p.URL(),
			"stores":   map[string]any{"main": "${secret:PARCELPANEL_MAIN_KEY}", "outlet": "${secret:PARCELPANEL_OUTLET_KEY}"},
		},
		Env:       map[string]string{"PARCELPANEL_MAIN_KEY": ParcelPanelKeyMain, "PARCELPANEL_OUTLET_KEY": ParcelPanelKeyOutlet},
		Method:    "fetch",
		Operation: "get_tracking",
		Params:    map[string]any{"store": "main", "order_number": " #1030"},
		Output:    ParcelPanelOrder,
	}
}
