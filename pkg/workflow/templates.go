package workflow

import (
	"encoding/json"
	"fmt"
	"regexp"

	"go.yaml.in/yaml/v3"
)

// stepSrc is one step entry after template expansion.
type stepSrc struct {
	name string
	// key is the step's key node: its line is "the line where the step starts".
	key  *yaml.Node
	node *yaml.Node
	// generated is set for steps expanded from a template.
	generated bool
}

// template is one entry of the top-level templates map (spec §3.6).
type template struct {
	name   string
	params []templateParam
	steps  []pair
}

type templateParam struct {
	name       string
	required   bool
	hasDefault bool
	def        *yaml.Node
}

// templates decodes the templates map.
func (l *loader) templates() map[string]*template {
	out := map[string]*template{}
	p, ok := l.top["templates"]
	if !ok || isNull(p.Value) {
		return out
	}
	if !isMap(p.Value) {
		l.errf("'templates' must be an object mapping template names to {params?, steps}%s", lineOf(p.Key))
		return out
	}
	for _, e := range pairs(p.Value) {
		t := &template{name: e.Key.Value}
		out[t.name] = t
		if !isMap(e.Value) {
			l.errf("Template '%s': must be an object with 'steps' and optional 'params'%s", t.name, lineOf(e.Key))
			continue
		}
		hasSteps := false
		for _, f := range pairs(e.Value) {
			switch f.Key.Value {
			case "steps":
				hasSteps = true
				if !isMap(f.Value) {
					l.errf("Template '%s': 'steps' must be a non-null object%s", t.name, lineOf(f.Key))
					continue
				}
				t.steps = pairs(f.Value)
			case "params":
				if isNull(f.Value) {
					continue
				}
				if !isMap(f.Value) {
					l.errf("Template '%s': 'params' must be an object mapping blank names to {required: true} or {default: <value>}%s", t.name, lineOf(f.Key))
					continue
				}
				for _, b := range pairs(f.Value) {
					tp := templateParam{name: b.Key.Value}
					if !isNull(b.Value) && !isMap(b.Value) {
						l.errf("Template '%s': param '%s' must be {required: true}, {default: <value>} or {}%s", t.name, tp.name, lineOf(b.Key))
					}
					for _, o := range pairs(b.Value) {
						switch o.Key.Value {
						case "required":
							tp.required, _ = boolean(o.Value)
						case "default":
							tp.hasDefault, tp.def = true, o.Value
						case "description":
						default:
							l.errf("Template '%s': param '%s' has unknown key '%s' — a param accepts 'required' or 'default'%s", t.name, tp.name, o.Key.Value, lineOf(o.Key))
						}
					}
					t.params = append(t.params, tp)
				}
			case "description":
			default:
				l.errf("Template '%s': unknown key '%s' — a template has 'params' and 'steps'%s", t.name, f.Key.Value, lineOf(f.Key))
			}
		}
		if !hasSteps {
			l.errf("Template '%s': missing required field 'steps'%s", t.name, lineOf(e.Key))
		}
	}
	return out
}

// expandSteps lists the steps in file order, replacing each use_template
// entry by the template's steps (spec §3.6). A hand-written step wins over a
// generated step of the same name.
func (l *loader) expandSteps(templates map[string]*template) {
	p, ok := l.top["steps"]
	if !ok {
		l.errf("Missing required field: 'steps'")
		return
	}
	if !isMap(p.Value) {
		l.errf("'steps' must be a non-null object")
		return
	}
	entries := pairs(p.Value)
	hand := map[string]bool{}
	for _, e := range entries {
		if !usesTemplate(e.Value) {
			hand[e.Key.Value] = true
		}
	}
	for _, e := range entries {
		if !usesTemplate(e.Value) {
			l.addStep(&stepSrc{name: e.Key.Value, key: e.Key, node: e.Value})
			continue
		}
		for _, g := range l.expand(e, templates) {
			if hand[g.name] || l.names[g.name] {
				continue // the hand-written (or first) step wins, silently
			}
			l.addStep(g)
		}
	}
}

