package command

import (
	"bytes"
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"github.com/spf13/cobra"

	"github.com/realm-go/realm/pkg/version"
)

// scaffoldFS holds the files `realm workflow init` writes. Templates
// (*.tmpl) are rendered with scaffoldData; the Go runner is kept as a
// template so the go tool never builds it as part of this package.
//
//go:embed scaffold
var scaffoldFS embed.FS

// scaffoldFiles are the files written, in the order the command lists
// them: cli.md §2.1's six, with the JavaScript registry.sample.js replaced
// by a Go handler runner (go.mod and runner/main.go) at its place, then two
// fixtures for `realm workflow test`.
var scaffoldFiles = []struct{ path, source string }{
	{"workflow.yaml", "workflow.yaml.tmpl"},
	{"schema.json", "schema.json"},
	{".env.example", "env.example.tmpl"},
	{"README.md", "README.md.tmpl"},
	{"go.mod", "go.mod.tmpl"},
	{"runner/main.go", "runner/main.go.tmpl"},
	{"realm.yaml", "realm.yaml.tmpl"},
	{"fixtures/send.yaml", "fixtures/send.yaml.tmpl"},
	{"fixtures/no-ticket.yaml", "fixtures/no-ticket.yaml.tmpl"},
}

// scaffoldGoVersion is the go line of the scaffold's go.mod; `go mod tidy`
// raises it to what the realm module needs.
const scaffoldGoVersion = "1.26"

type scaffoldData struct {
	Name         string // the argument as given
	ID           string // workflow id, runner name, module path
	Module       string
	GoVersion    string
	RealmVersion string
}

// releaseVersion is a released realm's version (e.g. 0.46.0).
var releaseVersion = regexp.MustCompile(`^\d+\.\d+\.\d+$`)

// idUnsafe is what a workflow id and a module path drop from the folder name.
var idUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// workflowInitCommand is `realm workflow init <name>` (cli.md §2.1).
func (a *app) workflowInitCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "init <name>",
		Short: "Create a starter workflow folder with a Go handler runner",
		Long: `Creates folder <name> with a minimal valid workflow and what runs it:

  workflow.yaml   an auto step served by a Go handler (lookup_ticket), then an
                  agent step whose answer has a schema, confirmed at a gate
  schema.json     the answer's shape, given to the agent as workflow.context.schema
  .env.example    the environment variables realm and the runner read
  README.md       how to try it
  go.mod          a Go module requiring github.com/realm-go/realm/pkg
  runner/main.go  the handler runner (pkg/runner + pkg/handler)
  realm.yaml      the deployment manifest (version 1, no handlers yet)

The workflow id is the folder's name. In the folder, "go mod tidy" then
"go run ./runner" serves the handler to engine-svc. go.mod requires this
realm's version of github.com/realm-go/realm/pkg (v0.0.0 for a build from
source: point it at the checkout with go mod edit -replace, as README.md says).

Refused (exit 1) when the folder already exists.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			dir, err := filepath.Abs(name)
			if err != nil {
				return refuse("Error: %v", err)
			}
			if _, err := os.Lstat(dir); err == nil {
				return refuse("Directory already exists: %s", dir)
			}
			if err := writeScaffold(dir, scaffoldFor(name)); err != nil {
				return err
			}
			out := a.env.Stdout
			shown := strings.TrimSuffix(filepath.ToSlash(name), "/")
			fmt.Fprintf(out, "Created: %s/\n", shown)
			for _, f := range scaffoldFiles {
				fmt.Fprintf(out, "  %s\n", f.path)
			}
			next := shown + "/"
			if !filepath.IsAbs(name) && !strings.HasPrefix(next, "./") && !strings.HasPrefix(next, "../") {
				next = "./" + next
			}
			fmt.Fprintf(out, "\nNext: realm workflow validate %s\n", next)
			return nil
		},
	}
}

func scaffoldFor(name string) scaffoldData {
	id := strings.Trim(idUnsafe.ReplaceAllString(filepath.Base(filepath.Clean(name)), "-"), "-.")
	if id == "" {
		id = "workflow"
	}
	v := "v0.0.0"
	if releaseVersion.MatchString(version.Version) {
		v = "v" + version.Version
	}
	return scaffoldData{Name: name, ID: id, Module: id, GoVersion: scaffoldGoVersion, RealmVersion: v}
}

// writeScaffold renders every file into a new folder. The folder is made
// with Mkdir (not MkdirAll) so a folder created meanwhile is refused too;
// on a failure the half-written folder is removed.
func writeScaffold(dir string, data scaffoldData) (err error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return refuse("Error: cannot create %s: %v", dir, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if os.IsExist(err) {
			return refuse("Directory already exists: %s", dir)
		}
		return refuse("Error: cannot create %s: %v", dir, err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	for _, f := range scaffoldFiles {
		b, err := scaffoldFS.ReadFile("scaffold/" + f.source)
		if err != nil {
			return refuse("Error: %v", err)
		}
		if strings.HasSuffix(f.source, ".tmpl") {
			t, err := template.New(f.source).Option("missingkey=error").Parse(string(b))
			if err != nil {
				return refuse("Error: %v", err)
			}
			var buf bytes.Buffer
			if err := t.Execute(&buf, data); err != nil {
				return refuse("Error: %v", err)
			}
			b = buf.Bytes()
		}
		path := filepath.Join(dir, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return refuse("Error: cannot write %s: %v", path, err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return refuse("Error: cannot write %s: %v", path, err)
		}
	}
	return nil
}
