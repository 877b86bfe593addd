package identity

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// OIDCConfig is how the console signs people in with an OpenID Connect
// provider (authorization code flow with PKCE).
type OIDCConfig struct {
	Issuer, ClientID, ClientSecret string
	// RedirectURL is this console's /auth/callback as the provider knows it.
	RedirectURL string
	// Claim is the ID token claim that names the person (default email).
	Claim string
	// SessionKey signs the session cookie (at least 32 bytes); replicas
	// that share it share sessions.
	SessionKey []byte
	// SessionTTL is how long a sign-in lasts (default 8h).
	SessionTTL time.Duration
}

// OIDC signs people in with an OpenID Connect provider and keeps who they
// are in a signed cookie.
type OIDC struct {
	issuer   string
	verifier *oidc.IDTokenVerifier
	oauth    oauth2.Config
	claim    string
	key      []byte
	secure   bool
	ttl      time.Duration
	now      func() time.Time
}

const (
	sessionCookie = "realm_console_session"
	loginCookie   = "realm_console_login"
	loginTTL      = 10 * time.Minute
)

// NewOIDC reads the provider's discovery document (ctx bounds it).
func NewOIDC(ctx context.Context, c OIDCConfig) (*OIDC, error) {
	if c.Issuer == "" || c.ClientID == "" || c.RedirectURL == "" {
		return nil, errors.New("OIDC sign-in needs --oidc-issuer, --oidc-client-id and --oidc-redirect-url")
	}
	if len(c.SessionKey) < 32 {
		return nil, errors.New("the session key must be at least 32 bytes")
	}
	ru, err := url.Parse(c.RedirectURL)
	if err != nil || ru.Host == "" || ru.Path != "/auth/callback" {
		return nil, fmt.Errorf("--oidc-redirect-url %q must be this console's absolute URL ending in /auth/callback", c.RedirectURL)
	}
	p, err := oidc.NewProvider(ctx, c.Issuer)
	if err != nil {
		return nil, fmt.Errorf("the OIDC issuer %s did not answer its discovery document: %w", c.Issuer, err)
	}
	if c.Claim == "" {
		c.Claim = "email"
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = 8 * time.Hour
	}
	return &OIDC{
		issuer:   c.Issuer,
		verifier: p.Verifier(&oidc.Config{ClientID: c.ClientID}),
		oauth: oauth2.Config{
			ClientID: c.ClientID, ClientSecret: c.ClientSecret, RedirectURL: c.RedirectURL,
			Endpoint: p.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "email", "profile"},
		},
		claim: c.Claim, key: c.SessionKey, secure: ru.Scheme == "https", ttl: c.SessionTTL, now: time.Now,
	}, nil
}

type session struct {
	Name    string `json:"n"`
	Expires int64  `json:"e"`
}

type login struct {
	State, Nonce, Verifier, Next string
	Expires                      int64
}

// Identify reads the signed session cookie; without one the person is sent
// to sign in.
func (o *OIDC) Identify(r *http.Request) (Person, error) {
	var s session
	if o.read(r, sessionCookie, &s) && s.Name != "" && o.now().Unix() < s.Expires {
		return Person{Name: s.Name, Verified: true}, nil
	}
	next := r.URL.RequestURI()
	return Person{}, &Refusal{Status: http.StatusUnauthorized, Msg: "Nobody is signed in (or the sign-in has ended); sign in with " + o.issuer + ".",
		Login: "/auth/login?" + url.Values{"next": {next}}.Encode()}
}

// Mode names the provider.
func (o *OIDC) Mode() string { return "Signed in with OpenID Connect (" + o.issuer + ")." }

// EnforcesOwner is true: the provider vouches for the name.
func (*OIDC) EnforcesOwner() bool { return true }

// Register serves the sign-in routes.
func (o *OIDC) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /auth/login", o.login)
	mux.HandleFunc("GET /auth/callback", o.callback)
	mux.HandleFunc("POST /auth/logout", o.logout)
}

