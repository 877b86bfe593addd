// Command gendocs writes docs/cli.md, the reference of every realm command,
// from the command definitions in cli/command. Run it from the repository root:
//
//	make docs        (or: go run ./cli/command/gendocs)
//
// cli/command's TestDocsUpToDate fails when the checked-in file differs.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/realm-go/realm/cli/command"
)

func main() {
	out := flag.String("o", command.DocsPath, "file to write (- for stdout)")
	flag.Parse()
	var buf bytes.Buffer
	if err := command.WriteMarkdown(&buf, command.Command()); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
	if *out == "-" {
		_, _ = os.Stdout.Write(buf.Bytes())
		return
	}
	if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}
