package identity_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/realm-go/realm/console-svc/identity"
)

func TestIdentify(t *testing.T) {
	proxy := identity.Proxy{Header: "X-Forwarded-User", Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	for _, tc := range []struct {
		name, remote, header string
		src                  identity.Source
		want                 string // the person's name, or a part of the refusal
		wantStatus           int    // 0: identified
	}{
		{"dev mode serves loopback", "127.0.0.1:5000", "", identity.Dev{Name: "ada"}, "ada", 0},
		{"dev mode serves IPv6 loopback", "[::1]:5000", "", identity.Dev{Name: "ada"}, "ada", 0},
		{"dev mode refuses another machine", "192.0.2.7:5000", "", identity.Dev{Name: "ada"}, "serves this machine only", http.StatusForbidden},
		{"dev mode ignores an identity header", "127.0.0.1:5000", "mallory", identity.Dev{Name: "ada"}, "ada", 0},
		{"the proxy's header names the person", "10.1.2.3:5000", "finance", proxy, "finance", 0},
		{"the header from outside the trusted networks is refused", "192.0.2.7:5000", "finance", proxy, "did not come through it", http.StatusForbidden},
		{"the trusted proxy without the header signs nobody in", "10.1.2.3:5000", "", proxy, "sent no X-Forwarded-User header", http.StatusUnauthorized},
		{"a name with control characters is refused", "10.1.2.3:5000", "fin\x01ance", proxy, "is not a name", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/runs", nil)
			r.RemoteAddr = tc.remote
			if tc.header != "" {
				r.Header.Set("X-Forwarded-User", tc.header)
			}
			p, err := tc.src.Identify(r)
			if tc.wantStatus == 0 {
				if err != nil || p.Name != tc.want {
					t.Fatalf("got %+v, %v; want %s", p, err, tc.want)
				}
				return
			}
			var ref *identity.Refusal
			if !errors.As(err, &ref) || ref.Status != tc.wantStatus || !strings.Contains(ref.Msg, tc.want) {
				t.Fatalf("got %+v, %v; want refusal %d containing %q", p, err, tc.wantStatus, tc.want)
			}
		})
	}
}

func TestMayAnswer(t *testing.T) {
	for _, tc := range []struct {
		person, owner string
		want          bool
	}{
		{"anyone", "", true},
		{"finance", "@finance", true},
		{"Finance", "finance", true},
		{"mallory", "@finance", false},
		{"@finance-oncall", "@finance", false},
	} {
		if got := identity.MayAnswer(identity.Person{Name: tc.person}, tc.owner); got != tc.want {
			t.Errorf("MayAnswer(%q, owner %q) = %v, want %v", tc.person, tc.owner, got, tc.want)
		}
	}
}

func TestParseCIDRs(t *testing.T) {
	got, err := identity.ParseCIDRs("10.0.0.0/8, 192.0.2.1 ,::1")
	if err != nil || len(got) != 3 || got[1].Bits() != 32 || got[2].Bits() != 128 {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := identity.ParseCIDRs("10.0.0.0/99"); err == nil {
		t.Fatal("a bad network was accepted")
	}
}
