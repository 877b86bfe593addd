package provider

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestExtractJSONKeepsTheLastObject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text, want string
		ok               bool
	}{
		{"bare", `{"a":1}`, `{"a":1}`, true},
		{"prose around", `Sure. {"a":1} and then {"b":2}. Done.`, `{"b":2}`, true},
		{"fenced first", "note {\"x\":0}\n```json\n{\"a\":\"}\"}\n```", `{"a":"}"}`, true},
		{"brace in string", `{"a":"{not}"}`, `{"a":"{not}"}`, true},
		{"array only", `[1,2]`, ``, false},
		{"nothing", `no json here`, ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := ExtractJSON(tt.text)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if ok {
				b, _ := json.Marshal(got)
				if string(b) != tt.want {
					t.Errorf("got %s, want %s", b, tt.want)
				}
			}
		})
	}
}

func TestCeilingMatchesTheDocumentedFigures(t *testing.T) {
	t.Parallel()
	for per, want := range map[time.Duration]int64{time.Second: 64500, 45 * time.Second: 196500, 600 * time.Second: 1861500} {
		if got := Ceiling(per).Milliseconds(); got != want {
			t.Errorf("Ceiling(%s) = %d, want %d", per, got, want)
		}
	}
}

func TestSystemPromptOrdersProfileInstructionsAndSchema(t *testing.T) {
	t.Parallel()
	got := SystemPrompt("You are a support lead.", json.RawMessage(`{ "type": "object" }`), false)
	want := "You are a support lead.\n\nYou are an AI agent executing a step in a structured workflow.\n" +
		"Your task is described below. Respond with a JSON object only — no markdown, no explanation.\n" +
		`The JSON must conform to this schema: {"type":"object"}`
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if tool := SystemPrompt("", json.RawMessage(`{}`), true); !strings.Contains(tool, "Call the `__realm_submit__` tool") {
		t.Errorf("submit-tool variant = %q", tool)
	}
}

func TestChooseRoutesO1ModelsToTheReasoningProvider(t *testing.T) {
	t.Parallel()
	s := Services{OpenAI: Config{APIKey: "k"}, Anthropic: Config{APIKey: "k"}}
	tests := []struct{ provider, model, want string }{
		{"openai", "o1-mini", OpenAIReasoning},
		{"openai", "O1", OpenAIReasoning},
		{"openai", "o3-mini", OpenAI},
		{"", "gpt-x", OpenAI},
		{"anthropic", "claude-x", Anthropic},
	}
	for _, tt := range tests {
		p, _, err := Choose(s, Choice{Provider: tt.provider, Model: tt.model})
		if err != nil || p.Name() != tt.want {
			t.Errorf("Choose(%s, %s) = %v, %v; want %s", tt.provider, tt.model, p, err, tt.want)
		}
	}
	if _, _, err := Choose(s, Choice{Provider: "anthropic", Model: "m", BaseURL: "http://x"}); err == nil ||
		!strings.HasPrefix(err.Error(), "Error: --base-url is only supported with --provider openai") {
		t.Errorf("anthropic with --base-url: %v", err)
	}
	if _, _, err := Choose(Services{}, Choice{Model: "m"}); err == nil || err.Error() != "Error: realm agent requires an LLM API key. Set OPENAI_API_KEY or ANTHROPIC_API_KEY." {
		t.Errorf("no key: %v", err)
	}
}
