package command

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// projectFlagCommands take the original's --project and --extensions-module
// (cli.md §1.6). The original loads project code into the command; here
// handlers run in handler runners registered with engine-svc and the engine
// reads no realm.yaml, so the flags change nothing. They are accepted, so
// scripts written for the original keep working, and a set one says so on
// stderr. (workflow run and workflow test handle them themselves.)
var projectFlagCommands = [][]string{
	{"workflow", "validate"},
	{"run", "respond"}, {"run", "advance"}, {"run", "drain"},
	{"agent"}, {"mcp"}, {"serve"},
}

// projectFlagNote is the line a set flag prints.
const projectFlagNote = "Note: %s has no effect here: handlers run in handler runners registered with engine-svc, which reads no realm.yaml. Start the runner that serves this workflow's handlers instead."

// addProjectFlags adds the two flags to each command of projectFlagCommands
// under root.
func addProjectFlags(root *cobra.Command) {
	for _, path := range projectFlagCommands {
		cmd, _, err := root.Find(path)
		if err != nil || cmd.Name() != path[len(path)-1] {
			panic("cli: no command " + strings.Join(path, " ")) // a programming error, caught by every test
		}
		var project, extensions string
		cmd.Flags().StringVar(&project, "project", "", "accepted for the original's scripts; no effect here (handlers run in runners)")
		cmd.Flags().StringVar(&extensions, "extensions-module", "", "accepted for the original's scripts; no effect here (handlers run in runners)")
		run := cmd.RunE
		cmd.RunE = func(c *cobra.Command, args []string) error {
			for _, name := range []string{"project", "extensions-module"} {
				if c.Flags().Changed(name) {
					fmt.Fprintf(c.ErrOrStderr(), projectFlagNote+"\n", "--"+name)
				}
			}
			return run(c, args)
		}
	}
}
