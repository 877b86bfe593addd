package workflow

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/realm-go/realm/pkg/trigger"
)

// LoadOptions tunes Load.
type LoadOptions struct {
	// Path is the workflow file's path, used in messages and --json output.
	Path string
	// Files holds the files the loader may read beside the workflow file
	// (agent profiles, schema.json), keyed by slash-separated path relative
	// to the workflow file's folder ("profiles/reviewer.md"). When nil, the
	// loader does not resolve agent profiles (validate without a project);
	// when non-nil, a named profile missing from it refuses the workflow.
	Files map[string][]byte
	// FileErrors are the workflow_context files the reader could not read,
	// keyed like Files, with its error; such an entry is registered as
	// {"content": "", "error": …} (spec §3.8).
	FileErrors map[string]string
	// Strict turns any warning into a refusal (--strict).
	Strict bool
}

// topLevelKeys are the 15 top-level fields (spec §3), in the spec's order.
var topLevelKeys = []string{
	"id", "name", "description", "version", "params_schema", "protocol", "services",
	"mcp_servers", "templates", "steps", "profiles_dir", "extensions",
	"workflow_context", "context_wrapper", "trigger",
}

// realmWrittenKeys appear in the registered copy only; a file may not carry
// them (they are treated exactly like unknown keys).
var realmWrittenKeys = map[string]bool{
	"source_dir": true, "trust_root": true, "resolved_profiles": true, "resolved_context": true,
	"schema_version": true, "origin": true, "model": true, "agent": true,
}

// reservedStepNames are path roots of the condition language (spec §4.1).
var reservedStepNames = []string{"run", "context", "$settlement"}

// loader carries one Load call's state.
type loader struct {
	opts LoadOptions
	rep  *Report
	def  *Definition
	// id is the workflow id as far as known, for messages.
	id string
	// top holds the top-level entries by key.
	top map[string]pair
	// steps are the step entries after template expansion, in file order.
	steps []*stepSrc
	// names is the set of step names after expansion.
	names map[string]bool
	// mcpIDs are the declared MCP server ids.
	mcpIDs map[string]bool
	// checks are the per-step check states, by step name.
	checks map[string]*stepCheck
}

// Load parses and checks a workflow file. It returns the Definition (the
// registered copy, minus the realm-written fields the caller knows: source
// dir, origin…) only when the report is valid; every problem found is in
// the report, positioned by line. Load never panics.
func Load(src []byte, opts LoadOptions) (def *Definition, rep *Report) {
	rep = &Report{Path: opts.Path, Strict: opts.Strict}
	defer func() {
		if r := recover(); r != nil {
			// A bug in the loader must not take a service down with it.
			def = nil
			rep.Valid = false
			rep.Errors = append(rep.Errors, fmt.Sprintf("internal loader error: %v", r))
		}
	}()
	root, perr := parseYAML(src)
	if perr != nil {
		rep.ParseError = perr
		return nil, rep
	}
	l := &loader{
		opts:   opts,
		rep:    rep,
		def:    &Definition{SchemaVersion: SchemaVersion, Steps: map[string]*Step{}},
		top:    map[string]pair{},
		names:  map[string]bool{},
		mcpIDs: map[string]bool{},
	}
	l.run(root)

	rep.StepCount = len(l.def.Steps)
	invalid := len(rep.Errors) > 0 || len(rep.escalated()) > 0
	if !invalid && opts.Strict && rep.Warnings() > 0 {
		rep.StrictFailed = true
		invalid = true
	}
	rep.Valid = !invalid
	if invalid {
		return nil, rep
	}
	return l.def, rep
}

// errf records a hard error (message without the "Invalid workflow: " prefix).
func (l *loader) errf(format string, args ...any) {
	l.rep.Errors = append(l.rep.Errors, fmt.Sprintf(format, args...))
}

// warn records a diagnostic, positioned at key when given.
func (l *loader) warn(d Diagnostic, key *yaml.Node) {
	if d.Severity == "" {
		d.Severity = SeverityWarning
	}
	if key != nil && key.Line > 0 {
		d.Line, d.Column = key.Line, key.Column
		d.EndLine, d.EndColumn = key.Line, key.Column+len([]rune(key.Value))
	}
	l.rep.Diagnostics = append(l.rep.Diagnostics, d)
}

// lineOf renders the `(line N)` suffix for a key node, with its leading space.
func lineOf(n *yaml.Node) string {
	if n == nil || n.Line <= 0 {
		return ""
	}
	return fmt.Sprintf(" (line %d)", n.Line)
}

