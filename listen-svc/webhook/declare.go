package webhook

import (
	"errors"
	"strings"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/trigger"
	"github.com/realm-go/realm/pkg/workflow"
)

// Declare loads a workflow file as `realm listen` reads it: its id and its
// trigger block (nil when it has none). A file the loader refuses, or
// whose trigger is invalid, is an error worded `Invalid workflow: …`.
func Declare(src *realmv1.WorkflowSource) (Declared, error) {
	def, rep := workflow.Load(src.GetYaml(), workflow.LoadOptions{Path: src.GetPath(), Files: src.GetFiles()})
	if def == nil || !rep.Valid {
		if len(rep.Errors) == 0 {
			return Declared{}, errors.New("Invalid workflow")
		}
		return Declared{}, errors.New("Invalid workflow: " + strings.Join(rep.Errors, "; "))
	}
	if def.Trigger == nil {
		return Declared{WorkflowID: def.ID}, nil
	}
	if _, err := trigger.Parse(def.Trigger); err != nil {
		return Declared{}, errors.New("Invalid workflow: " + err.Error())
	}
	return Declared{WorkflowID: def.ID, Block: def.Trigger}, nil
}
