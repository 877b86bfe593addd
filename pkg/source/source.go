// Package source reads a workflow for the engine: the workflow file and the
// side files it names (agent profiles, workflow_context files), as one
// WorkflowSource. The engine judges everything; this package only reads.
package source

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

// DefaultProfilesDir is where agent profiles live unless profiles_dir says
// otherwise (workflow-file spec §3.7).
const DefaultProfilesDir = "profiles"

// maxSideFile bounds one profile or context file sent with a workflow, to
// stay well inside gRPC's default 4 MiB message.
const maxSideFile = 1 << 20

// ReadError is a workflow file that could not be read; validate prints it
// as `Invalid: Failed to read workflow file: <os error>`.
type ReadError struct{ err error }

func (e *ReadError) Error() string { return "Failed to read workflow file: " + e.err.Error() }

// Read reads the workflow at path (the file, or a folder holding
// workflow.yaml) and the files it names: the agent profiles in its
// profiles_dir and its workflow_context files, keyed by their path relative
// to the workflow file. The engine judges everything; a file named but
// missing is simply not sent, and the engine reports it.
func Read(path string) (*realmv1.WorkflowSource, error) {
	file := path
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		file = filepath.Join(path, "workflow.yaml")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, &ReadError{err: err}
	}
	src := &realmv1.WorkflowSource{Yaml: data, Path: file, Files: map[string][]byte{}, FileErrors: map[string]string{}}
	dir := filepath.Dir(file)

	var head struct {
		ProfilesDir     string `yaml:"profiles_dir"`
		WorkflowContext map[string]struct {
			Source struct {
				Path string `yaml:"path"`
			} `yaml:"source"`
		} `yaml:"workflow_context"`
	}
	// A file that does not parse is still sent: the loader's message for it
	// (with line and column) is the one to print.
	_ = yaml.Unmarshal(data, &head)

	profiles := head.ProfilesDir
	if profiles == "" {
		profiles = DefaultProfilesDir
	}
	addProfiles(src, dir, profiles)
	names := make([]string, 0, len(head.WorkflowContext))
	for name := range head.WorkflowContext {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if p := head.WorkflowContext[name].Source.Path; p != "" {
			if err := addFile(src, dir, p); err != nil {
				// The run records the entry as {"content": "", "error":
				// …} and leaves its expressions as written (§3.8).
				src.FileErrors[relKey(p)] = err.Error()
			}
		}
	}
	if _, declared := head.WorkflowContext["schema"]; !declared {
		// A schema.json beside the workflow file is the implicit context
		// entry `schema` (workflow-file spec §3.8); the loader adds the
		// entry only when the file was sent.
		_ = addFile(src, dir, "schema.json")
	}
	return src, nil
}

// addProfiles sends every *.md directly inside the profiles folder. A
// folder that is missing or unreadable sends nothing: the engine then
// reports each profile a step names as not found.
func addProfiles(src *realmv1.WorkflowSource, dir, profiles string) {
	entries, err := os.ReadDir(Resolve(dir, profiles))
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		_ = addFile(src, dir, filepath.Join(profiles, e.Name()))
	}
}

// addFile reads rel (relative to dir, or absolute) into src.Files when it is
// a regular file of sensible size, and otherwise says why not.
func addFile(src *realmv1.WorkflowSource, dir, rel string) error {
	full := Resolve(dir, rel)
	f, err := os.Open(full)
	if err != nil {
		return err // e.g. open <path>: no such file or directory
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return fmt.Errorf("read %s: not a regular file", full)
	case fi.Size() > maxSideFile:
		return fmt.Errorf("read %s: file is larger than %d bytes", full, maxSideFile)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	src.Files[relKey(rel)] = b
	return nil
}

// relKey is how a side file is named in WorkflowSource: its path relative
// to the workflow file, slash-separated and cleaned.
func relKey(rel string) string { return filepath.ToSlash(filepath.Clean(rel)) }

// Resolve is rel inside dir, or rel itself when it is absolute.
func Resolve(dir, rel string) string {
	if filepath.IsAbs(rel) {
		return rel
	}
	return filepath.Join(dir, rel)
}
