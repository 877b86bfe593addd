package redact

import "testing"

func TestRedactorHidesSecrets(t *testing.T) {
	t.Parallel()
	r := New([]string{"API_KEY=sk-abcdef123456", "SHORT=abcd", "PREFIX=sk-abc", "EMPTY="}, "notes-token-42")
	tests := []struct{ name, in, want string }{
		{"an environment value", "key is sk-abcdef123456.", "key is [REDACTED]."},
		{"the longest value first", "sk-abcdef123456 and sk-abc", "[REDACTED] and [REDACTED]"},
		{"a resolved secret", "auth notes-token-42 ok", "auth [REDACTED] ok"},
		{"short values are kept", "abcd stays", "abcd stays"},
		{"a bearer token", "Authorization: Bearer xyz.123-abc", "Authorization: Bearer [REDACTED]"},
		{"a token parameter", "GET /x?token=q1w2e3&a=1", "GET /x?token=[REDACTED]&a=1"},
		{"nothing secret", "plain text", "plain text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := r.String(tt.in); got != tt.want {
				t.Fatalf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
