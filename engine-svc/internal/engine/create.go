package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/workflow"
)

// createStepKeys are the fields a step of create_workflow takes.
var createStepKeys = []string{"id", "description", "depends_on", "input_schema", "structured_output", "llm_timeout_seconds"}

// createMetaKeys are the fields of create_workflow's metadata.
var createMetaKeys = []string{"name", "description", "task_description", "model", "agent"}

// CreateWorkflow registers a workflow an assistant describes and starts a
// run of it in one call (mcp spec §8). The id is minted from the plan: the
// same plan sent again gets the same id and a new run.
func (e *Engine) CreateWorkflow(ctx context.Context, req *realmv1.CreateWorkflowRequest) (*realmv1.Reply, error) {
	const command = "create_workflow"
	var warnings []string
	for _, k := range req.GetUnknownArguments() {
		switch {
		case k == "workflow_id":
			warnings = append(warnings, "'workflow_id' is ignored — create_workflow mints its own workflow id and returns it as data.workflow_id; pass a name under metadata.name to shape it.")
		case contains(createMetaKeys, k):
			warnings = append(warnings, fmt.Sprintf("'%s' belongs under metadata — submitted at the top level it is ignored; use metadata.%s.", k, k))
		default:
			warnings = append(warnings, fmt.Sprintf("unknown key '%s' — ignored (not a recognized create_workflow field).", k))
		}
	}
	meta := req.GetMetadata().AsMap()
	for _, k := range sortedKeys(meta) {
		if !contains(createMetaKeys, k) {
			warnings = append(warnings, fmt.Sprintf("metadata: unknown key '%s' — ignored (not a recognized metadata field).", k))
			delete(meta, k)
		}
	}
	steps, stepWarnings, problem := planSteps(req.GetSteps())
	warnings = append(warnings, stepWarnings...)
	if problem != "" {
		r := refusal(command, "", "", problem, nil)
		r.ErrorCode = ""
		r.AgentAction = realmv1.AgentAction_AGENT_ACTION_PROVIDE_INPUT
		r.Warnings = warnings
		return r, nil
	}
	name, _ := meta["name"].(string)
	plan := map[string]any{"steps": steps, "metadata": meta}
	canonical, _ := json.Marshal(plan)
	sum := sha256.Sum256(canonical)
	id := slug(name) + "-" + hex.EncodeToString(sum[:])[:16]

	doc := map[string]any{"id": id, "name": name, "version": 1}
	if name == "" {
		doc["name"] = id
	}
	if d, ok := meta["description"].(string); ok && d != "" {
		doc["description"] = d
	}
	if q, ok := meta["task_description"].(string); ok && q != "" {
		doc["protocol"] = map[string]any{"quick_start": q}
	}
	stepMap := map[string]any{}
	for _, s := range steps {
		m := map[string]any{"description": s["description"], "execution": "agent"}
		for _, k := range []string{"depends_on", "input_schema", "structured_output", "llm_timeout_seconds"} {
			if v, ok := s[k]; ok {
				m[k] = v
			}
		}
		stepMap[s["id"].(string)] = m
	}
	doc["steps"] = stepMap
	src, _ := json.Marshal(doc) // JSON is YAML: the loader checks the plan like a file
	def, rep := workflow.Load(src, workflow.LoadOptions{Path: "create_workflow"})
	if def == nil || !rep.Valid {
		msg := strings.Join(rep.Errors, "; ")
		r := refusal(command, "", "", msg, nil)
		r.ErrorCode, r.Errors = "", rep.Errors
		r.AgentAction = realmv1.AgentAction_AGENT_ACTION_PROVIDE_INPUT
		r.Warnings = warnings
		return r, nil
	}
	// Keep the plan's order, which the loader's map lost.
	def.StepOrder = def.StepOrder[:0]
	for _, s := range steps {
		def.StepOrder = append(def.StepOrder, s["id"].(string))
	}
	def.Origin = "agent"
	if m, ok := meta["model"].(string); ok {
		def.Model = m
	}
	if a, ok := meta["agent"].(string); ok {
		def.Agent = a
	}
	if _, err := e.putDefinition(ctx, def); err != nil {
		return nil, err
	}
	r, _, err := e.StartRun(ctx, &realmv1.StartRunRequest{WorkflowId: id, Params: &structpb.Struct{}, Caller: req.GetCaller()})
	if err != nil {
		return nil, err
	}
	r.Command = command
	r.Data = toStruct(map[string]any{"workflow_id": id})
	r.Warnings = append(warnings, r.Warnings...)
	r.Diagnostics = append([]string{}, warnings...)
	r.HasDiagnostics = true
	return r, nil
}

// planSteps reads create_workflow's steps: the known fields of each, the
// warnings for what it drops, or the problem that refuses the plan.
func planSteps(list interface{ AsSlice() []any }) ([]map[string]any, []string, string) {
	raw := list.AsSlice()
	if len(raw) == 0 {
		return nil, nil, "Array must contain at least 1 element(s) at steps"
	}
	var warnings []string
	seen := map[string]bool{}
	out := make([]map[string]any, 0, len(raw))
	for i, item := range raw {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, nil, fmt.Sprintf("Expected object, received %T at steps.%d", item, i)
		}
		id, _ := m["id"].(string)
		if id == "" {
			return nil, nil, fmt.Sprintf("Required at steps.%d.id", i)
		}
		if d, _ := m["description"].(string); d == "" {
			return nil, nil, fmt.Sprintf("Required at steps.%d.description", i)
		}
		if seen[id] {
			return nil, nil, fmt.Sprintf("Duplicate step id: '%s'", id)
		}
		step := map[string]any{}
		for _, k := range sortedKeys(m) {
			switch {
			case contains(createStepKeys, k):
				step[k] = m[k]
			case k == "timeout_seconds":
				warnings = append(warnings, "'timeout_seconds' was removed (#412) — nothing enforces it on agent steps; the model-request bound is 'llm_timeout_seconds'.")
			default:
				w := fmt.Sprintf("⚠ step '%s': unknown key '%s' — ignored (not a recognized step field).", id, k)
				if near := nearest(k, createStepKeys); near != "" {
					w = fmt.Sprintf("⚠ step '%s': unknown key '%s' — ignored (did you mean '%s'?)", id, k, near)
				}
				warnings = append(warnings, w)
			}
		}
		if deps, ok := m["depends_on"].([]any); ok {
			for _, d := range deps {
				name, _ := d.(string)
				if seen[name] {
					continue
				}
				for _, later := range raw[i:] {
					if lm, ok := later.(map[string]any); ok && lm["id"] == name {
						return nil, nil, fmt.Sprintf("Step '%s': depends_on must reference a step that appears earlier in the list", id)
					}
				}
				return nil, nil, fmt.Sprintf("Step '%s': depends_on references unknown step '%s'", id, name)
			}
		}
		seen[id] = true
		out = append(out, step)
	}
	return out, warnings, ""
}

// slug makes a workflow-id prefix from a name ("dynamic" without one).
func slug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		default:
			if !dash && b.Len() > 0 {
				b.WriteByte('-')
				dash = true
			}
		}
	}
	s := strings.Trim(b.String(), "-")
	if s == "" {
		return "dynamic"
	}
	if len(s) > 48 {
		s = strings.Trim(s[:48], "-")
	}
	return s
}

// nearest suggests a known key within two edits, or "".
func nearest(key string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
