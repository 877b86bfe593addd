package provider

import (
	"strings"
	"testing"
)

func TestAllowlistMatchesWholeHostsAndPathPrefixesOnly(t *testing.T) {
	t.Parallel()
	a, err := NewAllowlist("https://llm.example.com/v1/", "http://127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	a = a.With(Official...)
	cases := []struct {
		url  string
		want bool
	}{
		{"https://api.openai.com/v1", true},
		{"https://API.OpenAI.com:443/v1/", true},
		{"https://api.anthropic.com", true},
		{"https://llm.example.com/v1", true},
		{"https://llm.example.com/v1/chat", true},
		{"https://llm.example.com./v1", true},
		{"http://127.0.0.1:8080/anything", true},
		{"https://api.openai.com.evil.com/v1", false},
		{"https://evil.com/api.openai.com", false},
		{"https://api.openai.com@evil.com/v1", false},
		{"https://evil.com#@api.openai.com", false},
		{"https://evil.com?api.openai.com", false},
		{"http://api.openai.com/v1", false},
		{"https://api.openai.com:8443/v1", false},
		{"https://llm.example.com/v1evil", false},
		{"https://llm.example.com/v1/../admin", false},
		{"https://llm.example.com/v1/%2e%2e/admin", false},
		{"https://llm.example.com/", false},
		{"http://127.0.0.1:8081", false},
		{"http://127.0.0.1", false},
		{"ftp://api.openai.com", false},
		{"api.openai.com", false},
		{" ", false},
	}
	for _, c := range cases {
		if got := a.Allows(c.url); got != c.want {
			t.Errorf("Allows(%q) = %v, want %v", c.url, got, c.want)
		}
	}
}

func TestAllowlistRefusesEntriesThatAreNotBaseURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"llm.example.com", "https://user:pw@llm.example.com", "https://llm.example.com/?k=v", "https://h:99999", "file:///etc"} {
		if _, err := NewAllowlist(u); err == nil || !strings.Contains(err.Error(), "--allow-base-url") {
			t.Errorf("NewAllowlist(%q) = %v, want a refusal naming the flag", u, err)
		}
	}
}