func (o *OIDC) login(w http.ResponseWriter, r *http.Request) {
	l := login{State: random(), Nonce: random(), Verifier: oauth2.GenerateVerifier(), Next: localPath(r.URL.Query().Get("next")), Expires: o.now().Add(loginTTL).Unix()}
	o.write(w, loginCookie, l, loginTTL)
	http.Redirect(w, r, o.oauth.AuthCodeURL(l.State, oidc.Nonce(l.Nonce), oauth2.S256ChallengeOption(l.Verifier)), http.StatusFound)
}

func (o *OIDC) callback(w http.ResponseWriter, r *http.Request) {
	fail := func(code int, msg string) { http.Error(w, msg, code) }
	var l login
	if !o.read(r, loginCookie, &l) || o.now().Unix() >= l.Expires || r.URL.Query().Get("state") != l.State {
		fail(http.StatusBadRequest, "This sign-in did not start here (no matching state: an old tab or a forged link); sign in again from the console.")
		return
	}
	o.clear(w, loginCookie)
	if e := r.URL.Query().Get("error"); e != "" {
		fail(http.StatusUnauthorized, "The identity provider did not sign you in: "+e+" "+r.URL.Query().Get("error_description"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	tok, err := o.oauth.Exchange(ctx, r.URL.Query().Get("code"), oauth2.VerifierOption(l.Verifier))
	if err != nil {
		fail(http.StatusBadGateway, "The identity provider did not exchange the sign-in code: "+err.Error())
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := o.verifier.Verify(ctx, raw)
	if err != nil {
		fail(http.StatusUnauthorized, "The ID token did not verify: "+err.Error())
		return
	}
	if idt.Nonce != l.Nonce {
		fail(http.StatusUnauthorized, "The ID token was not issued for this sign-in (nonce); sign in again.")
		return
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		fail(http.StatusUnauthorized, "The ID token's claims are unreadable: "+err.Error())
		return
	}
	name, _ := claims[o.claim].(string)
	if name = strings.TrimSpace(name); name == "" {
		fail(http.StatusUnauthorized, fmt.Sprintf("The ID token has no %q claim to name you by.", o.claim))
		return
	}
	if v, ok := claims["email_verified"].(bool); o.claim == "email" && ok && !v {
		fail(http.StatusUnauthorized, "The identity provider has not verified the email "+name+"; the console names people only by a verified one.")
		return
	}
	o.write(w, sessionCookie, session{Name: name, Expires: o.now().Add(o.ttl).Unix()}, o.ttl)
	http.Redirect(w, r, l.Next, http.StatusSeeOther)
}

func (o *OIDC) logout(w http.ResponseWriter, r *http.Request) {
	o.clear(w, sessionCookie)
	http.Redirect(w, r, "/auth/login", http.StatusSeeOther)
}

// localPath keeps a post-sign-in destination on this console.
func localPath(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.Contains(p, "\\") {
		return "/"
	}
	return p
}

func random() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (o *OIDC) sign(payload []byte) string {
	m := hmac.New(sha256.New, o.key)
	m.Write(payload)
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (o *OIDC) write(w http.ResponseWriter, name string, v any, ttl time.Duration) {
	b, _ := json.Marshal(v)
	http.SetCookie(w, &http.Cookie{Name: name, Value: o.sign(b), Path: "/", MaxAge: int(ttl / time.Second), HttpOnly: true, Secure: o.secure, SameSite: http.SameSiteLaxMode})
}

func (o *OIDC) clear(w http.ResponseWriter, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: o.secure, SameSite: http.SameSiteLaxMode})
}

// read verifies a cookie's signature before trusting a byte of it.
func (o *OIDC) read(r *http.Request, name string, v any) bool {
	c, err := r.Cookie(name)
	if err != nil {
		return false
	}
	p, sig, ok := strings.Cut(c.Value, ".")
	if !ok {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return false
	}
	want, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, o.key)
	m.Write(payload)
	if !hmac.Equal(m.Sum(nil), want) {
		return false
	}
	return json.Unmarshal(payload, v) == nil
}
