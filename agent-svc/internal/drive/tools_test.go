package drive

import (
	"fmt"
	"strings"
	"testing"

	"github.com/realm-go/realm/agent-svc/internal/provider"
	"github.com/realm-go/realm/agent-svc/internal/tools"
)

// tool is a tool whose strict-eligible schema has opt optional properties
// (or an ineligible one when opt < 0).
func tool(name string, opt int) tools.Tool {
	props := map[string]any{"id": map[string]any{"type": "string"}}
	for i := range opt {
		props[fmt.Sprintf("o%d", i)] = map[string]any{"type": "string"}
	}
	s := map[string]any{"type": "object", "additionalProperties": false, "required": []any{"id"}, "properties": props}
	if opt < 0 {
		delete(s, "additionalProperties")
	}
	return tools.Tool{Server: "s", Name: name, Schema: s}
}

func TestStrictToolArgumentsAreAssessedInDeclaredOrder(t *testing.T) {
	t.Parallel()
	many := make([]tools.Tool, 22)
	for i := range many {
		many[i] = tool(fmt.Sprintf("t%02d", i), 0)
	}
	tests := []struct {
		name     string
		provider string
		compat   bool
		list     []tools.Tool
		want     string // each tool: + strict, else its first reason
	}{
		{"anthropic sends at most 20 strict tools", provider.Anthropic, false, many,
			strings.Repeat("+", 20) + " budget_excluded budget_excluded"},
		{"anthropic sums optional properties up to 24, greedily", provider.Anthropic, false,
			[]tools.Tool{tool("a", 10), tool("b", 10), tool("c", 10), tool("d", 4)}, "++ budget_excluded+"},
		{"openai has no budget", provider.OpenAI, false, many, strings.Repeat("+", 22)},
		{"an ineligible schema says why", provider.OpenAI, false, []tools.Tool{tool("a", -1), tool("b", 1)},
			" missing_additional_properties at the schema root+"},
		{"the o1 family cannot", provider.OpenAIReasoning, false, []tools.Tool{tool("a", 0)}, " provider_unsupported"},
		{"a compat endpoint without --strict-base-url", provider.OpenAI, true, []tools.Tool{tool("a", 0)}, " compat_endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			strict, entries := assessTools(tt.provider, tt.compat, tt.list)
			var b strings.Builder
			for i, e := range entries {
				if e["strict_sent"] == true {
					if !strict[tt.list[i].Name] {
						t.Errorf("%s recorded strict but not sent strict", tt.list[i].Name)
					}
					b.WriteString("+")
					continue
				}
				reasons, _ := e["reasons"].([]any)
				fmt.Fprintf(&b, " %v", reasons[0])
			}
			if got := b.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestToolEnvKeepsTheDriversCredentials(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		list []string
		read map[string]bool
	}{
		{"no list: any but the driver's own", nil,
			map[string]bool{"NOTES_TOKEN": true, "ANTHROPIC_API_KEY": false, "OPENAI_API_KEY": false, "REALM_WEBHOOK_SECRET": false}},
		{"a list: only those", []string{"NOTES_TOKEN", "OPENAI_API_KEY"},
			map[string]bool{"NOTES_TOKEN": true, "OPENAI_API_KEY": true, "WEB_TOKEN": false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			readable := toolEnvReadable(tt.list)
			for name, want := range tt.read {
				if got := readable(name); got != want {
					t.Errorf("readable(%s) = %v, want %v", name, got, want)
				}
			}
		})
	}
}
