// Package golden checks that the MCP front door reproduces every JSON reply
// the seeds show ("MCP tools", and get_run_state's examples in "Run state
// and health findings") against a real engine. The goldens under testdata
// are the seeds' examples copied verbatim; this file holds the comparison.
//
// The comparison rule, field by field (Compare):
//
//   - Every field in the golden must be in the reply, with an equal value
//     after masking. Arrays must have the same length and order.
//   - A field the golden leaves out must be absent from the reply, or
//     empty: null, "", [] or {}. The seed says its examples "leave out
//     fields that are empty". false and 0 are NOT empty: the seed shows
//     them where they belong (deduped: false, answer_recorded: false,
//     terminal_state: false, run_version: 0), so a false or 0 the golden
//     does not show is a field that should not be there. One exception,
//     decided per field: the trace counts adopted_own, adopted_anonymous
//     and preserved_foreign ("From execute_step on an agent step", seed
//     field table) are empty at 0 — both of the seed's examples of an
//     agent step's reply (the guard abort on assess, the gate on draft)
//     leave them out, and a count of 0 says nothing was attached.
//   - The string "…" means "present, not compared"; ["…"] means a
//     non-empty list, not compared (the seed shows "a long next_actions
//     list as …"). An object with the key "…" (next_actions' input_schema)
//     may hold more keys than the golden names.
//   - A fragment golden (Options.Fragment: the seed shows some fields of a
//     reply) compares the fields it names and says nothing of the others.
//   - Options.Elided names fields the seed's own text says its example left
//     out although they are there (gate_claim on submit_human_response's
//     examples; run_id and run_version where the seed's table says "always
//     present"): each must be present and non-empty, its value not compared.
//   - Options.Absent names fields the seed says are gone (get_run_state's
//     pending_gate once the run completed): each must be absent or empty.
//
// Masking, applied to golden and reply alike before strings are compared:
// run IDs, gate IDs and claim tokens (UUIDs, and the seed's placeholder
// "<run>") become <id-N>, numbered by first appearance, so one ID is one
// placeholder and a reply that names the wrong run fails; workflow IDs that
// create_workflow mints (<slug>-<16 hex>) become <slug>-<wf-N> the same way;
// ISO times become <time>; evidence hashes (sha256, 64 hex) become <hash>.
// Both sides are walked in the golden's order (sorted keys), so the
// numbering of both follows the same fields. run_version is compared as
// "present, a whole number ≥ 0" (its values are checked by their own
// tests); overdue_ms as "present, > 0".
package golden

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Ellipsis is the seed's "present, not compared".
const Ellipsis = "…"

// Options qualify one comparison.
type Options struct {
	// Fragment: the golden names some of the reply's top-level fields.
	Fragment bool
	// Elided are dotted paths ("run_id", "gate.claim_token") the seed left
	// out of its example although they are there: present, not compared.
	Elided []string
	// Absent are dotted paths that must be absent or empty.
	Absent []string
}

// Diff is one difference between a golden and a reply.
type Diff struct {
	Path string // "context_hint", "guards[0].outcome", …
	Want string // the golden's value, masked ("(absent)" when none)
	Got  string // the reply's value, masked ("(absent)" when none)
	Why  string
}

func (d Diff) String() string {
	return fmt.Sprintf("%s: %s\n    want: %s\n    got:  %s", d.Path, d.Why, d.Want, d.Got)
}

// Report renders diffs one per paragraph, for t.Errorf.
func Report(name string, diffs []Diff) string {
	var b strings.Builder
	fmt.Fprintf(&b, "golden %s: %d difference(s)", name, len(diffs))
	for _, d := range diffs {
		b.WriteString("\n  ")
		b.WriteString(d.String())
	}
	return b.String()
}

// Load reads testdata/<name>.json as a JSON value.
func Load(dir, name string) (any, error) {
	raw, err := os.ReadFile(dir + "/" + name + ".json")
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("golden %s: %w", name, err)
	}
	return v, nil
}

// Compare compares a reply with its golden by the rules above.
func Compare(golden, actual any, o Options) []Diff {
	c := &comparer{want: newMasker(), got: newMasker(), o: o}
	c.value("", golden, actual, true)
	for _, p := range o.Elided {
		v, ok := lookup(actual, p)
		if !ok || isEmpty(v) {
			c.add(p, "(present: the seed's text says it is there)", show(v, ok), "missing")
		}
	}
	for _, p := range o.Absent {
		if v, ok := lookup(actual, p); ok && !isEmpty(v) {
			c.add(p, "(absent)", c.got.show(v), "should be absent")
		}
	}
	return c.diffs
}

type comparer struct {
	want, got *masker
	o         Options
	diffs     []Diff
}

func (c *comparer) add(path, want, got, why string) {
	c.diffs = append(c.diffs, Diff{Path: path, Want: want, Got: got, Why: why})
}

