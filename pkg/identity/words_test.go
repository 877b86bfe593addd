package identity

import (
	"strings"
	"testing"
)

func TestWordsNameAProgramAsTheSpecDoes(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", MaxNameLen+1)
	for _, tt := range []struct{ by, source, channel, want string }{
		{"ops@example", "ambient", "run", "ops@example (from REALM_OPERATOR, via run)"},
		{"ana@host", "derived", "agent", "ana@host (from the OS user, via agent)"},
		{"billing-bot", "stated", "mcp-http", "billing-bot (as stated, via mcp-http)"},
		{"old", "stated", "", "old (as stated)"},
		{"bad\x1bname", "stated", "run", UnprintableName},
		{"line\u2028sep", "stated", "run", UnprintableName},
		{"x", "guessed", "run", UnprintableName},
		{"", "stated", "run", UnprintableName},
		{long, "stated", "run", strings.Repeat("é", MaxNameLen) + "…[truncated] (as stated, via run)"},
	} {
		if got := Words(tt.by, tt.source, tt.channel); got != tt.want {
			t.Errorf("Words(%q, %q, %q) = %q, want %q", tt.by, tt.source, tt.channel, got, tt.want)
		}
	}
}
