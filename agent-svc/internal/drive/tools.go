package drive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/realm-go/realm/agent-svc/internal/provider"
	"github.com/realm-go/realm/agent-svc/internal/redact"
	"github.com/realm-go/realm/agent-svc/internal/tools"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/schema"
	"github.com/realm-go/realm/pkg/workflow"
	"google.golang.org/protobuf/types/known/structpb"
)

// toolStep is what a tool-calling step declares (agent-driver §10.1).
type toolStep struct {
	tools        []string
	maxToolCalls int
	maxFanOut    int
	timeout      time.Duration
	// schemas are the step's input and output schemas, which an answer is
	// checked against in the conversation.
	schemas []*schema.Schema
}

// readTools notes the steps that declare tools and the workflow's MCP
// servers, from the registered definition.
func (d *driver) readTools(definition []byte) {
	var def workflow.Definition
	if len(definition) == 0 || json.Unmarshal(definition, &def) != nil {
		return
	}
	for id, st := range def.Steps {
		info, ok := d.steps[id]
		if !ok || st == nil || len(st.Tools) == 0 {
			continue
		}
		ts := &toolStep{tools: st.Tools, maxToolCalls: st.MaxToolCalls, maxFanOut: st.MaxFanOut,
			timeout: time.Duration(st.ToolTimeout) * time.Second}
		for _, b := range []struct {
			name string
			v    any
		}{{"input_schema", st.InputSchema}, {"output_schema", st.OutputSchema}} {
			if b.v == nil {
				continue
			}
			if s, _ := schema.Compile(b.name, b.v); s != nil {
				ts.schemas = append(ts.schemas, s)
			}
		}
		info.tools = ts
		d.steps[id] = info
	}
	if len(def.MCPServers) > 0 {
		d.pool = tools.NewPool(def.MCPServers, d.lookupEnv)
		d.pool.Readable = toolEnvReadable(d.o.ToolEnv)
	}
}

// ownCredentials are variables of the driver's own that a workflow's
// '${NAME}' never reads: its model keys, and Realm's settings and secrets.
var ownCredentials = map[string]bool{"ANTHROPIC_API_KEY": true, "OPENAI_API_KEY": true}

// toolEnvReadable is which variables '${NAME}' in mcp_servers may read:
// those listed, when a list is set; else any but the driver's own
// credentials (a workflow author could otherwise send agent-svc's model
// key to a server of their choosing).
func toolEnvReadable(list []string) func(string) bool {
	if list != nil {
		allowed := map[string]bool{}
		for _, n := range list {
			allowed[n] = true
		}
		return func(name string) bool { return allowed[name] }
	}
	return func(name string) bool {
		return !ownCredentials[name] && !strings.HasPrefix(name, "REALM_")
	}
}

// environ is the driver's environment (Options.Environ, else the
// process's).
func (d *driver) environ() []string {
	if d.o.Environ != nil {
		return d.o.Environ
	}
	return os.Environ()
}

