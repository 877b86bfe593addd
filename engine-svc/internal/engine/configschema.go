package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/realm-go/realm/engine-svc/internal/registry"
	"github.com/realm-go/realm/pkg/schema"
	"github.com/realm-go/realm/pkg/workflow"
)

// configSchemaBlock names an adapter's config_schema in the schema
// package's messages.
const configSchemaBlock = "config_schema"

// CompileConfigSchema compiles the JSON text of an adapter's config_schema
// (spec §13.1) in realm's schema dialect; the error says what is wrong
// with it, in one line.
func CompileConfigSchema(text string) (*schema.Schema, error) {
	var doc any
	if err := json.Unmarshal([]byte(text), &doc); err != nil {
		return nil, fmt.Errorf("'%s' is not JSON: %v", configSchemaBlock, err)
	}
	s, problems := schema.Compile(configSchemaBlock, doc)
	if s != nil {
		return s, nil
	}
	var msgs []string
	for _, p := range problems {
		if p.Severity == schema.SeverityError {
			msgs = append(msgs, p.Message)
		}
	}
	return nil, errors.New(strings.Join(msgs, "; "))
}

// configSchema is CompileConfigSchema, compiled once per schema text.
func (e *Engine) configSchema(text string) (*schema.Schema, error) {
	key := hashBytes([]byte(text))
	if s := e.configSchemas.get(key); s != nil {
		return s, nil
	}
	s, err := CompileConfigSchema(text)
	if err != nil {
		return nil, err
	}
	e.configSchemas.put(key, s)
	return s, nil
}

// configSchemaProblems applies the config_schema rule (spec §13.1) at
// validate and register: a service step may carry `config` only if its
// adapter declares config_schema, and the config must fit it. What an
// adapter declares is known from the live runners that registered it with
// a spec; with none (no runner yet, or runners that sent only names) the
// config cannot be checked here and is accepted — the step waits for a
// runner, and the adapter refuses config it does not read at call time.
// A step goes to any runner serving its adapter, so its config must fit
// every declaration among them. Workflow files run without registering
// (`realm agent --workflow`) are not checked (spec).
func (e *Engine) configSchemaProblems(ctx context.Context, def *workflow.Definition) []string {
	if e.reg == nil {
		return nil
	}
	var steps []*workflow.Step
	for _, s := range def.Ordered() {
		if s.UsesService != "" && s.Config != nil {
			steps = append(steps, s)
		}
	}
	if len(steps) == 0 {
		return nil
	}
	live, err := e.reg.Live(ctx)
	if err != nil {
		return nil // as for uses_resources: unknown here, checked at the call
	}
	var out []string
	for _, s := range steps {
		svc := def.Services[s.UsesService]
		if svc == nil {
			continue // the loader refuses an undeclared service
		}
		for _, text := range declarations(live, svc.Adapter) {
			if why := e.configRefusal(s, svc.Adapter, text); why != "" {
				if s.Line > 0 {
					why += fmt.Sprintf(" (step at line %d)", s.Line)
				}
				out = append(out, why)
				break
			}
		}
	}
	return out
}

// declarations are the distinct config_schema texts the live runners
// declared for an adapter ("" for none), in a stable order.
func declarations(live []*registry.Runner, adapter string) []string {
	var out []string
	for _, r := range live {
		if spec, ok := r.AdapterSpec(adapter); ok && !slices.Contains(out, spec.ConfigSchema) {
			out = append(out, spec.ConfigSchema)
		}
	}
	slices.Sort(out)
	return out
}

// configRefusal is the rule's message for one step against one
// declaration, "" when the config fits.
func (e *Engine) configRefusal(s *workflow.Step, adapter, text string) string {
	if text == "" {
		return fmt.Sprintf("Step '%s': 'config' declared but adapter '%s' does not declare 'config_schema'", s.Name, adapter)
	}
	const failed = "Step '%s': config validation failed against adapter config_schema: %s"
	sch, err := e.configSchema(text)
	if err != nil {
		return fmt.Sprintf(failed, s.Name, err.Error())
	}
	errs := sch.Validate(s.Config)
	if len(errs) == 0 {
		return ""
	}
	msg := errs[0].RootedText()
	if p, ok := errs[0].Params["additionalProperty"].(string); ok {
		msg += fmt.Sprintf(" ('%s')", p)
	}
	return fmt.Sprintf(failed, s.Name, msg)
}
