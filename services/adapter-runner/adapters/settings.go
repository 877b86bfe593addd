package adapters

import (
	"fmt"
	"slices"
	"strings"
)

// settings is a catalog adapter's construction config (a manifest entry's
// config, secrets resolved), read key by key. Each reader names the key
// in its refusal, which the manifest loader prefixes with the entry:
// "constructing adapters.<name> (use: <use>) failed: config.<key> …".
type settings map[string]any

// readSettings checks that config has only the known keys: a key the
// adapter does not act on is refused, never ignored.
func readSettings(config map[string]any, known ...string) (settings, error) {
	for _, k := range sortedKeys(config) {
		if !slices.Contains(known, k) {
			return nil, fmt.Errorf("config: unknown key '%s' (known: %s)", k, strings.Join(known, ", "))
		}
	}
	return settings(config), nil
}

// text is the string at key: def when absent; an error when required and
// absent or empty, or when it is not a string.
func (s settings) text(key string, required bool, def string) (string, error) {
	v, has := s[key]
	if !has || v == nil {
		if required {
			return "", fmt.Errorf("config.%s is required", key)
		}
		return def, nil
	}
	str, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("config.%s must be a string", key)
	}
	if required && strings.TrimSpace(str) == "" {
		return "", fmt.Errorf("config.%s is required (it is empty: is its secret set?)", key)
	}
	return str, nil
}

// object is the object at key (nil when absent and not required).
func (s settings) object(key string, required bool) (map[string]any, error) {
	v, has := s[key]
	if !has || v == nil {
		if required {
			return nil, fmt.Errorf("config.%s is required", key)
		}
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("config.%s must be an object", key)
	}
	return m, nil
}

// baseURL is config.base_url, def when absent: the service's API, which a
// test (or a proxy) may replace.
func (s settings) baseURL(def string) (string, error) {
	base, err := s.text("base_url", false, def)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return "", fmt.Errorf("config.base_url '%s' must be an http:// or https:// URL", base)
	}
	return strings.TrimRight(base, "/"), nil
}