func (c *comparer) value(path string, g, a any, top bool) {
	switch gv := g.(type) {
	case string:
		if gv == Ellipsis {
			return // present (the caller checked), not compared
		}
		as, ok := a.(string)
		if !ok {
			c.add(path, c.want.show(g), c.got.show(a), "wrong type")
			return
		}
		if w, got := c.want.mask(gv), c.got.mask(as); w != got {
			c.add(path, quote(w), quote(got), "differs")
		}
	case []any:
		av, ok := a.([]any)
		if !ok {
			c.add(path, c.want.show(g), c.got.show(a), "wrong type")
			return
		}
		if len(gv) == 1 && gv[0] == Ellipsis {
			if len(av) == 0 {
				c.add(path, `["…"] (a non-empty list)`, "[]", "empty")
			}
			return
		}
		if len(gv) != len(av) {
			c.add(path, c.want.show(g), c.got.show(a), fmt.Sprintf("%d item(s), want %d", len(av), len(gv)))
			return
		}
		for i := range gv {
			c.value(fmt.Sprintf("%s[%d]", path, i), gv[i], av[i], false)
		}
	case map[string]any:
		av, ok := a.(map[string]any)
		if !ok {
			c.add(path, c.want.show(g), c.got.show(a), "wrong type")
			return
		}
		c.object(path, gv, av, top)
	case float64:
		an, ok := a.(float64)
		if !ok || an != gv {
			c.add(path, c.want.show(g), c.got.show(a), "differs")
		}
	default: // bool, nil
		if g != a {
			c.add(path, c.want.show(g), c.got.show(a), "differs")
		}
	}
}

func (c *comparer) object(path string, g, a map[string]any, top bool) {
	_, open := g[Ellipsis]
	for _, k := range sortedKeys(g) {
		if k == Ellipsis {
			continue
		}
		p := join(path, k)
		av, present := a[k]
		if !present {
			c.add(p, c.want.show(g[k]), "(absent)", "missing")
			continue
		}
		switch k {
		case "run_version":
			if n, ok := av.(float64); !ok || n < 0 || n != math.Trunc(n) {
				c.add(p, "(a whole number ≥ 0, masked)", c.got.show(av), "not a run_version")
			}
			continue
		case "overdue_ms":
			if n, ok := av.(float64); !ok || n <= 0 {
				c.add(p, "(a number > 0, masked)", c.got.show(av), "not an overdue_ms")
			}
			continue
		}
		c.value(p, g[k], av, false)
	}
	if open || (top && c.o.Fragment) {
		return
	}
	for _, k := range sortedKeys(a) {
		if _, named := g[k]; named {
			continue
		}
		p := join(path, k)
		if slices.Contains(c.o.Elided, p) || slices.Contains(c.o.Absent, p) {
			continue // checked by Compare
		}
		if !isEmpty(a[k]) && !(zeroCounts[k] && a[k] == float64(0)) {
			c.add(p, "(absent or empty)", c.got.show(a[k]), "not in the golden")
		}
	}
}

// zeroCounts are the fields that are empty at 0 (see the package comment).
var zeroCounts = map[string]bool{"adopted_own": true, "adopted_anonymous": true, "preserved_foreign": true}

// isEmpty is the seed's "empty": null, "", [] or {} (never false or 0).
func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// lookup finds a dotted path in nested objects.
func lookup(v any, path string) (any, bool) {
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func show(v any, ok bool) string {
	if !ok {
		return "(absent)"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

var (
	uuidRe = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|<run>`)
	hashRe = regexp.MustCompile(`\b(?:sha256:)?[0-9a-f]{64}\b`)
	wfIDRe = regexp.MustCompile(`\b([a-z0-9]+(?:-[a-z0-9]+)*)-[0-9a-f]{16}\b`)
	timeRe = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})`)
)

// masker replaces IDs, times and hashes in one document; the same ID is
// always the same placeholder.
type masker struct {
	ids, wfs map[string]string
}

func newMasker() *masker {
	return &masker{ids: map[string]string{}, wfs: map[string]string{}}
}

func (m *masker) mask(s string) string {
	s = hashRe.ReplaceAllString(s, "<hash>")
	s = uuidRe.ReplaceAllStringFunc(s, func(id string) string {
		if p, ok := m.ids[id]; ok {
			return p
		}
		p := fmt.Sprintf("<id-%d>", len(m.ids)+1)
		m.ids[id] = p
		return p
	})
	s = wfIDRe.ReplaceAllStringFunc(s, func(id string) string {
		if p, ok := m.wfs[id]; ok {
			return p
		}
		slug := wfIDRe.FindStringSubmatch(id)[1]
		p := fmt.Sprintf("%s-<wf-%d>", slug, len(m.wfs)+1)
		m.wfs[id] = p
		return p
	})
	return timeRe.ReplaceAllString(s, "<time>")
}

// show renders a value for a diff, masking its strings (without numbering
// new IDs into the document's sequence: a diff must not shift it).
func (m *masker) show(v any) string {
	c := &masker{ids: cloneMap(m.ids), wfs: cloneMap(m.wfs)}
	b, _ := json.Marshal(c.maskAll(v))
	return string(b)
}

func (m *masker) maskAll(v any) any {
	switch x := v.(type) {
	case string:
		return m.mask(x)
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = m.maskAll(x[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for _, k := range sortedKeys(x) {
			out[k] = m.maskAll(x[k])
		}
		return out
	}
	return v
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
