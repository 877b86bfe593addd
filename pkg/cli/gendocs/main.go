// Command gendocs writes docs/cli.md, the reference of every realm command,
// from the command definitions in pkg/cli. Run it from the repository root:
//
//	make docs        (or: go run ./pkg/cli/gendocs)
//
// pkg/cli's TestDocsUpToDate fails when the checked-in file differs.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/realm-go/realm/pkg/cli"
)

func main() {
	out := flag.String("o", cli.DocsPath, "file to write (- for stdout)")
	flag.Parse()
	var buf bytes.Buffer
	if err := cli.WriteMarkdown(&buf, cli.Command()); err != nil {
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
