// Command gen turns pkg/errcode/codes.json into codes_gen.go and
// docs/error-codes.md. Run it through `go generate ./...` in pkg/errcode.
//
// It deliberately does not import errcode: the package it generates may be
// stale or broken while the generator runs.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
)

func main() {
	in := flag.String("in", "codes.json", "catalogue to read")
	goOut := flag.String("go", "codes_gen.go", "Go file to write")
	mdOut := flag.String("md", "", "Markdown table to write (skipped when empty)")
	flag.Parse()
	if err := run(*in, *goOut, *mdOut); err != nil {
		fmt.Fprintln(os.Stderr, "errcode gen:", err)
		os.Exit(1)
	}
}

func run(in, goOut, mdOut string) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	entries, err := parse(data)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	src, err := renderGo(entries)
	if err != nil {
		return err
	}
	if err := writeIfChanged(goOut, src); err != nil {
		return err
	}
	if mdOut == "" {
		return nil
	}
	return writeIfChanged(mdOut, renderMarkdown(entries))
}

// writeIfChanged keeps mtimes still when nothing changed, so builds and
// editors are not disturbed by a no-op generate.
func writeIfChanged(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	return os.WriteFile(path, data, 0o644)
}
