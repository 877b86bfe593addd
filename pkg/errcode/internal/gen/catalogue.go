package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
)

// entry is one row of codes.json.
type entry struct {
	Code            string   `json:"code"`
	Category        string   `json:"category"`
	AgentAction     string   `json:"agent_action"`
	AlsoActions     []string `json:"also_actions"`
	Retryable       bool     `json:"retryable"`
	RetryableVaries bool     `json:"retryable_varies"`
	Raised          bool     `json:"raised"`
	GRPC            string   `json:"grpc"`
	Meaning         string   `json:"meaning"`

	grpcCode codes.Code
}

// Kept in step with errcode's constants; errcode's tests check the
// generated table against its own lists.
var (
	categories   = []string{"NETWORK", "SERVICE", "STATE", "VALIDATION", "ENGINE", "RESOURCE"}
	agentActions = []string{"provide_input", "resolve_precondition", "report_to_user", "wait_for_human", "wait_and_proceed", "stop"}
)

// parse decodes and checks the catalogue, naming every problem at once.
func parse(data []byte) ([]entry, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var entries []entry
	if err := dec.Decode(&entries); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the catalogue array")
	}
	var problems []error
	seen := map[string]bool{}
	idents := map[string]string{}
	for i := range entries {
		e := &entries[i]
		bad := func(format string, args ...any) {
			problems = append(problems, fmt.Errorf("entry %d (%s): %s", i, e.Code, fmt.Sprintf(format, args...)))
		}
		if !validCode(e.Code) {
			bad("code must be UPPER_SNAKE_CASE")
		}
		if seen[e.Code] {
			bad("duplicate code")
		}
		seen[e.Code] = true
		if other, dup := idents[goName(e.Code)]; dup && other != e.Code {
			bad("Go name %s collides with %s", goName(e.Code), other)
		}
		idents[goName(e.Code)] = e.Code
		if !slices.Contains(categories, e.Category) {
			bad("unknown category %q", e.Category)
		}
		if !slices.Contains(agentActions, e.AgentAction) {
			bad("unknown agent_action %q", e.AgentAction)
		}
		for _, a := range e.AlsoActions {
			if !slices.Contains(agentActions, a) || a == e.AgentAction {
				bad("also_actions: %q is unknown or repeats agent_action", a)
			}
		}
		if err := e.grpcCode.UnmarshalJSON([]byte(`"` + e.GRPC + `"`)); err != nil || e.grpcCode == codes.OK {
			bad("grpc %q is not a gRPC error code name", e.GRPC)
		}
		if strings.TrimSpace(e.Meaning) == "" || strings.ContainsAny(e.Meaning, "\n\r|") {
			bad("meaning must be one non-empty line without '|'")
		}
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return entries, nil
}

func validCode(s string) bool {
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return false
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return s[0] >= 'A' && s[0] <= 'Z'
}

// initialisms keep Go's spelling in constant names (ServiceHTTP4xx,
// MCPToolNotFound, NetworkDNSFailed).
var initialisms = map[string]bool{"HTTP": true, "MCP": true, "DNS": true}

// goName turns VALIDATION_INPUT_SCHEMA into ValidationInputSchema.
func goName(code string) string {
	var b strings.Builder
	for _, part := range strings.Split(strings.ToUpper(code), "_") {
		if part == "" {
			continue
		}
		if initialisms[part] {
			b.WriteString(part)
			continue
		}
		b.WriteString(part[:1])
		b.WriteString(strings.ToLower(part[1:]))
	}
	return b.String()
}

// prefixedName turns ("Action", "wait_for_human") into ActionWaitForHuman,
// the names errcode gives its category and action constants.
func prefixedName(prefix, word string) string {
	return prefix + goName(word)
}
