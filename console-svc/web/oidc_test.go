package web_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/coreos/go-oidc/v3/oidc/oidctest"

	"github.com/realm-go/realm/console-svc/identity"
	"github.com/realm-go/realm/console-svc/web"
)

// provider is a test OpenID Connect provider: oidctest serves discovery and
// keys; /auth signs in whoever is set as the next person at once, and
// /token issues their ID token, checking the PKCE verifier.
type provider struct {
	*httptest.Server
	key *rsa.PrivateKey

	mu     sync.Mutex
	person string
	codes  map[string]grant
}

type grant struct{ nonce, challenge, email string }

func startProvider(t *testing.T) *provider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &provider{key: key, codes: map[string]grant{}}
	disc := &oidctest.Server{PublicKeys: []oidctest.PublicKey{{PublicKey: key.Public(), KeyID: "k1", Algorithm: oidc.RS256}}}
	mux := http.NewServeMux()
	mux.Handle("/.well-known/openid-configuration", disc)
	mux.Handle("/keys", disc)
	mux.HandleFunc("/auth", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("code_challenge_method") != "S256" || q.Get("client_id") != "console" {
			http.Error(w, "want PKCE S256 and client console", http.StatusBadRequest)
			return
		}
		p.mu.Lock()
		code := fmt.Sprintf("code-%d", len(p.codes))
		p.codes[code] = grant{nonce: q.Get("nonce"), challenge: q.Get("code_challenge"), email: p.person}
		p.mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?"+url.Values{"code": {code}, "state": {q.Get("state")}}.Encode(), http.StatusFound)
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		g, ok := p.codes[r.FormValue("code")]
		delete(p.codes, r.FormValue("code"))
		p.mu.Unlock()
		sum := sha256.Sum256([]byte(r.FormValue("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		claims, _ := json.Marshal(map[string]any{
			"iss": p.URL, "aud": "console", "sub": g.email, "email": g.email, "email_verified": true,
			"nonce": g.nonce, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(),
		})
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"access_token": "at", "token_type": "Bearer", "expires_in": 3600,
			"id_token": oidctest.SignIDToken(p.key, "k1", oidc.RS256, string(claims)),
		})
	})
	p.Server = httptest.NewServer(mux)
	t.Cleanup(p.Close)
	disc.SetIssuer(p.URL)
	return p
}

func (p *provider) signInAs(email string) {
	p.mu.Lock()
	p.person = email
	p.mu.Unlock()
}

func TestOIDCSignsInWithTheProviderAndOnlyTheOwnerAnswers(t *testing.T) {
	eng := startEngine(t)
	prov := startProvider(t)
	// The console's address is needed for its redirect URL before it
	// serves: start the listener first.
	ts := httptest.NewUnstartedServer(nil)
	redirect := "http://" + ts.Listener.Addr().String() + "/auth/callback"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	src, err := identity.NewOIDC(ctx, identity.OIDCConfig{Issuer: prov.URL, ClientID: "console", ClientSecret: "s", RedirectURL: redirect, SessionKey: []byte(strings.Repeat("k", 32))})
	if err != nil {
		t.Fatal(err)
	}
	s, err := web.New(web.Options{Engine: eng, Identity: src})
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = s.Handler()
	ts.Start()
	t.Cleanup(ts.Close)

	run := startRun(t, eng, "payout", map[string]any{"amount": 5, "payee": "ACME"})
	gate := pendingGate(t, eng, run).GetGateId()
	browser := func() *http.Client {
		jar, _ := cookiejar.New(nil)
		return &http.Client{Jar: jar, Timeout: 20 * time.Second}
	}
	page := func(c *http.Client, path string) (int, string) {
		t.Helper()
		resp, err := c.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	t.Run("a page without a session goes through the provider and back", func(t *testing.T) {
		prov.signInAs("finance")
		c := browser()
		code, body := page(c, "/runs/"+run)
		if code != http.StatusOK || !strings.Contains(body, `You are <span id="person">finance</span>`) || !strings.Contains(body, "Signed in with OpenID Connect") {
			t.Fatalf("%d:\n%s", code, body)
		}
		// The owner answers (same-origin form).
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/runs/"+run+"/gates/"+gate, strings.NewReader("choice=hold"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "Answered &#34;hold&#34; as finance.") {
			t.Fatalf("the owner's answer:\n%s", b)
		}
	})

	t.Run("signing out ends the session", func(t *testing.T) {
		prov.signInAs("finance")
		c := browser()
		if _, body := page(c, "/gates"); !strings.Contains(body, `id="signout"`) {
			t.Fatalf("no sign-out button:\n%s", body)
		}
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/auth/logout", nil)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		resp, err = c.Get(ts.URL + "/gates")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/auth/login") {
			t.Fatalf("after signing out /gates got %d %s, want a redirect to sign in", resp.StatusCode, resp.Header.Get("Location"))
		}
	})

	t.Run("a non-owner signed in by the provider is refused", func(t *testing.T) {
		other := startRun(t, eng, "payout", map[string]any{"amount": 5, "payee": "ACME"})
		prov.signInAs("mallory@example.com")
		c := browser()
		_, body := page(c, "/runs/"+other)
		if !strings.Contains(body, "Only @finance may answer this gate (its owner); you are signed in as mallory@example.com") {
			t.Fatalf("no refusal on the page:\n%s", body)
		}
	})

	t.Run("a forged session cookie is not believed", func(t *testing.T) {
		c := browser()
		u, _ := url.Parse(ts.URL)
		forged := base64.RawURLEncoding.EncodeToString([]byte(`{"n":"finance","e":9999999999}`)) + ".AAAA"
		c.Jar.SetCookies(u, []*http.Cookie{{Name: "realm_console_session", Value: forged}})
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := c.Get(ts.URL + "/runs")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/auth/login?next=") {
			t.Fatalf("a forged cookie got %d %s, want a redirect to sign in", resp.StatusCode, resp.Header.Get("Location"))
		}
	})

	t.Run("a callback that did not start here is refused", func(t *testing.T) {
		code, body := page(browser(), "/auth/callback?code=code-0&state=forged")
		if code != http.StatusBadRequest || !strings.Contains(body, "This sign-in did not start here") {
			t.Fatalf("%d %s", code, body)
		}
	})
}