// jsonOf converts a node to a JSON value, refusing what JSON cannot hold.
func (l *loader) jsonOf(n *yaml.Node, where string) any {
	v, bad := toJSON(n)
	if bad != nil {
		l.errf("%s holds '%s', which is not a JSON value (numbers must be finite; nesting is limited to %d levels)%s", where, scalarText(bad), maxDepth, lineOf(bad))
	}
	return v
}

func (l *loader) run(root *yaml.Node) {
	root = deref(root)
	if root == nil || root.Kind != yaml.MappingNode {
		found := "an empty file"
		if root != nil {
			found = "a YAML " + kindName(root)
		}
		l.errf("the workflow file must be a map of workflow fields (id, name, version, steps, …); found %s", found)
		return
	}
	for _, p := range pairs(root) {
		if p.Key.Value == "id" {
			if s, ok := stringValue(p.Value); ok {
				l.id = s
			}
		}
	}
	l.topLevelKeys(root)
	l.identity()
	l.protocol()
	l.services()
	l.mcpServers()
	l.profilesDir()
	l.extensions()
	templates := l.templates()
	l.expandSteps(templates)
	for _, s := range l.steps {
		l.checkStep(s)
	}
	l.checkGraph()
	l.params()
	for _, s := range l.steps {
		l.stepSchemas(s)
	}
	l.workflowContext()
	l.contextWrapper()
	l.trigger()
	l.profiles()
	l.advisories()
}

// topLevelKeys sorts the top-level entries into known, extension and
// unknown keys (spec §2).
func (l *loader) topLevelKeys(root *yaml.Node) {
	known := map[string]bool{}
	for _, k := range topLevelKeys {
		known[k] = true
	}
	for _, p := range pairs(root) {
		k := p.Key.Value
		switch {
		case known[k]:
			l.top[k] = p
		case strings.HasPrefix(k, "x-realm-"):
			l.errf("top-level key '%s' is reserved — names beginning 'x-realm-' belong to realm; rename it (any other 'x-' name is yours)%s", k, lineOf(p.Key))
		case strings.HasPrefix(k, "x-"):
			if l.def.ExtensionKeys == nil {
				l.def.ExtensionKeys = map[string]any{}
			}
			l.def.ExtensionKeys[k] = l.jsonOf(p.Value, fmt.Sprintf("'%s'", k))
			l.rep.ExtensionKeys = append(l.rep.ExtensionKeys, k)
		default:
			var dym string
			if !realmWrittenKeys[k] {
				dym = suggest(k, topLevelKeys)
			}
			tail := "ignored (not a recognized workflow field)."
			if dym != "" {
				tail = fmt.Sprintf("ignored (did you mean '%s'?)", dym)
			}
			l.warn(Diagnostic{
				Code:       "UNKNOWN_WORKFLOW_KEY",
				Severity:   SeverityError,
				Message:    fmt.Sprintf("workflow '%s': unknown key '%s'%s — %s", l.id, k, lineOf(p.Key), tail),
				Scope:      "workflow",
				Key:        k,
				DidYouMean: dym,
			}, p.Key)
		}
	}
}

// identity checks id, name, description, version (spec §3.1).
func (l *loader) identity() {
	for _, f := range []string{"id", "name"} {
		p, ok := l.top[f]
		if !ok {
			l.errf("Missing required field: '%s'", f)
			continue
		}
		s, ok := stringValue(p.Value)
		if !ok || s == "" {
			l.errf("'%s' must be a non-empty string%s", f, lineOf(p.Key))
			continue
		}
		if f == "id" {
			// An id names keys in the store (the idempotency-key pointer is
			// "<id>\x1f<key>"): a control character would make two
			// different ids and keys read alike.
			if strings.IndexFunc(s, unicode.IsControl) >= 0 {
				l.errf("'id' must not contain control characters%s", lineOf(p.Key))
				continue
			}
			l.def.ID = s
			l.rep.WorkflowID = s
		} else {
			l.def.Name = s
		}
	}
	if p, ok := l.top["description"]; ok && !isNull(p.Value) {
		if s, ok := stringValue(p.Value); ok {
			l.def.Description = s
			l.rep.Description = s
		} else {
			l.errf("'description' must be a string%s", lineOf(p.Key))
		}
	}
	p, ok := l.top["version"]
	if !ok {
		l.errf("Missing required field: 'version'")
		return
	}
	v, isNum := number(p.Value)
	if !isNum || v != v || v > 1e308 || v < -1e308 {
		l.errf("'version' must be a number%s", lineOf(p.Key))
		return
	}
	l.def.Version = v
	l.rep.Version, l.rep.HasVersion = v, true
}

