package provider

import (
	"encoding/json"
	"regexp"
	"strings"
)

// fence matches a ``` block, with or without a language tag.
var fence = regexp.MustCompile("(?s)```[A-Za-z0-9_-]*\\s*\\n?(.*?)```")

// ExtractJSON reads a JSON object out of a model's text (§7): fenced blocks
// first, then the whole text; the last balanced {…} that parses to an
// object wins. ok is false when there is none.
func ExtractJSON(text string) (map[string]any, bool) {
	var fenced []string
	for _, m := range fence.FindAllStringSubmatch(text, -1) {
		fenced = append(fenced, m[1])
	}
	if len(fenced) > 0 {
		if obj, ok := lastObject(strings.Join(fenced, "\n")); ok {
			return obj, true
		}
	}
	return lastObject(text)
}

// lastObject scans s for top-level balanced braces, aware of strings and
// escapes, and returns the last candidate that parses to an object.
func lastObject(s string) (map[string]any, bool) {
	var found map[string]any
	ok := false
	depth, start := 0, -1
	inString, escaped := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			if depth > 0 {
				inString = true
			}
		case '{':
			if depth == 0 {
				start = i
			}
			depth++
		case '}':
			if depth == 0 {
				continue
			}
			depth--
			if depth == 0 && start >= 0 {
				var obj map[string]any
				if err := json.Unmarshal([]byte(s[start:i+1]), &obj); err == nil && obj != nil {
					found, ok = obj, true
				}
				start = -1
			}
		}
	}
	return found, ok
}
