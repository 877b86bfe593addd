package handler

import (
	"regexp"
	"slices"
	"strings"
)

// The helper functions of the handlers contract, for use inside handlers.
// They take the JSON values a handler receives (map[string]any, []any, …).

// ResolveResource returns one field of one step's output from
// StepContext.Resources. It reports false when resources is nil, the step has
// no entry, the entry is not an object, or the field is absent.
func ResolveResource(resources map[string]any, stepID, field string) (any, bool) {
	entry, ok := resources[stepID].(map[string]any)
	if !ok {
		return nil, false
	}
	v, ok := entry[field]
	return v, ok
}

// WalkField searches data to any depth and returns every object that has
// field as its own key, in depth-first order, a matching object before the
// objects inside it. Go maps keep no key order, so an object's values are
// visited in key order (JavaScript visits them in insertion order). It never
// returns nil.
func WalkField(data any, field string) []map[string]any {
	out := []map[string]any{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if _, ok := v[field]; ok {
				out = append(out, v)
			}
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(v[k])
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(data)
	return out
}

// Partition is PartitionBySubstring's result.
type Partition struct {
	Accepted []any `json:"accepted"`
	Rejected []any `json:"rejected"`
}

// PartitionBySubstring splits candidates in two: an object is accepted when
// its quoteField is a string found in sourceText exactly (letter case
// included); everything else is rejected. With an empty sourceText every
// candidate is rejected. Both lists are non-nil.
func PartitionBySubstring(candidates []any, quoteField, sourceText string) Partition {
	p := Partition{Accepted: []any{}, Rejected: []any{}}
	for _, c := range candidates {
		obj, _ := c.(map[string]any)
		quote, isText := obj[quoteField].(string)
		if sourceText != "" && isText && strings.Contains(sourceText, quote) {
			p.Accepted = append(p.Accepted, c)
			continue
		}
		p.Rejected = append(p.Rejected, c)
	}
	return p
}

// Counts is CountResults's result.
type Counts struct {
	AcceptedCount   int `json:"accepted_count"`
	RejectedCount   int `json:"rejected_count"`
	CandidatesFound int `json:"candidates_found"`
}

// CountResults returns the length of each list and their sum.
func CountResults(accepted, rejected []any) Counts {
	return Counts{
		AcceptedCount:   len(accepted),
		RejectedCount:   len(rejected),
		CandidatesFound: len(accepted) + len(rejected),
	}
}

// The modes of CompareStrings.
const (
	CompareExact  = "exact"
	ComparePrefix = "prefix"
	CompareRegex  = "regex"
)

// CompareStrings compares a with b by mode: "exact" (the same string),
// "prefix" (a starts with b) or "regex" (the expression b matches anywhere
// in a; an invalid expression gives false). The second result is false for
// an unknown mode (the contract's undefined). Expressions are Go's RE2
// syntax: a JavaScript-only construct (lookaround, backreference) is invalid
// here and gives false.
func CompareStrings(a, b, mode string) (match bool, ok bool) {
	switch mode {
	case CompareExact:
		return a == b, true
	case ComparePrefix:
		return strings.HasPrefix(a, b), true
	case CompareRegex:
		re, err := regexp.Compile(b)
		if err != nil {
			return false, true
		}
		return re.MatchString(a), true
	default:
		return false, false
	}
}