// params decodes params_schema; it is compiled with the step schemas.
func (l *loader) params() {
	if p, ok := l.top["params_schema"]; ok {
		l.def.ParamsSchema = l.compileSchema("", "params_schema", p)
	}
}

func (l *loader) protocol() {
	p, ok := l.top["protocol"]
	if !ok || isNull(p.Value) {
		return
	}
	if !isMap(p.Value) {
		l.errf("'protocol' must be an object with 'quick_start' and/or 'rules'%s", lineOf(p.Key))
		return
	}
	proto := &Protocol{}
	for _, e := range pairs(p.Value) {
		switch e.Key.Value {
		case "quick_start":
			s, ok := stringValue(e.Value)
			if !ok && !isNull(e.Value) {
				l.errf("'protocol.quick_start' must be a string%s", lineOf(e.Key))
			}
			proto.QuickStart = s
		case "rules":
			rules, ok := stringList(e.Value)
			if !ok {
				l.errf("'protocol.rules' must be a list of strings%s", lineOf(e.Key))
			}
			proto.Rules = rules
		default:
			l.errf("'protocol': unknown key '%s' — 'protocol' accepts 'quick_start' and 'rules'%s", e.Key.Value, lineOf(e.Key))
		}
	}
	l.def.Protocol = proto
}

// services checks the services map (spec §3.4). Its errors carry no line:
// they are workflow-scoped.
func (l *loader) services() {
	p, ok := l.top["services"]
	if !ok || isNull(p.Value) {
		return
	}
	if !isMap(p.Value) {
		l.errf("'services' must be an object mapping service names to {adapter, trust?, rate_limit?}")
		return
	}
	l.def.Services = map[string]*Service{}
	for _, e := range pairs(p.Value) {
		name := e.Key.Value
		svc := &Service{}
		l.def.Services[name] = svc
		if !isMap(e.Value) {
			l.errf("Service '%s': must be an object with 'adapter' (found %s)", name, kindName(e.Value))
			continue
		}
		hasAdapter := false
		for _, f := range pairs(e.Value) {
			switch f.Key.Value {
			case "adapter":
				hasAdapter = true
				s, ok := stringValue(f.Value)
				if !ok || s == "" {
					l.errf("Service '%s': 'adapter' must be a non-empty string", name)
				}
				svc.Adapter = s
			case "trust":
				s, _ := stringValue(f.Value)
				switch s {
				case "engine_delivered", "engine_managed", "agent_provided":
					svc.Trust = s
				default:
					l.errf("Service '%s': invalid trust value '%s'; must be 'engine_delivered', 'engine_managed', or 'agent_provided'", name, scalarText(f.Value))
				}
			case "rate_limit":
				if isNull(f.Value) {
					continue
				}
				if !isMap(f.Value) {
					l.errf("Service '%s': 'rate_limit' must be an object", name)
					continue
				}
				m, _ := l.jsonOf(f.Value, fmt.Sprintf("Service '%s': 'rate_limit'", name)).(map[string]any)
				if len(m) > 0 {
					svc.RateLimit = m
				}
			default:
				l.errf("Service '%s': unknown key '%s'", name, f.Key.Value)
			}
		}
		if !hasAdapter {
			l.errf("Service '%s': missing required field 'adapter'", name)
		}
	}
	if len(l.def.Services) == 0 {
		l.def.Services = nil
	}
}

