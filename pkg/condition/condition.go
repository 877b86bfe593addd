// Package condition parses and evaluates the workflow condition language used
// by `when`, `preconditions` and `abort_unless` (workflow-file spec §7).
//
// A condition is `path [op value]`. The package is pure: callers supply the
// recorded outputs, params and settlement facts in a Scope.
package condition

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Root says where a condition's path starts.
type Root int

const (
	// RootStep reads the recorded output of a step: <step>.<field>…
	RootStep Root = iota
	// RootParams reads run parameters: run.params.<name>…
	RootParams
	// RootSettlement reads settlement facts: $settlement.<step>.<field>
	RootSettlement
)

func (r Root) String() string {
	switch r {
	case RootStep:
		return "step"
	case RootParams:
		return "run.params"
	case RootSettlement:
		return "$settlement"
	default:
		return fmt.Sprintf("Root(%d)", int(r))
	}
}

// Condition is one parsed condition.
type Condition struct {
	Text string
	Root Root
	// Step is the step for RootStep and RootSettlement.
	Step string
	// Field holds the path segments after the root: for RootStep the segments
	// after the step name; for RootParams after run.params; for
	// RootSettlement after $settlement.<step>.
	Field []string
	HasOp bool
	// Op is one of == != >= <= > <.
	Op string
	// Value is the literal: string, float64, bool, or nil for null.
	Value any
}

// Path returns the condition's left-hand side as written (dotted).
func (c *Condition) Path() string {
	var head []string
	switch c.Root {
	case RootParams:
		head = []string{"run", "params"}
	case RootSettlement:
		head = []string{"$settlement", c.Step}
	default:
		head = []string{c.Step}
	}
	return strings.Join(append(head, c.Field...), ".")
}

// ParseError is returned by Parse and ParseFor. Its message starts with the
// quoted field name so the loader only needs to prefix "Step '<step>': ".
type ParseError struct {
	Field string // when, preconditions, abort_unless…
	Text  string // the condition as written
	// Connective is "and" or "or" when the condition was refused for using
	// one; empty otherwise.
	Connective string
	msg        string
}

func (e *ParseError) Error() string { return e.msg }

// operators in longest-match-first order.
var operators = []string{"==", "!=", ">=", "<=", ">", "<"}

var numberRE = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

// Parse parses a `when` condition. See ParseFor.
func Parse(text string) (*Condition, error) { return ParseFor("when", text) }

// ParseFor parses one condition; field names the YAML field the condition
// came from and only shapes error messages.
func ParseFor(field, text string) (*Condition, error) {
	fail := func(format string, args ...any) error {
		return &ParseError{Field: field, Text: text, msg: fmt.Sprintf("'%s' ", field) + fmt.Sprintf(format, args...)}
	}
	src := strings.TrimSpace(text)
	if src == "" {
		return nil, fail("condition is empty")
	}
	if word, parts, ok := findConnective(src); ok {
		var b strings.Builder
		fmt.Fprintf(&b, "'%s' uses unsupported '%s' — write it as a list:\n  %s:", field, word, field)
		for _, p := range parts {
			fmt.Fprintf(&b, "\n    - \"%s\"", p)
		}
		return nil, &ParseError{Field: field, Text: text, Connective: word, msg: b.String()}
	}

	lhs, op, rhs, err := splitOperator(src)
	if err != nil {
		return nil, fail("condition %q %s", text, err.Error())
	}
	c := &Condition{Text: text}
	if err := c.setPath(lhs); err != nil {
		return nil, fail("condition %q %s", text, err.Error())
	}
	if op == "" {
		return c, nil
	}
	c.HasOp, c.Op = true, op
	if rhs == "" {
		return nil, fail("condition %q has no value after '%s'", text, op)
	}
	v, err := parseValue(rhs)
	if err != nil {
		return nil, fail("condition %q %s", text, err.Error())
	}
	c.Value = v
	return c, nil
}

