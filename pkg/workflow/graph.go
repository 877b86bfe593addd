package workflow

import (
	"errors"
	"fmt"
	"strings"

	"github.com/realm-go/realm/pkg/condition"
)

// conditions checks when, preconditions and abort_unless (spec §7.6).
func (c *stepCheck) conditions() {
	st := c.st
	deps := map[string]bool{}
	for _, d := range st.DependsOn {
		deps[d] = true
	}
	depList := "[" + strings.Join(st.DependsOn, ", ") + "]"
	parse := func(field, text string) *condition.Condition {
		cond, err := condition.ParseFor(field, text)
		if err != nil {
			var pe *condition.ParseError
			msg := err.Error()
			if !errors.As(err, &pe) && !strings.HasPrefix(msg, "'") {
				msg = fmt.Sprintf("'%s' %s", field, msg)
			}
			c.errf("%s%s", msg, c.at())
			return nil
		}
		return cond
	}
	oneHop := func(field string, cond *condition.Condition) bool {
		if cond.Root == condition.RootSettlement && !deps[cond.Step] {
			c.errf("'%s' condition \"%s\": '$settlement' paths must reference a direct dependency (one-hop rule) — '%s' is not in its depends_on %s.%s", field, cond.Text, cond.Step, depList, c.at())
			return false
		}
		return true
	}
	if _, ok := c.use["when"]; ok {
		for _, text := range st.When {
			cond := parse("when", text)
			if cond == nil {
				continue
			}
			if cond.Root == condition.RootStep && !deps[cond.Step] {
				c.errf("'when' references step '%s' which is not in its depends_on %s. Add it to depends_on or use 'run.params.*'.%s", cond.Step, depList, c.at())
				continue
			}
			if !oneHop("when", cond) {
				continue
			}
			c.neverTrue(cond)
		}
	}
	if _, ok := c.use["preconditions"]; ok {
		for _, text := range st.Preconditions {
			cond := parse("preconditions", text)
			if cond == nil {
				continue
			}
			if !cond.HasOp {
				c.errf("precondition '%s' must be a comparison (e.g. \"step.field >= 1\").%s", text, c.at())
				continue
			}
			oneHop("preconditions", cond)
		}
	}
	if _, ok := c.use["abort_unless"]; ok {
		for _, text := range st.AbortUnless {
			if cond := parse("abort_unless", text); cond != nil {
				oneHop("abort_unless", cond)
			}
		}
	}
}

// neverTrue refuses `$settlement.<dep>.failed == true` under a rule that
// skips the step as soon as a dependency fails: the trigger rule is checked
// before `when`, so the condition could never hold (spec §6.4, §7.6).
func (c *stepCheck) neverTrue(cond *condition.Condition) {
	if cond.Root != condition.RootSettlement || len(cond.Field) != 1 || cond.Field[0] != "failed" ||
		cond.Op != "==" || cond.Value != true {
		return
	}
	rule := c.st.Rule()
	var which string
	switch rule {
	case RuleAllSuccess:
		which = "the default 'all_success' trigger rule"
	case RuleNoneFailed:
		which = "the 'none_failed' trigger rule"
	default:
		return
	}
	c.errf("'when' condition \"%s\" can never be true — under %s, '%s' can never be in failed_steps when this step is evaluated (the rule skips this step as soon as a dependency fails, before 'when' is read). To run this step when '%s' fails, set trigger_rule to one of: all_done, one_failed, all_failed.%s",
		cond.Text, which, cond.Step, cond.Step, c.at())
}

