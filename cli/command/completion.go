package command

import "github.com/spf13/cobra"

// root builds the whole realm command tree wired to a's streams, with
// cobra's `completion` command (realm completion bash|zsh|fish|powershell)
// added up front rather than lazily inside Execute: `realm --help` lists it
// either way, but walkers of the tree (the docs/cli.md generator) only see
// it this way. It must come after SetOut: the generated scripts are written
// to the stream the command had when it was created.
func (a *app) root() *cobra.Command {
	root := a.rootCommand()
	addProjectFlags(root)
	root.SetOut(a.env.Stdout)
	root.SetErr(a.env.Stderr)
	root.InitDefaultCompletionCmd()
	return root
}

// Command returns the realm command tree, as Run executes it, for tools
// that only read it (cmd/gendocs). Run is the way to execute a command line.
func Command() *cobra.Command {
	a := &app{env: Env{}.withDefaults()}
	return a.root()
}
