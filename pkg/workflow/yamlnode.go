package workflow

import (
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseYAML parses exactly one YAML document with positions. It also refuses
// duplicate map keys, which yaml.v3 only checks when decoding into Go maps.
func parseYAML(src []byte) (root *yaml.Node, perr *ParseError) {
	defer func() {
		// yaml.v3 recovers its own panics; this is a last line of defence so
		// that Load never panics on hostile input.
		if r := recover(); r != nil {
			root, perr = nil, &ParseError{Message: fmt.Sprint(r)}
		}
	}()
	dec := yaml.NewDecoder(strings.NewReader(string(src)))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // empty file
		}
		return nil, toParseError(err, src)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &ParseError{Message: "Source contains multiple documents; please use YAML.parseAllDocuments()", Line: extra.Line, Column: extra.Column}
	} else if !errors.Is(err, io.EOF) {
		return nil, toParseError(err, src)
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root = doc.Content[0]
	} else {
		root = &doc
	}
	if dup := findDuplicateKey(root, 0); dup != nil {
		return nil, &ParseError{Message: fmt.Sprintf("Map keys must be unique; '%s' is repeated", dup.Value), Line: dup.Line, Column: dup.Column}
	}
	return root, nil
}

func toParseError(err error, src []byte) *ParseError {
	msg := err.Error()
	pe := &ParseError{Message: strings.TrimPrefix(msg, "yaml: ")}
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		pe.Message = m[2]
		pe.Line, _ = strconv.Atoi(m[1])
		// yaml.v3 reports no column; the first non-blank character of the
		// reported line is the closest honest approximation.
		pe.Column = 1
		lines := strings.Split(string(src), "\n")
		if pe.Line >= 1 && pe.Line <= len(lines) {
			l := lines[pe.Line-1]
			pe.Column = len(l) - len(strings.TrimLeft(l, " \t")) + 1
		}
	}
	return pe
}

// findDuplicateKey returns the second occurrence of a repeated map key.
func findDuplicateKey(n *yaml.Node, depth int) *yaml.Node {
	if n == nil || depth > maxDepth {
		return nil
	}
	if n.Kind == yaml.MappingNode {
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind == yaml.ScalarNode {
				if seen[k.Value] {
					return k
				}
				seen[k.Value] = true
			}
		}
	}
	if n.Kind == yaml.AliasNode {
		return nil
	}
	for _, c := range n.Content {
		if d := findDuplicateKey(c, depth+1); d != nil {
			return d
		}
	}
	return nil
}

// maxDepth bounds recursion over YAML trees.
const maxDepth = 200

// maxNodes bounds alias expansion when converting YAML to JSON values.
const maxNodes = 200000

// deref follows alias nodes.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 64; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}

// pair is one key/value entry of a YAML map.
type pair struct {
	Key   *yaml.Node
	Value *yaml.Node
}

// pairs lists a mapping node's entries in file order (aliases resolved).
func pairs(n *yaml.Node) []pair {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	out := make([]pair, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := deref(n.Content[i])
		v := deref(n.Content[i+1])
		if k == nil {
			continue
		}
		if v == nil {
			v = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: k.Line, Column: k.Column}
		}
		out = append(out, pair{Key: k, Value: v})
	}
	return out
}

func isMap(n *yaml.Node) bool { n = deref(n); return n != nil && n.Kind == yaml.MappingNode }
func isSeq(n *yaml.Node) bool { n = deref(n); return n != nil && n.Kind == yaml.SequenceNode }

func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// isString reports a scalar that YAML resolves to text.
func isString(n *yaml.Node) bool {
	n = deref(n)
	if n == nil || n.Kind != yaml.ScalarNode {
		return false
	}
	t := n.ShortTag()
	return t == "!!str" || t == "!!timestamp" || t == "!!binary"
}

func isNumber(n *yaml.Node) bool {
	n = deref(n)
	if n == nil || n.Kind != yaml.ScalarNode {
		return false
	}
	t := n.ShortTag()
	return t == "!!int" || t == "!!float"
}

func isBool(n *yaml.Node) bool {
	n = deref(n)
	return n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool"
}

// kindName names a node's JSON type for messages.
func kindName(n *yaml.Node) string {
	n = deref(n)
	switch {
	case n == nil || isNull(n):
		return "null"
	case n.Kind == yaml.MappingNode:
		return "object"
	case n.Kind == yaml.SequenceNode:
		return "array"
	case isBool(n):
		return "boolean"
	case isNumber(n):
		return "number"
	default:
		return "string"
	}
}

// number decodes a numeric scalar.
func number(n *yaml.Node) (float64, bool) {
	n = deref(n)
	if !isNumber(n) {
		return 0, false
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return 0, false
	}
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// boolean decodes a boolean scalar.
func boolean(n *yaml.Node) (bool, bool) {
	n = deref(n)
	if !isBool(n) {
		return false, false
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		return false, false
	}
	return b, true
}

// scalarText is the text of a scalar as written (for messages).
func scalarText(n *yaml.Node) string {
	n = deref(n)
	if n == nil {
		return ""
	}
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	return kindName(n)
}

// converter turns YAML nodes into JSON-compatible values (map[string]any,
// []any, float64, string, bool, nil).
type converter struct {
	budget int
	// bad is the first node that has no JSON form (a non-finite number).
	bad *yaml.Node
}

func toJSON(n *yaml.Node) (any, *yaml.Node) {
	c := &converter{budget: maxNodes}
	v := c.value(n, 0)
	return v, c.bad
}

func (c *converter) value(n *yaml.Node, depth int) any {
	n = deref(n)
	c.budget--
	if n == nil || depth > maxDepth || c.budget < 0 {
		if c.bad == nil && n != nil {
			c.bad = n
		}
		return nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for _, p := range pairs(n) {
			m[scalarText(p.Key)] = c.value(p.Value, depth+1)
		}
		return m
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, e := range n.Content {
			l = append(l, c.value(e, depth+1))
		}
		return l
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil
		case "!!bool":
			b, _ := boolean(n)
			return b
		case "!!int", "!!float":
			f, ok := number(n)
			if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
				if c.bad == nil {
					c.bad = n
				}
				return nil
			}
			return f
		default:
			// Strings, timestamps and binaries all stay as written.
			return n.Value
		}
	case yaml.DocumentNode:
		if len(n.Content) == 1 {
			return c.value(n.Content[0], depth+1)
		}
	}
	return nil
}

// stringValue returns a scalar's text when it is a string; timestamps stay
// as written.
func stringValue(n *yaml.Node) (string, bool) {
	n = deref(n)
	if !isString(n) {
		return "", false
	}
	return n.Value, true
}

// nodeAt walks a path (map keys, sequence indices) inside a YAML tree and
// returns the deepest node reached: the key node of the last map entry, or
// the element of the last index.
func nodeAt(n *yaml.Node, path []string) *yaml.Node {
	cur := deref(n)
	best := cur
	for _, seg := range path {
		if cur == nil {
			break
		}
		switch cur.Kind {
		case yaml.MappingNode:
			var next *yaml.Node
			for _, p := range pairs(cur) {
				if p.Key.Value == seg {
					best = p.Key
					next = p.Value
					break
				}
			}
			cur = next
		case yaml.SequenceNode:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(cur.Content) {
				return best
			}
			cur = deref(cur.Content[i])
			best = cur
		default:
			return best
		}
	}
	return best
}