// checkGraph checks depends_on targets and refuses cycles (spec §6.2).
func (l *loader) checkGraph() {
	for _, s := range l.steps {
		c := l.checks[s.name]
		if c == nil {
			continue
		}
		p, ok := c.use["depends_on"]
		if !ok {
			continue
		}
		items := deref(p.Value)
		for i, d := range c.st.DependsOn {
			at := lineOf(p.Key)
			if items != nil && i < len(items.Content) && items.Content[i] != nil {
				at = lineOf(items.Content[i])
			}
			switch {
			case d == s.name:
				c.errf("depends_on lists the step itself — a step cannot wait for its own settlement%s", at)
			case !l.names[d]:
				msg := fmt.Sprintf("depends_on references unknown step '%s'", d)
				if dym := suggest(d, l.def.StepOrder); dym != "" {
					msg += fmt.Sprintf(" (did you mean '%s'?)", dym)
				}
				c.errf("%s%s", msg, at)
			}
		}
	}
	for _, cycle := range findCycles(l.def) {
		l.errf("dependency cycle: %s", strings.Join(cycle, " -> "))
	}
}

// findCycles returns one cycle per strongly connected component of the
// dependency graph (self-dependencies excluded: they are refused apart),
// each starting and ending at the component's first step in file order.
func findCycles(d *Definition) [][]string {
	edges := func(name string) []string {
		s := d.Steps[name]
		if s == nil {
			return nil
		}
		var out []string
		for _, dep := range s.DependsOn {
			if dep != name && d.Steps[dep] != nil {
				out = append(out, dep)
			}
		}
		return out
	}
	// Tarjan's algorithm, iterative over file order for stable output.
	index := map[string]int{}
	low := map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var sccs [][]string
	next := 0
	var strong func(v string)
	strong = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range edges(v) {
			if _, seen := index[w]; !seen {
				strong(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var comp []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			if len(comp) > 1 {
				sccs = append(sccs, comp)
			}
		}
	}
	for _, name := range d.StepOrder {
		if _, seen := index[name]; !seen {
			strong(name)
		}
	}
	pos := map[string]int{}
	for i, n := range d.StepOrder {
		pos[n] = i
	}
	var out [][]string
	for _, comp := range sccs {
		in := map[string]bool{}
		start := comp[0]
		for _, n := range comp {
			in[n] = true
			if pos[n] < pos[start] {
				start = n
			}
		}
		out = append(out, cyclePath(start, in, edges))
	}
	// Report cycles in the file order of their first step.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && pos[out[j][0]] < pos[out[j-1][0]]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// cyclePath finds a path start -> … -> start inside one component (BFS, so
// the shortest such cycle).
func cyclePath(start string, in map[string]bool, edges func(string) []string) []string {
	prev := map[string]string{}
	queue := []string{start}
	seen := map[string]bool{start: true}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range edges(v) {
			if !in[w] {
				continue
			}
			if w == start {
				path := []string{start}
				for x := v; x != start; x = prev[x] {
					path = append(path, x)
				}
				// path is start, v, …, reversed; rebuild forward order.
				fwd := []string{start}
				for i := len(path) - 1; i >= 1; i-- {
					fwd = append(fwd, path[i])
				}
				return append(fwd, start)
			}
			if !seen[w] {
				seen[w] = true
				prev[w] = v
				queue = append(queue, w)
			}
		}
	}
	return []string{start, start}
}

// Topo returns the steps in a dependency order (dependencies first, ties in
// file order), or an error naming a cycle.
func Topo(d *Definition) ([]string, error) {
	if cycles := findCycles(d); len(cycles) > 0 {
		return nil, fmt.Errorf("dependency cycle: %s", strings.Join(cycles[0], " -> "))
	}
	done := map[string]bool{}
	out := make([]string, 0, len(d.StepOrder))
	for len(out) < len(d.StepOrder) {
		progressed := false
		for _, name := range d.StepOrder {
			if done[name] {
				continue
			}
			ready := true
			var deps []string
			if s := d.Steps[name]; s != nil {
				deps = s.DependsOn
			}
			for _, dep := range deps {
				if dep != name && d.Steps[dep] != nil && !done[dep] {
					ready = false
					break
				}
			}
			if ready {
				done[name] = true
				out = append(out, name)
				progressed = true
			}
		}
		if !progressed {
			return nil, fmt.Errorf("dependency cycle among remaining steps")
		}
	}
	return out, nil
}