// mcpServers checks the mcp_servers list (spec §3.5): stdio servers
// ({id, transport: stdio, command, args?, env?}) and, beyond the original,
// streamable-HTTP ones ({id, transport: http, url, headers?}).
func (l *loader) mcpServers() {
	p, ok := l.top["mcp_servers"]
	if !ok || isNull(p.Value) {
		return
	}
	if !isSeq(p.Value) {
		l.errf("'mcp_servers' must be a list of servers ({id, transport: stdio, command, args?, env?} or {id, transport: http, url, headers?})%s", lineOf(p.Key))
		return
	}
	for i, n := range deref(p.Value).Content {
		where := fmt.Sprintf("mcp_servers[%d]", i)
		n = deref(n)
		if !isMap(n) {
			l.errf("%s: must be an object with 'id', 'transport' and 'command' (stdio) or 'url' (http)%s", where, lineOf(n))
			continue
		}
		srv := MCPServer{}
		have := map[string]*yaml.Node{}
		for _, f := range pairs(n) {
			k := f.Key.Value
			have[k] = f.Key
			switch k {
			case "id", "transport", "command", "url":
				s, ok := stringValue(f.Value)
				if !ok || s == "" {
					l.errf("%s: '%s' must be a non-empty string%s", where, k, lineOf(f.Key))
				}
				switch k {
				case "id":
					srv.ID = s
				case "transport":
					if ok && s != "stdio" && s != "http" {
						l.errf("%s: 'transport' must be 'stdio' or 'http' (found: '%s')%s", where, s, lineOf(f.Key))
					}
					srv.Transport = s
				case "command":
					srv.Command = s
				case "url":
					if u, err := url.Parse(s); ok && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
						l.errf("%s: 'url' must be an http:// or https:// address (found: '%s')%s", where, s, lineOf(f.Key))
					}
					srv.URL = s
				}
			case "args":
				args, ok := stringList(f.Value)
				if !ok {
					l.errf("%s: 'args' must be a list of strings%s", where, lineOf(f.Key))
				}
				srv.Args = args
			case "env", "headers":
				m, ok := stringMap(f.Value)
				if !ok {
					l.errf("%s: '%s' must be a map of strings%s", where, k, lineOf(f.Key))
				}
				if k == "env" {
					srv.Env = m
				} else {
					srv.Headers = m
				}
			default:
				l.errf("%s: unknown key '%s'%s", where, k, lineOf(f.Key))
			}
		}
		need, refused := []string{"id", "transport", "command"}, []string{"url", "headers"}
		switch srv.Transport {
		case "http":
			need, refused = []string{"id", "transport", "url"}, []string{"command", "args", "env"}
		case "stdio", "":
		default:
			need = []string{"id"} // the transport's own error says enough
		}
		for _, k := range need {
			if have[k] == nil {
				l.errf("%s: missing required field '%s'%s", where, k, lineOf(n))
			}
		}
		if srv.Transport == "stdio" || srv.Transport == "http" {
			for _, k := range refused {
				if key := have[k]; key != nil {
					l.errf("%s: '%s' is not valid with transport '%s'%s", where, k, srv.Transport, lineOf(key))
				}
			}
		}
		if srv.ID != "" {
			if l.mcpIDs[srv.ID] {
				l.errf("%s: duplicate server id '%s'%s", where, srv.ID, lineOf(n))
			}
			l.mcpIDs[srv.ID] = true
		}
		l.def.MCPServers = append(l.def.MCPServers, srv)
	}
}

func (l *loader) profilesDir() {
	p, ok := l.top["profiles_dir"]
	if !ok || isNull(p.Value) {
		return
	}
	s, ok := stringValue(p.Value)
	if !ok || s == "" {
		l.errf("'profiles_dir' must be a non-empty relative path%s", lineOf(p.Key))
		return
	}
	l.def.ProfilesDir = s
}

// extensions checks the extensions declaration (spec §14); the modules
// themselves are loaded by the caller.
func (l *loader) extensions() {
	p, ok := l.top["extensions"]
	if !ok {
		return
	}
	const shape = "'extensions' must be a non-empty module path or a non-empty array of module paths (e.g. extensions: ./dist/registry.js)"
	var list []string
	if s, ok := stringValue(p.Value); ok && strings.TrimSpace(s) != "" {
		list = []string{s}
	} else if l2, ok := stringList(p.Value); ok && len(l2) > 0 {
		for _, e := range l2 {
			if strings.TrimSpace(e) == "" {
				l.errf("%s%s", shape, lineOf(p.Key))
				return
			}
		}
		list = l2
	} else {
		l.errf("%s%s", shape, lineOf(p.Key))
		return
	}
	for _, e := range list {
		if path.IsAbs(e) || (len(e) > 2 && e[1] == ':' && (e[2] == '\\' || e[2] == '/')) {
			l.errf("'extensions' entry '%s' is an absolute path — extension modules must be declared RELATIVE to the workflow directory (e.g. ../dist/registry.js)", e)
		}
	}
	l.def.Extensions = list
}

var contextNameRE = regexp.MustCompile(`^[A-Za-z0-9_.]+$`)

