package provider

import (
	"fmt"
	"strings"
)

// Services are the provider addresses and keys agent-svc holds.
type Services struct {
	Anthropic Config
	OpenAI    Config
}

// Choice is what a drive asked for.
type Choice struct {
	Provider      string
	Model         string
	BaseURL       string
	StrictBaseURL bool
}

// Choose picks the provider for a drive (§3), or says why none can be
// used. warnings are lines to print and go on.
func Choose(s Services, c Choice) (p Provider, warnings []string, err error) {
	hasOpenAI := strings.TrimSpace(s.OpenAI.APIKey) != ""
	hasAnthropic := strings.TrimSpace(s.Anthropic.APIKey) != ""
	name := strings.TrimSpace(c.Provider)
	switch name {
	case "", Anthropic, OpenAI:
	default:
		return nil, nil, fmt.Errorf("error: option '--provider <provider>' argument '%s' is invalid. --provider must be openai or anthropic.", name)
	}
	if !hasOpenAI && !hasAnthropic {
		return nil, nil, fmt.Errorf("Error: realm agent requires an LLM API key. Set OPENAI_API_KEY or ANTHROPIC_API_KEY.")
	}
	if name == "" {
		name = Anthropic
		if hasOpenAI {
			name = OpenAI
		}
	}
	if name == Anthropic && !hasAnthropic {
		return nil, nil, fmt.Errorf("--provider anthropic was given, but ANTHROPIC_API_KEY is not set or is empty (only OPENAI_API_KEY is set). Set ANTHROPIC_API_KEY, or use --provider openai with an OpenAI model.")
	}
	if name == OpenAI && !hasOpenAI {
		return nil, nil, fmt.Errorf("--provider openai was given, but OPENAI_API_KEY is not set or is empty (only ANTHROPIC_API_KEY is set). Set OPENAI_API_KEY, or use --provider anthropic with an Anthropic model.")
	}
	if name == Anthropic && c.BaseURL != "" {
		return nil, nil, fmt.Errorf("Error: --base-url is only supported with --provider openai (or OpenAI-compatible endpoints). For Anthropic, configure the endpoint via the ANTHROPIC_BASE_URL environment variable.")
	}
	if strings.TrimSpace(c.Model) == "" {
		return nil, nil, fmt.Errorf("--model is required: realm has no default model. %s", modelHint(name, c.BaseURL != ""))
	}
	if c.StrictBaseURL && c.BaseURL == "" {
		warnings = append(warnings, "⚠ --strict-base-url has no effect without --base-url.")
	}
	if name == Anthropic {
		return NewAnthropic(s.Anthropic), warnings, nil
	}
	if IsReasoningModel(c.Model) {
		switch {
		case c.BaseURL != "" && c.StrictBaseURL:
			warnings = append(warnings, "  ⚠ --base-url and --strict-base-url are ignored for the o1 model family — these models use a dedicated provider that always talks to the native OpenAI endpoint.")
		case c.BaseURL != "":
			warnings = append(warnings, "  ⚠ --base-url is ignored for the o1 model family — these models use a dedicated provider that always talks to the native OpenAI endpoint.")
		}
		return NewOpenAIReasoning(s.OpenAI), warnings, nil
	}
	cfg := s.OpenAI
	opts := OpenAIOptions{}
	if c.BaseURL != "" {
		cfg.BaseURL = c.BaseURL
		opts = OpenAIOptions{Compat: true, StrictCompat: c.StrictBaseURL}
	}
	return NewOpenAI(cfg, opts), warnings, nil
}

func modelHint(name string, baseURL bool) string {
	switch {
	case baseURL:
		return "Name the model the service at --base-url offers."
	case name == Anthropic:
		return "Name an Anthropic model; Anthropic lists them at https://platform.claude.com/docs/en/models/overview."
	}
	return "Name an OpenAI model; OpenAI lists them at https://developers.openai.com/api/docs/models."
}
