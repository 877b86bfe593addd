package adapters

import "testing"

// Without base_url each adapter speaks to the service's own API; the
// other tests point base_url at a stub, so this is where the defaults are
// pinned (no request leaves the machine).
func TestCommerceAdaptersDefaultToTheServicesAPI(t *testing.T) {
	t.Parallel()
	g, err := newGorgias("g", map[string]any{"domain": "acme", "auth": map[string]any{"type": "basic", "token": "a@b:k"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := g.(*gorgias).api.base; got != "https://acme.gorgias.com/api" {
		t.Errorf("gorgias base = %s", got)
	}
	s, err := newShopify("s", map[string]any{"stores": map[string]any{
		"a": map[string]any{"shop_domain": "acme", "access_token": "t"},
		"b": map[string]any{"shop_domain": "Acme-B.myshopify.com", "access_token": "t"},
	}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sh := s.(*shopify)
	if a, b := sh.stores["a"].base, sh.stores["b"].base; a != "https://acme.myshopify.com" || b != "https://acme-b.myshopify.com" || sh.version != "2024-04" {
		t.Errorf("shopify bases = %s, %s, version %s", a, b, sh.version)
	}
	p, err := newParcelPanel("p", map[string]any{"stores": map[string]any{"main": "k"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.(*parcelPanel).stores["main"].base; got != "https://open.parcelwill.com" {
		t.Errorf("parcelpanel base = %s", got)
	}
}