// workflowContext checks workflow_context (spec §3.8).
func (l *loader) workflowContext() {
	p, ok := l.top["workflow_context"]
	entries := map[string]ContextEntry{}
	if ok && !isNull(p.Value) {
		if !isMap(p.Value) {
			l.errf("'workflow_context' must be an object mapping entry names to {source: {path}, description?}%s", lineOf(p.Key))
		}
		for _, e := range pairs(p.Value) {
			name := e.Key.Value
			if !contextNameRE.MatchString(name) {
				l.errf("workflow_context entry '%s' must match [\\w.]+ (underscores and dots only — no hyphens)%s", name, lineOf(e.Key))
				continue
			}
			if strings.HasSuffix(name, ".raw") {
				l.errf("workflow_context entry '%s' must not end with '.raw'%s", name, lineOf(e.Key))
				continue
			}
			entry := ContextEntry{}
			var src *yaml.Node
			for _, f := range pairs(e.Value) {
				switch f.Key.Value {
				case "source":
					src = f.Value
				case "description":
					s, ok := stringValue(f.Value)
					if !ok && !isNull(f.Value) {
						l.errf("workflow_context.%s.description must be a string%s", name, lineOf(f.Key))
					}
					entry.Description = s
				default:
					l.errf("workflow_context.%s: unknown key '%s' — an entry has 'source' and 'description'%s", name, f.Key.Value, lineOf(f.Key))
				}
			}
			for _, f := range pairs(src) {
				switch f.Key.Value {
				case "path":
					s, _ := stringValue(f.Value)
					entry.Path = s
				default:
					l.errf("workflow_context.%s.source: unknown key '%s' — 'source' has 'path'%s", name, f.Key.Value, lineOf(f.Key))
				}
			}
			if entry.Path == "" {
				l.errf("workflow_context.%s.source.path is required%s", name, lineOf(e.Key))
				continue
			}
			entries[name] = entry
		}
	}
	if _, declared := entries["schema"]; !declared {
		if _, ok := l.opts.Files["schema.json"]; ok {
			entries["schema"] = ContextEntry{Path: "schema.json"}
		}
	}
	if len(entries) > 0 {
		l.def.WorkflowContext = entries
		l.resolveContext(entries)
	}
}

// resolveContext keeps each entry's text from opts.Files (or the reader's
// error) in the registered copy. Without Files (a check of a registered
// copy, a plan) nothing was read, and nothing is kept.
func (l *loader) resolveContext(entries map[string]ContextEntry) {
	if l.opts.Files == nil {
		return
	}
	l.def.ResolvedContext = make(map[string]ContextText, len(entries))
	for name, e := range entries {
		rel := path.Clean(strings.ReplaceAll(e.Path, "\\", "/"))
		ct := ContextText{SourcePath: e.Path}
		switch b, ok := l.opts.Files[rel]; {
		case ok:
			ct.Content = string(b)
		case l.opts.FileErrors[rel] != "":
			ct.Error = l.opts.FileErrors[rel]
		default:
			ct.Error = "open " + rel + ": the file was not sent with the workflow"
		}
		l.def.ResolvedContext[name] = ct
	}
}

func (l *loader) contextWrapper() {
	p, ok := l.top["context_wrapper"]
	if !ok {
		return
	}
	s, _ := stringValue(p.Value)
	switch s {
	case "xml", "brackets", "none":
		l.def.ContextWrapper = s
	default:
		l.errf("'context_wrapper' must be 'xml', 'brackets', or 'none' (found: '%s')%s", scalarText(p.Value), lineOf(p.Key))
	}
}

// trigger checks the webhook block: its shape, its keys and the required
// ones here, then every rule of spec §16 / listen §4.1 with the parser
// listen-svc serves it with (pkg/trigger), so validate and register refuse
// what the listener would, at the line of the field at fault.
func (l *loader) trigger() {
	p, ok := l.top["trigger"]
	if !ok || isNull(p.Value) {
		return
	}
	if !isMap(p.Value) {
		l.errf("trigger must be object%s", lineOf(p.Key))
		return
	}
	known := map[string]bool{"type": true, "path": true, "auth": true, "filter": true, "dedup": true, "params_map": true, "rate_limit": true}
	have := map[string]bool{}
	for _, f := range pairs(p.Value) {
		have[f.Key.Value] = true
		if !known[f.Key.Value] {
			l.errf("trigger: unknown property '%s'%s", f.Key.Value, lineOf(f.Key))
		}
		if f.Key.Value == "type" {
			if s, _ := stringValue(f.Value); s != "webhook" {
				l.errf("trigger/type must be equal to constant%s", lineOf(f.Key))
			}
		}
	}
	for _, k := range []string{"type", "auth"} {
		if !have[k] {
			l.errf("trigger: missing required property '%s'%s", k, lineOf(p.Key))
		}
	}
	before := len(l.rep.Errors)
	m, _ := l.jsonOf(p.Value, "'trigger'").(map[string]any)
	l.def.Trigger = m
	if len(l.rep.Errors) > before || m == nil {
		return
	}
	if _, err := trigger.Parse(m); err != nil {
		// In the words of listen §4.1 exactly, then the line of the field
		// at fault (the original's schema validator gives none).
		var te *trigger.Error
		at := p.Key
		if errors.As(err, &te) && len(te.Path) > 1 {
			if n := nodeAt(p.Value, te.Path[1:]); n != nil && n != deref(p.Value) {
				at = n
			}
		}
		l.errf("%s%s", err.Error(), lineOf(at))
	}
}