// findConnective looks for the whole words "and"/"or" outside quotes and
// returns the first one found with the condition split at every occurrence
// of that word.
func findConnective(src string) (word string, parts []string, ok bool) {
	type hit struct{ start, end int }
	var hits []hit
	var quote byte
	isWord := func(b byte) bool {
		return b == '_' || b == '.' || b == '$' || b == '-' ||
			(b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')
	}
	for i := 0; i < len(src); i++ {
		ch := src[i]
		if quote != 0 {
			if ch == quote {
				quote = 0
			}
			continue
		}
		if ch == '\'' || ch == '"' {
			quote = ch
			continue
		}
		if !isWord(ch) || (i > 0 && isWord(src[i-1])) {
			continue
		}
		j := i
		for j < len(src) && isWord(src[j]) {
			j++
		}
		w := strings.ToLower(src[i:j])
		if (w == "and" || w == "or") && (word == "" || w == word) {
			word = w
			hits = append(hits, hit{i, j})
		}
		i = j - 1
	}
	if word == "" {
		return "", nil, false
	}
	prev := 0
	for _, h := range hits {
		parts = append(parts, strings.TrimSpace(src[prev:h.start]))
		prev = h.end
	}
	parts = append(parts, strings.TrimSpace(src[prev:]))
	return word, parts, true
}

// splitOperator finds the first operator outside quotes.
func splitOperator(src string) (lhs, op, rhs string, err error) {
	var quote byte
	for i := 0; i < len(src); i++ {
		ch := src[i]
		if quote != 0 {
			if ch == quote {
				quote = 0
			}
			continue
		}
		if ch == '\'' || ch == '"' {
			quote = ch
			continue
		}
		for _, o := range operators {
			if strings.HasPrefix(src[i:], o) {
				return strings.TrimSpace(src[:i]), o, strings.TrimSpace(src[i+len(o):]), nil
			}
		}
	}
	if quote != 0 {
		return "", "", "", fmt.Errorf("has an unterminated quote")
	}
	return src, "", "", nil
}

func (c *Condition) setPath(p string) error {
	if p == "" {
		return fmt.Errorf("has no path before the operator")
	}
	if strings.ContainsAny(p, " \t\r\n'\"=!<>") {
		if strings.Contains(p, "=") {
			return fmt.Errorf("is not a valid condition: path %q contains '='; use '==' to compare", p)
		}
		return fmt.Errorf("is not a valid condition: path %q must be dotted names without spaces or quotes (e.g. \"step.field == 1\")", p)
	}
	segs := strings.Split(p, ".")
	for _, s := range segs {
		if s == "" {
			return fmt.Errorf("has an empty path segment in %q", p)
		}
	}
	switch {
	case segs[0] == "run" && len(segs) >= 2 && segs[1] == "params":
		c.Root, c.Field = RootParams, segs[2:]
	case segs[0] == "$settlement":
		if len(segs) < 2 {
			return fmt.Errorf("must name a step: $settlement.<step>.<field>")
		}
		c.Root, c.Step, c.Field = RootSettlement, segs[1], segs[2:]
	default:
		c.Root, c.Step, c.Field = RootStep, segs[0], segs[1:]
	}
	if c.Field == nil {
		c.Field = []string{}
	}
	return nil
}

func parseValue(s string) (any, error) {
	if s[0] == '\'' || s[0] == '"' {
		q := s[0]
		end := strings.IndexByte(s[1:], q)
		if end < 0 {
			return nil, fmt.Errorf("has an unterminated quote")
		}
		if end+2 != len(s) {
			return nil, fmt.Errorf("has text after the quoted value: %q", s[end+2:])
		}
		return s[1 : end+1], nil
	}
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "null":
		return nil, nil
	}
	if numberRE.MatchString(s) {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("has an invalid number %q", s)
		}
		return f, nil
	}
	if strings.ContainsAny(s, "=!<>") {
		return nil, fmt.Errorf("has more than one operator: %q", s)
	}
	if strings.ContainsAny(s, " \t\r\n'\"") {
		return nil, fmt.Errorf("has an unquoted value with spaces or quotes: %q (quote text values)", s)
	}
	return s, nil
}
