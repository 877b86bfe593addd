package main

import (
	"io"
	"strings"
	"testing"

	"github.com/realm-go/realm/console-svc/identity"
)

func TestFlagsTheConsoleWouldNotActOnAreRefused(t *testing.T) {
	none := func(string) string { return "" }
	for _, tc := range []struct {
		name string
		args []string
		want string // a part of the refusal; empty: accepted
	}{
		{"dev mode on loopback", []string{"--dev"}, ""},
		{"the proxy header with its networks", []string{"--addr", "0.0.0.0:8070", "--identity-header", "X-Forwarded-User", "--trusted-proxy", "10.0.0.0/8"}, ""},
		{"no way to sign in", nil, "say how people sign in"},
		{"OIDC with its client", []string{"--oidc-issuer", "https://accounts.example", "--oidc-client-id", "console", "--oidc-redirect-url", "https://console.example/auth/callback"}, ""},
		{"OIDC without its client", []string{"--oidc-issuer", "https://accounts.example"}, "needs --oidc-issuer, --oidc-client-id and --oidc-redirect-url"},
		{"OIDC and dev mode", []string{"--dev", "--oidc-issuer", "https://accounts.example"}, "contradict each other"},
		{"OIDC with trusted networks", []string{"--oidc-issuer", "i", "--oidc-client-id", "c", "--oidc-redirect-url", "https://c/auth/callback", "--trusted-proxy", "10.0.0.0/8"}, "means nothing with OIDC"},
		{"the header without trusted networks", []string{"--identity-header", "X-Forwarded-User"}, "needs --trusted-proxy"},
		{"dev mode on another address", []string{"--dev", "--addr", "0.0.0.0:8070"}, "is not a loopback address"},
		{"dev mode with a header", []string{"--dev", "--identity-header", "X-Forwarded-User"}, "contradict each other"},
		{"dev mode with trusted networks", []string{"--dev", "--trusted-proxy", "10.0.0.0/8"}, "means nothing in dev mode"},
		{"a poll too short for the engine", []string{"--dev", "--poll", "1ms"}, "is too short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parse(tc.args, none, io.Discard)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.source == nil && c.oidc == nil {
					t.Fatal("no identity source")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a refusal containing %q", err, tc.want)
			}
		})
	}
	c, err := parse([]string{"--identity-header", "x-forwarded-user", "--trusted-proxy", "10.0.0.0/8"}, none, io.Discard)
	if err != nil || c.source.(identity.Proxy).Header != "X-Forwarded-User" {
		t.Fatalf("header not canonical: %+v %v", c, err)
	}
}
