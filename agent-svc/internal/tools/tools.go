// Package tools connects a drive to the MCP servers its workflow declares
// (agent-driver §10, workflow-file §3.5) through the MCP go-sdk's client:
// a stdio server is started at most once per drive, when a step first
// needs it, and stopped when the drive ends; an http server (streamable
// HTTP, not in the original) is reached at its url. Discovery keeps a
// step's declared tools and refuses, before any model call, a tool a
// server lacks or a bare name two servers share.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/workflow"
)

// ConnectTimeout bounds starting or reaching one server and its
// initialize handshake.
const ConnectTimeout = 30 * time.Second

// terminateWait is how long a stdio server has to exit after its stdin
// closes before it is sent SIGTERM (then SIGKILL after as long again).
const terminateWait = 2 * time.Second

// Error is a failure of the tool path, with its catalogue code.
type Error struct {
	Code    errcode.Code
	Message string
}

func (e *Error) Error() string { return e.Message }

// Env is the driver's environment, as os.LookupEnv reads it.
type Env func(name string) (string, bool)

// Pool is one drive's MCP servers. It is used by the drive's goroutine
// and closed by it when the drive ends.
type Pool struct {
	servers map[string]workflow.MCPServer
	env     Env
	// HTTPClient reaches http servers (nil: http.DefaultClient).
	HTTPClient *http.Client
	// Readable says which variables '${NAME}' may read (nil: any); the
	// driver keeps its own credentials from workflow authors with it.
	Readable func(name string) bool

	mu       sync.Mutex
	sessions map[string]*mcp.ClientSession
	closed   bool
	// secrets are the values '${NAME}' expanded to, for redaction.
	secrets []string
}

// NewPool is the pool of servers; nothing is started until a step needs
// it.
func NewPool(servers []workflow.MCPServer, env Env) *Pool {
	p := &Pool{servers: map[string]workflow.MCPServer{}, env: env, sessions: map[string]*mcp.ClientSession{}}
	for _, s := range servers {
		p.servers[s.ID] = s
	}
	return p
}

// Secrets are the values expanded into servers' env and headers so far.
func (p *Pool) Secrets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.secrets...)
}

// Close ends every session: a stdio server's stdin is closed and the
// process waited for (SIGTERM, then SIGKILL, if it lingers).
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	sessions := p.sessions
	p.sessions = map[string]*mcp.ClientSession{}
	p.mu.Unlock()
	var errs []error
	for _, id := range sortedKeys(sessions) {
		if err := sessions[id].Close(); err != nil && !isExit(err) {
			errs = append(errs, fmt.Errorf("MCP server '%s': %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// isExit is the error of a stdio server that ended on a signal or with a
// status when told to stop: it stopped, which is what was asked.
func isExit(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee)
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expand replaces each '${NAME}' in v from the environment; an unset
// variable is the spec's refusal.
func (p *Pool) expand(server, v string) (string, error) {
	var missing, denied string
	out := envRef.ReplaceAllStringFunc(v, func(m string) string {
		name := envRef.FindStringSubmatch(m)[1]
		if p.Readable != nil && !p.Readable(name) {
			if denied == "" {
				denied = name
			}
			return ""
		}
		val, ok := p.env(name)
		if !ok && missing == "" {
			missing = name
		}
		if ok && val != "" {
			p.secrets = append(p.secrets, val)
		}
		return val
	})
	if denied != "" {
		return "", &Error{Code: errcode.MCPConnectionFailed, Message: fmt.Sprintf("MCP server '%s': env var %s may not be read by tools (the driver keeps it for itself; see REALM_AGENT_TOOL_ENV)", server, denied)}
	}
	if missing != "" {
		return "", &Error{Code: errcode.MCPConnectionFailed, Message: fmt.Sprintf("MCP server '%s': env var %s is not set", server, missing)}
	}
	return out, nil
}

// baseEnv are the variables a stdio server inherits from the driver, as
// the MCP SDKs' default environment; the rest of the driver's environment
// (its model keys among it) is not passed on.
var baseEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}

// session is server id's session, connecting it at first need.
func (p *Pool) session(ctx context.Context, id string) (*mcp.ClientSession, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cs, ok := p.sessions[id]; ok {
		return cs, nil
	}
	if p.closed {
		return nil, &Error{Code: errcode.MCPConnectionFailed, Message: fmt.Sprintf("MCP server '%s': the drive has ended", id)}
	}
	srv, ok := p.servers[id]
	if !ok {
		return nil, &Error{Code: errcode.MCPConnectionFailed, Message: fmt.Sprintf("MCP server '%s' is not declared in mcp_servers", id)}
	}
	var t mcp.Transport
	switch srv.Transport {
	case "http":
		headers := http.Header{}
		for _, k := range sortedKeys(srv.Headers) {
			v, err := p.expand(id, srv.Headers[k])
			if err != nil {
				return nil, err
			}
			headers.Set(k, v)
		}
		base := p.HTTPClient
		if base == nil {
			base = http.DefaultClient
		}
		client := *base
		client.Transport = headerTransport{headers: headers, next: base.Transport}
		t = &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &client, MaxRetries: -1, DisableStandaloneSSE: true}
	default:
		env := []string{}
		for _, k := range baseEnv {
			if v, ok := p.env(k); ok {
				env = append(env, k+"="+v)
			}
		}
		for _, k := range sortedKeys(srv.Env) {
			v, err := p.expand(id, srv.Env[k])
			if err != nil {
				return nil, err
			}
			env = append(env, k+"="+v)
		}
		// Not CommandContext: the process is stopped by Close, which
		// lets it exit on its closed stdin first.
		cmd := exec.Command(srv.Command, srv.Args...)
		cmd.Env = env
		cmd.SysProcAttr = childAttr()
		t = &mcp.CommandTransport{Command: cmd, TerminateDuration: terminateWait}
	}
	cctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "realm-agent", Version: "1"}, nil)
	cs, err := client.Connect(cctx, t, nil)
	if err != nil {
		return nil, &Error{Code: errcode.MCPConnectionFailed, Message: fmt.Sprintf("MCP server '%s': cannot connect: %s", id, oneLine(err.Error()))}
	}
	p.sessions[id] = cs
	return cs, nil
}

