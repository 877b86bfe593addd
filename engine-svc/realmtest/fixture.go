package realmtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Fixture is one workflow test (spec mcp-and-gates §10.1): everything from
// outside the workflow — params, service answers, agent answers, injected
// agent errors, gate choices — and what the run must end as.
type Fixture struct {
	// Name says what the fixture shows; it is the line printed for it.
	Name string `yaml:"name" json:"name"`
	// Params are the run's params (default {}).
	Params map[string]any `yaml:"params" json:"params"`
	// Mocks answer service calls: service name (from the workflow's
	// services block) → operation → response.
	Mocks map[string]map[string]MockResponse `yaml:"mocks" json:"mocks"`
	// AgentResponses is the answer per agent step (missing: {}).
	AgentResponses map[string]any `yaml:"agent_responses" json:"agent_responses"`
	// AgentErrors are failures injected per agent step, one per attempt,
	// before its answer is given.
	AgentErrors map[string][]string `yaml:"agent_errors" json:"agent_errors,omitempty"`
	// GateResponses is the choice per gated step (missing: "approve").
	GateResponses map[string]string `yaml:"gate_responses" json:"gate_responses,omitempty"`
	Expected      Expected          `yaml:"expected" json:"expected"`

	// File is the fixture's file, when it was loaded from one.
	File string `yaml:"-" json:"-"`
}

// MockResponse is what a mocked service operation answers.
type MockResponse struct {
	Status int `yaml:"status" json:"status"`
	Data   any `yaml:"data" json:"data"`
}

// Expected is what a fixture checks when the run has ended.
type Expected struct {
	// FinalState is the phase the run must end in (required).
	FinalState string `yaml:"final_state" json:"final_state"`
	// SkippedSteps, when set, is the exact set of skipped steps.
	SkippedSteps *[]string `yaml:"skipped_steps" json:"skipped_steps,omitempty"`
	// Evidence lists entries that must exist in the run's evidence.
	Evidence []ExpectedEvidence `yaml:"evidence" json:"evidence,omitempty"`
}

// ExpectedEvidence is one evidence entry that must exist: a step, and
// optionally its status (success, error or skipped).
type ExpectedEvidence struct {
	StepID string `yaml:"step_id" json:"step_id"`
	Status string `yaml:"status" json:"status,omitempty"`
}

// ParseFixture reads one fixture from YAML and fills its defaults. Only
// name and expected.final_state are required (spec §10.1); the loader
// checks nothing else, so an author's extra keys do no harm.
func ParseFixture(data []byte) (Fixture, error) {
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return Fixture{}, fmt.Errorf("Fixture is not valid YAML: %w", err)
	}
	if name, ok := raw["name"].(string); !ok || strings.TrimSpace(name) == "" {
		return Fixture{}, errors.New(`Fixture must have a non-empty string "name" field`)
	}
	exp, _ := raw["expected"].(map[string]any)
	if _, ok := exp["final_state"].(string); !ok {
		return Fixture{}, errors.New(`Fixture must have an "expected.final_state" string field`)
	}
	var f Fixture
	if err := yaml.Unmarshal(data, &f); err != nil {
		return Fixture{}, fmt.Errorf("Fixture has a field of the wrong type: %w", err)
	}
	if f.Params == nil {
		f.Params = map[string]any{}
	}
	if f.Mocks == nil {
		f.Mocks = map[string]map[string]MockResponse{}
	}
	if f.AgentResponses == nil {
		f.AgentResponses = map[string]any{}
	}
	return f, nil
}

// LoadFixture reads one fixture file.
func LoadFixture(path string) (Fixture, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Fixture{}, err
	}
	f, err := ParseFixture(data)
	if err != nil {
		return Fixture{}, fmt.Errorf("%s: %w", path, err)
	}
	f.File = path
	return f, nil
}

// LoadFixturesFromDir reads every *.yaml and *.yml file directly inside
// dir (not its subfolders), in name order.
func LoadFixturesFromDir(dir string) ([]Fixture, error) {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return nil, &MissingDirError{Dir: dir}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && (strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	out := make([]Fixture, 0, len(names))
	for _, n := range names {
		f, err := LoadFixture(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// MissingDirError is a fixtures folder that does not exist.
type MissingDirError struct{ Dir string }

func (e *MissingDirError) Error() string { return "Fixture directory does not exist: " + e.Dir }
