package dotenv_test

import (
	"maps"
	"testing"

	"github.com/realm-go/realm/pkg/dotenv"
)

func TestParseLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line, key, val string
		ok             bool
	}{
		{"A=1", "A", "1", true},
		{"export B = two words ", "B", "two words", true},
		{`C="quoted # not a comment"`, "C", "quoted # not a comment", true},
		{"D='single'", "D", "single", true},
		{"E=", "E", "", true},
		{"# comment", "", "", false},
		{"   ", "", "", false},
		{"no equals", "", "", false},
		{"=value", "", "", false},
		{"TWO WORDS=x", "", "", false},
	}
	for _, tt := range tests {
		k, v, ok := dotenv.ParseLine(tt.line)
		if k != tt.key || v != tt.val || ok != tt.ok {
			t.Errorf("ParseLine(%q) = %q, %q, %v; want %q, %q, %v", tt.line, k, v, ok, tt.key, tt.val, tt.ok)
		}
	}
}

func TestParseKeepsTheLastValueOfAKey(t *testing.T) {
	t.Parallel()
	got := dotenv.Parse([]byte("# local\nA=1\nB='two'\nA=3\nnoise\n"))
	if want := map[string]string{"A": "3", "B": "two"}; !maps.Equal(got, want) {
		t.Errorf("Parse = %v, want %v", got, want)
	}
}
