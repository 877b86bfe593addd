package command

import (
	"strings"
	"testing"
)

func TestOnlyALongWalkOfTheStoreIsReported(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                    string
		scanned, pages, largest int64
		want                    string
	}{
		{"two runs that one SCAN each returned", 2, 2, 1, ""},
		{"a store that fits one page", 300, 1, 300, ""},
		{"a store read over pages", 450, 3, 200, "Walked the store: 450 run(s) read in 3 page(s) of at most 200.\n"},
	}
	for _, tt := range tests {
		var b strings.Builder
		reportWalk(&b, tt.scanned, tt.pages, tt.largest)
		if b.String() != tt.want {
			t.Errorf("%s: wrote %q, want %q", tt.name, b.String(), tt.want)
		}
	}
}
