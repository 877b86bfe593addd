package adapters

// ConfigSchema is the http adapter's config_schema (spec §13.1): the keys
// of a step's `config` that readHTTPConfig reads — base_url, headers and
// auth {type, token_env, header_name} — and nothing else. The engine
// checks every registered step's config against it. A manifest entry's own
// base_url or auth wins over a step's (readHTTPConfig), so for such an
// entry the schema leaves that key out and a step that writes it is
// refused instead of silently overridden; the catalog instance has no
// base_url of its own, so a step's config must name one.
func (a *HTTP) ConfigSchema() map[string]any {
	props := map[string]any{
		"headers": map[string]any{
			"type":                 "object",
			"description":          "Headers sent with each request; credentials go in auth, not here.",
			"additionalProperties": map[string]any{"type": "string"},
		},
	}
	var required []any
	if str(a.construction["base_url"]) == "" {
		props["base_url"] = map[string]any{
			"type":        "string",
			"description": "The service's base URL, such as https://api.example.com/v1.",
			"pattern":     "^https?://",
		}
		required = append(required, "base_url")
	}
	if a.construction["auth"] == nil {
		props["auth"] = map[string]any{
			"type":                 "object",
			"description":          "How the credential is sent; token_env names the runner's environment variable that holds it.",
			"additionalProperties": false,
			"required":             []any{"token_env"},
			"properties": map[string]any{
				"type":        map[string]any{"type": "string", "enum": []any{"bearer", "basic", "header"}},
				"token_env":   map[string]any{"type": "string", "pattern": envName.String()},
				"header_name": map[string]any{"type": "string"},
			},
		}
	}
	s := map[string]any{"type": "object", "additionalProperties": false, "properties": props}
	if required != nil {
		s["required"] = required
	}
	return s
}
