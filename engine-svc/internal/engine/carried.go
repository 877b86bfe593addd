package engine

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/realm-go/realm/engine-svc/internal/record"
	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/workflow"
)

// A run started from a workflow file without registering it carries its
// definition (workflow-file spec §1: "run straight from a file without
// registering"). The definition is stored once, in the create's own
// compare-and-set, beside the run's outputs under definitionField, so every
// replica reads the same bytes and no later write rewrites them; the run
// document says so in definition_source. The registered copy of its id is
// neither read nor written for such a run.

// definitionField is where a run's carried definition lives in its output
// hash (JSON of workflow.Definition, as RegisterWorkflow would store it).
const definitionField = "\x00definition"

// internalField reports whether an output-hash field is the engine's own
// (refused answers, trace buffers, the carried definition), not a step's.
func internalField(k string) bool {
	return k == attemptsField || k == definitionField || strings.HasPrefix(k, traceField)
}

// sourceDefinition runs the loader on a workflow file sent with start_run,
// with the checks RegisterWorkflow makes, and returns the definition as it
// would be stored and compiled. A file the loader refuses returns a nil
// definition and the report.
func (e *Engine) sourceDefinition(ctx context.Context, src *realmv1.WorkflowSource) (*compiled, []byte, *workflow.Report, error) {
	def, rep := load(src, false)
	if def != nil && rep.Valid {
		if errs := e.usesResourcesProblems(ctx, def); len(errs) > 0 {
			rep.Valid = false
			rep.Errors = append(rep.Errors, errs...)
		}
	}
	if def == nil || !rep.Valid {
		return nil, nil, rep, nil
	}
	def.Origin = "human" // a person ran the file, as one registers it
	def.SchemaVersion = workflow.SchemaVersion
	b, err := json.Marshal(def)
	if err != nil {
		return nil, nil, nil, errcode.Wrap(errcode.EngineInternal, err, "encode workflow: "+err.Error())
	}
	c, err := e.carried(def.ID, b)
	if err != nil {
		return nil, nil, nil, err
	}
	return c, b, rep, nil
}

// invalidSource is start_run's refusal of a workflow file the loader
// refused: nothing was created.
func invalidSource(rep *workflow.Report) *realmv1.Reply {
	msg := "Invalid workflow: " + strings.Join(rep.Errors, "; ")
	r := refusal("start_run", "", errcode.ValidationWorkflowSchema, msg, nil)
	r.Errors = append([]string{}, rep.Errors...)
	return r
}

// carried compiles a run's carried definition. The compiled copy is kept
// by hash: the bytes never change, so it is never stale.
func (e *Engine) carried(workflowID string, b []byte) (*compiled, error) {
	hash := hashBytes(b)
	if c := e.carriedDefs.get(hash); c != nil {
		return c, nil
	}
	c, err := compile(&store.WorkflowRecord{ID: workflowID, Definition: b})
	if err != nil {
		return nil, err
	}
	c.Carried = true
	e.carriedDefs.put(hash, c)
	return c, nil
}

// runDefinition is the definition a stored run's steps are decided by:
// the copy it carries, else the registered copy of its workflow.
func (e *Engine) runDefinition(ctx context.Context, d *decoded) (*compiled, error) {
	if d.run.DefinitionSource != record.DefinitionCarried {
		return e.definition(ctx, d.run.WorkflowID)
	}
	if len(d.definition) == 0 {
		return nil, &errWorkflowMissing{id: d.run.WorkflowID, carried: true}
	}
	return e.carried(d.run.WorkflowID, d.definition)
}

// carry stores def's bytes with the run this transaction creates.
func (t *txn) carry(b []byte) {
	t.run.DefinitionSource = record.DefinitionCarried
	t.carriedDef = b
	t.touch()
}

// stampDefinition names on an evidence entry the definition this
// transaction decided with (definition_version, definition_hash), so a
// re-registration mid-run is on the record.
func (t *txn) stampDefinition(e *record.Entry) {
	if t.def == nil || e.DefinitionHash != "" {
		return
	}
	// Every entry points at the compiled definition's own version: it
	// is never changed, and a copy per entry was an allocation.
	e.DefinitionVersion, e.DefinitionHash = &t.def.Def.Version, t.def.Hash
}