func (d *driver) lookupEnv(name string) (string, bool) {
	for _, kv := range d.environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// closeTools stops the drive's MCP servers.
func (d *driver) closeTools() {
	if d.pool != nil {
		_ = d.pool.Close()
	}
}

// redactor hides the environment's values and the secrets resolved so
// far (§18).
func (d *driver) redactor() *redact.Redactor {
	var secrets []string
	if d.pool != nil {
		secrets = d.pool.Secrets()
	}
	return redact.New(d.environ(), secrets...)
}

// toolbox discovers a step's tools (§10.2), before any model call.
func (d *driver) toolbox(ctx context.Context, step string, ts *toolStep) (*toolbox, error) {
	if d.pool == nil {
		return nil, &tools.Error{Code: errcode.MCPConnectionFailed, Message: fmt.Sprintf("Step '%s' declares tools but the workflow declares no mcp_servers", step)}
	}
	set, err := d.pool.Discover(ctx, step, ts.tools)
	if err != nil {
		return nil, err
	}
	box := &toolbox{set: set}
	if d.steps[step].strictRequested {
		d.assessStrict(box)
	}
	return box, nil
}

// toolbox is a step's tools as the provider uses them.
type toolbox struct {
	set *tools.Set
	// strict are the tools whose arguments are sent strict; toolArgs is
	// their assessment as the evidence keeps it (§8.7), nil when the step
	// does not ask for strict.
	strict   map[string]bool
	toolArgs []map[string]any
}

func (b *toolbox) Specs() []provider.ToolSpec {
	var out []provider.ToolSpec
	for _, t := range b.set.Tools() {
		out = append(out, provider.ToolSpec{Name: t.Name, Description: t.Description, Schema: t.Schema, Strict: b.strict[t.Name]})
	}
	return out
}

// Anthropic's budget of strict tools (§8.7): at most this many tools and
// this many optional properties summed across them.
const (
	maxStrictTools     = 20
	maxStrictOptionals = 24
)

// assessStrict marks, for a step that asks for strict, which tools'
// arguments are sent strict (assessTools).
func (d *driver) assessStrict(box *toolbox) {
	compat := d.o.Flags.BaseURL != "" && !d.o.Flags.StrictBaseURL
	box.strict, box.toolArgs = assessTools(d.o.Provider.Name(), compat, box.set.Tools())
}

// assessTools judges each tool's input schema for strict arguments, in
// declared order: the eligible ones are strict (on Anthropic within its
// budget, greedily); none on a provider or endpoint that cannot take it.
// entries are the evidence's tool_args.tools[].
func assessTools(providerName string, compat bool, list []tools.Tool) (strict map[string]bool, entries []map[string]any) {
	strict = map[string]bool{}
	count, optional := 0, 0
	for _, t := range list {
		e := map[string]any{"name": t.Name, "strict_requested": true, "strict_sent": false}
		v := workflow.CheckStrict(t.Schema)
		opt := optionalProps(t.Schema)
		switch {
		case providerName == provider.OpenAIReasoning:
			e["reasons"] = []any{"provider_unsupported"}
		case compat:
			e["reasons"] = []any{"compat_endpoint"}
		case !v.Eligible():
			e["reasons"] = toAny(v.Refusals)
		case providerName == provider.Anthropic && (count+1 > maxStrictTools || optional+opt > maxStrictOptionals):
			e["reasons"] = []any{"budget_excluded"}
		default:
			count, optional = count+1, optional+opt
			strict[t.Name] = true
			e["strict_sent"] = true
		}
		if len(v.Caveats) > 0 {
			e["caveats"] = toAny(v.Caveats)
		}
		entries = append(entries, e)
	}
	return strict, entries
}

// toolArgsRecord is the evidence's tool_args after the step's requests: a
// live refusal flips the sent tools off and says so.
func toolArgsRecord(box *toolbox, res *provider.Result) map[string]any {
	var list []any
	for _, e := range box.toolArgs {
		c := map[string]any{}
		for k, v := range e {
			c[k] = v
		}
		if res.StrictDrop != nil && res.StrictDrop.Sticky() {
			// Strict stayed off for the rest of the step.
			c["strict_sent"] = false
		}
		list = append(list, c)
	}
	rec := map[string]any{"tools": list}
	if dr := res.StrictDrop; dr != nil {
		rec["dropped_mid_attempt"] = map[string]any{"reason": dr.Reason, "api_message": dr.APIMessage, "strict_turns_before_drop": dr.TurnsBefore}
	}
	return rec
}

// optionalProps counts the properties not required, at every level.
func optionalProps(schema map[string]any) int {
	n := 0
	var walk func(v any)
	walk = func(v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		req := map[string]bool{}
		if list, ok := m["required"].([]any); ok {
			for _, r := range list {
				if s, ok := r.(string); ok {
					req[s] = true
				}
			}
		}
		if props, ok := m["properties"].(map[string]any); ok {
			for k, p := range props {
				if !req[k] {
					n++
				}
				walk(p)
			}
		}
		walk(m["items"])
	}
	walk(schema)
	return n
}

func toAny(list []string) []any {
	out := make([]any, len(list))
	for i, s := range list {
		out[i] = s
	}
	return out
}

func (b *toolbox) Server(name string) (string, bool) {
	t, ok := b.set.Lookup(name)
	return t.Server, ok
}

func (b *toolbox) Call(ctx context.Context, name string, args map[string]any) (string, error) {
	return b.set.Call(ctx, name, args)
}

// check is the in-conversation check of an answer against the step's
// schemas: "" when it fits, else the summary the model is shown (the
// repair lines of §9, with the allowed values of enum and const).
func (ts *toolStep) check(answer map[string]any) string {
	for _, s := range ts.schemas {
		errs := s.Validate(answer)
		if len(errs) == 0 {
			continue
		}
		var lines []string
		for i, e := range errs {
			if i == 10 {
				break
			}
			path := e.InstancePath
			if path == "" {
				path = "(root)"
			}
			line := fmt.Sprintf("- %s: %s [%s]", cut(path, 200), cut(e.Message, 200), cut(e.Keyword, 200))
			if a, ok := e.Params["additionalProperty"].(string); ok && a != "" {
				line += fmt.Sprintf(" (additional property: '%s')", cut(a, 200))
			}
			if m, ok := e.Params["missingProperty"].(string); ok && m != "" {
				line += fmt.Sprintf(" (missing property: '%s')", cut(m, 200))
			}
			if v, ok := allowed(e); ok {
				line += fmt.Sprintf(" (allowed values: %s)", cut(v, 200))
			}
			lines = append(lines, line)
		}
		return strings.Join(lines, "\n")
	}
	return ""
}

// allowed is an enum or const error's allowed values as JSON.
func allowed(e schema.Error) (string, bool) {
	var v any
	switch e.Keyword {
	case "enum":
		v = e.Params["allowedValues"]
	case "const":
		v = e.Params["allowedValue"]
		if v != nil {
			v = []any{v}
		}
	default:
		return "", false
	}
	if v == nil {
		return "", false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// toolCallsProto are a step's calls as execute_step carries them.
func toolCallsProto(calls []provider.ToolCall) []*realmv1.ToolCall {
	var out []*realmv1.ToolCall
	for _, c := range calls {
		tc := &realmv1.ToolCall{ServerId: c.ServerID, Tool: c.Tool, DurationMs: c.Duration.Milliseconds(), Error: c.Error}
		if v, err := structpb.NewValue(jsonPlain(c.Args)); err == nil {
			tc.Args = v
		}
		if c.Result != nil {
			if v, err := structpb.NewValue(jsonPlain(c.Result)); err == nil {
				tc.Result = v
			}
		}
		out = append(out, tc)
	}
	return out
}

// jsonPlain makes v plain JSON values (maps, lists, floats) for structpb.
func jsonPlain(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return out
}

// withTools makes req a tool-calling request for step.
func (d *driver) withTools(req *provider.Request, step string, ts *toolStep, box *toolbox) {
	req.Tools, req.MaxToolCalls, req.MaxFanOut, req.ToolTimeout = box, ts.maxToolCalls, ts.maxFanOut, ts.timeout
	req.Check = ts.check
	r := d.redactor()
	req.Redact = r.String
	req.Corrected = func(n int) {
		_ = d.send(&realmv1.DriveEvent{Kind: realmv1.DriveEventKind_DRIVE_EVENT_KIND_REPAIR, Step: step, RepairAttempt: int32(n),
			Lines: stderr(fmt.Sprintf("  ⚠ output rejected (in-conversation); correcting (%d)", n))})
	}
}

// toolsFailed ends a tool-calling step that failed anywhere in the tool
// path (§10.4): `✗ Step '<step>' (tools) failed: <message>`, a drive
// failure recorded, the run left open. The message is redacted.
func (d *driver) toolsFailed(ctx context.Context, step string, err error, billed []provider.Usage) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	ce := asCallError(err)
	ce.Message = d.redactor().String(ce.Message)
	ce.Usage = append(append([]provider.Usage{}, billed...), ce.Usage...)
	f := d.failure(step, ce)
	f.Code = ce.Code
	var te *tools.Error
	if errors.As(err, &te) {
		f.Code = string(te.Code)
	}
	return d.stop(f, step, fmt.Sprintf("✗ Step '%s' (tools) failed: %s", step, ce.Message), d.reattachLine())
}