// headerTransport adds an http server's headers to every request.
type headerTransport struct {
	headers http.Header
	next    http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header[k] = v
	}
	next := h.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}

// Tool is one tool a step may call, as the model sees it.
type Tool struct {
	// Server and Name are where the tool lives; the model knows it by
	// Name alone.
	Server, Name string
	Description  string
	// Schema is the tool's input schema.
	Schema map[string]any
}

// Set is a step's tools after discovery.
type Set struct {
	pool  *Pool
	tools []Tool
	by    map[string]Tool
}

// Discover lists the tools of each server the step uses and keeps the
// declared ones, in the declared order. A bare name declared from two
// servers is refused before any server is started.
func (p *Pool) Discover(ctx context.Context, step string, declared []string) (*Set, error) {
	type ref struct{ server, tool string }
	var refs []ref
	from := map[string]string{}
	for _, d := range declared {
		server, tool, _ := strings.Cut(d, ":")
		if prev, ok := from[tool]; ok && prev != server {
			return nil, &Error{Code: errcode.MCPToolNameCollision, Message: fmt.Sprintf(
				"Step '%s' declares tool '%s' from both MCP server '%s' and MCP server '%s'. The model sees bare tool names, so one step cannot use both; declare one of them.", step, tool, prev, server)}
		}
		if _, ok := from[tool]; ok {
			continue
		}
		from[tool] = server
		refs = append(refs, ref{server, tool})
	}
	listed := map[string]map[string]*mcp.Tool{}
	for _, r := range refs {
		if listed[r.server] != nil {
			continue
		}
		cs, err := p.session(ctx, r.server)
		if err != nil {
			return nil, err
		}
		lctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
		have := map[string]*mcp.Tool{}
		for t, err := range cs.Tools(lctx, nil) {
			if err != nil {
				cancel()
				return nil, &Error{Code: errcode.MCPConnectionFailed, Message: fmt.Sprintf("MCP server '%s': cannot list its tools: %s", r.server, oneLine(err.Error()))}
			}
			have[t.Name] = t
		}
		cancel()
		listed[r.server] = have
	}
	s := &Set{pool: p, by: map[string]Tool{}}
	for _, r := range refs {
		t, ok := listed[r.server][r.tool]
		if !ok {
			return nil, &Error{Code: errcode.MCPToolNotFound, Message: fmt.Sprintf(
				"Step '%s' declares tool '%s:%s' which is not exposed by MCP server '%s'. Check the tool name against the server's published tool list.", step, r.server, r.tool, r.server)}
		}
		tool := Tool{Server: r.server, Name: r.tool, Description: t.Description, Schema: schemaMap(t.InputSchema)}
		s.tools = append(s.tools, tool)
		s.by[tool.Name] = tool
	}
	return s, nil
}

// schemaMap is a listed tool's input schema as a JSON object.
func schemaMap(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return map[string]any{"type": "object"}
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil || m == nil {
		return map[string]any{"type": "object"}
	}
	return m
}

// Tools are the step's tools in declared order.
func (s *Set) Tools() []Tool { return append([]Tool(nil), s.tools...) }

// Lookup maps a bare name the model used back to its tool.
func (s *Set) Lookup(name string) (Tool, bool) {
	t, ok := s.by[name]
	return t, ok
}

// Call runs the tool the model named by its bare name. The result is the
// tool's content as one string (text parts joined, else its JSON); a
// tool that reports an error returns it as the error.
func (s *Set) Call(ctx context.Context, name string, args map[string]any) (string, error) {
	t, ok := s.by[name]
	if !ok {
		return "", fmt.Errorf("tool '%s' is not one of this step's tools", name)
	}
	cs, err := s.pool.session(ctx, t.Server)
	if err != nil {
		return "", err
	}
	if args == nil {
		args = map[string]any{}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: t.Name, Arguments: args})
	if err != nil {
		return "", err
	}
	text := resultText(res)
	if res.IsError {
		return "", errors.New(text)
	}
	return text, nil
}

// resultText serialises a tool result for the model: its text parts
// joined by newlines when all parts are text; otherwise the JSON of its
// content (or of its structured content when it has no content).
func resultText(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		if res.StructuredContent == nil {
			return ""
		}
		b, _ := json.Marshal(res.StructuredContent)
		return string(b)
	}
	var parts []string
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			b, _ := json.Marshal(res.Content)
			return string(b)
		}
		parts = append(parts, tc.Text)
	}
	return strings.Join(parts, "\n")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