// profiles resolves each agent_profile from opts.Files (spec §3.7).
func (l *loader) profiles() {
	if l.opts.Files == nil {
		return
	}
	dir := l.def.ProfilesDir
	if dir == "" {
		dir = "profiles"
	}
	for _, s := range l.steps {
		st := l.def.Steps[s.name]
		if st == nil || st.AgentProfile == "" {
			continue
		}
		rel := path.Clean(path.Join(dir, st.AgentProfile+".md"))
		text, ok := l.opts.Files[rel]
		if !ok {
			searched := rel
			if l.opts.Path != "" {
				searched = path.Join(path.Dir(strings.ReplaceAll(l.opts.Path, "\\", "/")), rel)
			}
			l.errf("Step '%s': agent_profile '%s' not found. Searched: %s", s.name, st.AgentProfile, searched)
			continue
		}
		if l.def.ResolvedProfiles == nil {
			l.def.ResolvedProfiles = map[string]string{}
		}
		l.def.ResolvedProfiles[st.AgentProfile] = string(text)
	}
}

var contextRefRE = regexp.MustCompile(`\{\{\s*workflow\.context\.([A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*?)(?:\.raw)?\s*(?:\||\}\})`)

// advisories adds workflow-wide warnings once every step is known.
func (l *loader) advisories() {
	// IDEMPOTENT_INERT_IN_FINALIZER: one advisory naming every such step.
	if l.def.HasFinalizers() {
		var idem []string
		for _, s := range l.def.Ordered() {
			if s.Idempotent {
				idem = append(idem, s.Name)
			}
		}
		if len(idem) > 0 {
			l.warn(Diagnostic{
				Code:    "IDEMPOTENT_INERT_IN_FINALIZER",
				Message: fmt.Sprintf("workflow '%s': 'idempotent: true' on %s does not reach this workflow's finalizers — a finalizer runs once after the run is sealed and is never retried or reclaimed, so nothing there relies on the attestation.", l.id, quoteList(idem)),
				Scope:   "workflow",
				Key:     "idempotent",
			}, nil)
		}
	}
	// Context referenced by most agent prompts (spec §3.8).
	var agents int
	refs := map[string]int{}
	for _, s := range l.def.Ordered() {
		if s.Execution != KindAgent {
			continue
		}
		agents++
		seen := map[string]bool{}
		for _, m := range contextRefRE.FindAllStringSubmatch(s.Prompt, -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				refs[m[1]]++
			}
		}
	}
	names := make([]string, 0, len(refs))
	for n := range refs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if agents >= 2 && refs[n]*2 > agents {
			l.warn(Diagnostic{
				Code:    "WORKFLOW_CONTEXT_BROAD",
				Message: fmt.Sprintf("workflow.context.%s is referenced in %d of %d agent step prompts. If this context applies universally, that is intentional — otherwise consider whether all steps truly need it.", n, refs[n], agents),
				Scope:   "workflow",
				Key:     n,
			}, nil)
		}
	}
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	return strings.Join(q, ", ")
}

// stringList decodes a list of strings.
func stringList(n *yaml.Node) ([]string, bool) {
	n = deref(n)
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil, false
	}
	out := make([]string, 0, len(n.Content))
	for _, e := range n.Content {
		s, ok := stringValue(e)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// stringMap decodes a map of strings.
func stringMap(n *yaml.Node) (map[string]string, bool) {
	if !isMap(n) {
		return nil, false
	}
	out := map[string]string{}
	for _, p := range pairs(n) {
		s, ok := stringValue(p.Value)
		if !ok {
			return nil, false
		}
		out[p.Key.Value] = s
	}
	return out, true
}
