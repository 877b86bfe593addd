package engine

import (
	"encoding/json"
	"fmt"

	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/pkg/condition"
	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/jsonenc"
	"github.com/realm-go/realm/pkg/schema"
	"github.com/realm-go/realm/pkg/workflow"
)

// compiled is a registered definition made ready to run: its schemas
// compiled and its conditions parsed once, not on every call.
type compiled struct {
	Def    *workflow.Definition
	Stored int64
	// Hash is the SHA-256 (hex) of the definition as stored: what evidence
	// entries name the deciding definition by (definition_hash).
	Hash string
	// Carried is a definition stored with its run, not registered.
	Carried bool
	params  *schema.Schema
	input   map[string]*schema.Schema
	output  map[string]*schema.Schema
	trace   map[string]*schema.Schema // trace_schema: the whole list of a step's entries
	when    map[string][]*condition.Condition
	pre     map[string][]*condition.Condition
	abort   map[string][]*condition.Condition
	parents map[string][]string // step -> steps that depend on it
	// schemaJSON is each agent step's answer schema as the reply carries
	// it, encoded once (replies share it, never changing it in place).
	schemaJSON map[string][]byte
	// answerJSON is each step's call_with answer placeholders, encoded once.
	answerJSON map[string][]byte
	// words is what each step's execute_step entry says that does not
	// depend on the run, built once.
	words map[string]*stepWords
	// usesRunners is whether a step needs a runner's handler or adapter.
	usesRunners bool
	// ordered is Def.Ordered(), built once: read only.
	ordered []*workflow.Step
}

// stepWords are the parts of a step's execute_step entry (stepAction)
// that only the definition decides.
type stepWords struct {
	command                    []byte // the step's name as a JSON string
	humanReadable, orientation string
}

// wordsOf is a step's two sentences (without its command value).
func wordsOf(s *workflow.Step) *stepWords {
	return &stepWords{
		humanReadable: fmt.Sprintf("Execute step '%s': %s", s.Name, s.Description),
		orientation:   fmt.Sprintf("Run is active. Next step ready: '%s'.", s.Name),
	}
}

func compile(rec *store.WorkflowRecord) (*compiled, error) {
	var d workflow.Definition
	if err := json.Unmarshal(rec.Definition, &d); err != nil {
		return nil, errcode.Wrap(errcode.EngineStoreFailed, err,
			fmt.Sprintf("Failed to load workflow '%s' from store: %v", rec.ID, err))
	}
	for name, s := range d.Steps {
		s.Name = name
	}
	c := &compiled{
		Def:        &d,
		ordered:    d.Ordered(),
		Stored:     rec.Version,
		Hash:       hashBytes(rec.Definition),
		input:      map[string]*schema.Schema{},
		output:     map[string]*schema.Schema{},
		trace:      map[string]*schema.Schema{},
		when:       map[string][]*condition.Condition{},
		pre:        map[string][]*condition.Condition{},
		abort:      map[string][]*condition.Condition{},
		parents:    map[string][]string{},
		schemaJSON: map[string][]byte{},
		answerJSON: map[string][]byte{},
		words:      map[string]*stepWords{},
	}
	var err error
	if d.ParamsSchema != nil {
		if c.params, err = compileSchema("params_schema", d.ParamsSchema); err != nil {
			return nil, err
		}
	}
	for name, s := range d.Steps {
		if s.InputSchema != nil {
			if c.input[name], err = compileSchema("input_schema", s.InputSchema); err != nil {
				return nil, err
			}
		}
		if s.OutputSchema != nil {
			if c.output[name], err = compileSchema("output_schema", s.OutputSchema); err != nil {
				return nil, err
			}
		}
		if s.TraceSchema != nil {
			if c.trace[name], err = compileSchema("trace_schema", s.TraceSchema); err != nil {
				return nil, err
			}
		}
		if c.when[name], err = parseAll(s.When); err != nil {
			return nil, err
		}
		if c.pre[name], err = parseAll(s.Preconditions); err != nil {
			return nil, err
		}
		if c.abort[name], err = parseAll(s.AbortUnless); err != nil {
			return nil, err
		}
		if sch := firstSchema(s); sch != nil {
			c.schemaJSON[name] = mustJSON(sch)
		}
		c.answerJSON[name] = mustJSON(answerOf(s))
		c.words[name] = wordsOf(s)
		c.words[name].command = jsonenc.AppendString(nil, name)
		for _, dep := range s.DependsOn {
			c.parents[dep] = append(c.parents[dep], name)
		}
		if s.Handler != "" && !builtins[s.Handler] || s.UsesService != "" {
			c.usesRunners = true
		}
	}
	return c, nil
}

func compileSchema(block string, v any) (*schema.Schema, error) {
	s, problems := schema.Compile(block, v)
	for _, p := range problems {
		if p.Severity == "error" {
			return nil, errcode.Newf(errcode.EngineInternal, "registered %s does not compile: %s", block, p.Message)
		}
	}
	return s, nil
}

func parseAll(texts []string) ([]*condition.Condition, error) {
	out := make([]*condition.Condition, 0, len(texts))
	for _, text := range texts {
		c, err := condition.Parse(text)
		if err != nil {
			return nil, errcode.Newf(errcode.EngineInternal, "registered condition %q does not parse: %v", text, err)
		}
		out = append(out, c)
	}
	return out, nil
}