func (l *loader) addStep(s *stepSrc) {
	l.names[s.name] = true
	l.steps = append(l.steps, s)
	l.def.StepOrder = append(l.def.StepOrder, s.name)
}

func usesTemplate(n *yaml.Node) bool {
	for _, p := range pairs(n) {
		if p.Key.Value == "use_template" {
			return true
		}
	}
	return false
}

var placeholderRE = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)

// expand instantiates one use_template entry.
func (l *loader) expand(e pair, templates map[string]*template) []*stepSrc {
	entry := e.Key.Value
	at := fmt.Sprintf(" (step at line %d)", e.Key.Line)
	var tplName, prefix string
	var params map[string]*yaml.Node
	var hasPrefix bool
	for _, f := range pairs(e.Value) {
		switch f.Key.Value {
		case "use_template":
			tplName = scalarText(f.Value)
		case "prefix":
			prefix, hasPrefix = stringValue(f.Value)
		case "params":
			params = map[string]*yaml.Node{}
			for _, b := range pairs(f.Value) {
				params[b.Key.Value] = b.Value
			}
		}
		// Any other key on a using entry is ignored (spec §3.6).
	}
	t, ok := templates[tplName]
	if !ok {
		l.errf("Step '%s': use_template references unknown template '%s'%s", entry, tplName, at)
		return nil
	}
	if !hasPrefix || prefix == "" {
		l.errf("Step '%s': use_template requires a non-empty 'prefix'%s", entry, at)
		return nil
	}
	values := map[string]string{"prefix": prefix}
	missing := false
	for _, tp := range t.params {
		if tp.name == "prefix" {
			continue
		}
		switch v, ok := params[tp.name]; {
		case ok:
			values[tp.name] = blankText(v)
		case tp.hasDefault:
			values[tp.name] = blankText(tp.def)
		case tp.required:
			l.errf("Step '%s': template '%s' requires param '%s'%s", entry, t.name, tp.name, at)
			missing = true
		default:
			values[tp.name] = "" // an unset optional blank renders as empty text
		}
	}
	if missing {
		return nil
	}
	subst := func(s string) string {
		return placeholderRE.ReplaceAllStringFunc(s, func(m string) string {
			name := placeholderRE.FindStringSubmatch(m)[1]
			if v, ok := values[name]; ok {
				return v
			}
			return m // run-time expressions stay for run-time rendering
		})
	}
	out := make([]*stepSrc, 0, len(t.steps))
	budget := maxNodes
	for _, ts := range t.steps {
		out = append(out, &stepSrc{
			name:      prefix + "_" + ts.Key.Value,
			key:       ts.Key,
			node:      cloneSubst(ts.Value, subst, 0, &budget),
			generated: true,
		})
	}
	return out
}

// blankText renders a blank's value as text for substitution.
func blankText(n *yaml.Node) string {
	n = deref(n)
	if n == nil || isNull(n) {
		return ""
	}
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	v, _ := toJSON(n)
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// cloneSubst deep-copies a node, replacing placeholders in every string
// value (map keys are kept as written).
func cloneSubst(n *yaml.Node, subst func(string) string, depth int, budget *int) *yaml.Node {
	n = deref(n)
	if n == nil {
		return nil
	}
	*budget--
	if depth > maxDepth || *budget < 0 {
		// Aliases can make a small file expand enormously; stop copying.
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: n.Line, Column: n.Column}
	}
	c := *n
	c.Content = nil
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!str" {
			c.Value = subst(n.Value)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := deref(n.Content[i])
			if k == nil {
				continue
			}
			kc := *k
			kc.Content = nil
			c.Content = append(c.Content, &kc, cloneSubst(n.Content[i+1], subst, depth+1, budget))
		}
	default:
		for _, e := range n.Content {
			c.Content = append(c.Content, cloneSubst(e, subst, depth+1, budget))
		}
	}
	return &c
}
