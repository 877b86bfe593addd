package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/realm-go/realm/pkg/source"
)

// watchInterval is how often watch polls the watched files' mtimes and sizes.
const watchInterval = 300 * time.Millisecond

// watchGoneLine is what watch prints when the workflow's folder disappears (cli.md §2.4).
const watchGoneLine = "Error: The watched directory no longer exists — deleted, or moved out from under the watch. " +
	"Nothing is watched any more; restart 'realm workflow watch' when the path exists again."

func (a *app) workflowWatchCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "watch <path>",
		Short: "Register a workflow, then re-register it whenever it changes",
		Long: "Register a workflow file (or the folder holding workflow.yaml) now, then again whenever\n" +
			"the file or one of the agent profile or context files it reads changes. A refused edit is\n" +
			"logged on stderr and the copy registered before stays. Every line starts with the UTC time.\n" +
			"Runs until Ctrl+C (exit 0); exit 1 if the file is missing at start or its folder is removed.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.watch(cmd.Context(), args[0], watchInterval)
		},
	}
}

// watch is `realm workflow watch` (cli.md §2.4), polling every interval.
func (a *app) watch(ctx context.Context, path string, interval time.Duration) error {
	file := path
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		file = filepath.Join(path, "workflow.yaml")
	}
	dir := filepath.Dir(file)
	if _, err := source.Read(file); err != nil {
		a.stamp(a.env.Stderr, "Invalid: "+err.Error())
		return &exitError{code: ExitRefused}
	}
	a.stamp(a.env.Stdout, "Watching "+displayPath(file)+" — press Ctrl+C to stop")

	last := fingerprint(file)
	a.watchRegister(ctx, file)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			a.stamp(a.env.Stderr, watchGoneLine)
			return &exitError{code: ExitRefused}
		}
		if now := fingerprint(file); now != last {
			last = now
			a.watchRegister(ctx, file)
		}
	}
}

// watchRegister runs register's own path once and stamps what it printed:
// stdout when stored, stderr (with the refusal's line) when not.
func (a *app) watchRegister(ctx context.Context, file string) {
	var out bytes.Buffer
	b := *a
	b.env.Stdout = &out
	err := b.register(ctx, file, false)
	if ctx.Err() != nil {
		return // stopped mid-call: nothing to report
	}
	if err == nil {
		a.stamp(a.env.Stdout, out.String())
		return
	}
	text := out.String()
	var ee *exitError
	if errors.As(err, &ee) && ee.msg != "" {
		text += "\n" + ee.msg
	}
	a.stamp(a.env.Stderr, text)
}

// stamp writes each non-empty line of text to w behind `[<ISO-8601 UTC>] `.
func (a *app) stamp(w io.Writer, text string) {
	ts := "[" + a.env.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00") + "] "
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if strings.TrimSpace(l) != "" {
			fmt.Fprintln(w, ts+l)
		}
	}
}

// displayPath is path relative to the working folder when it lies under it.
func displayPath(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	rel, err := filepath.Rel(wd, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return abs
	}
	return rel
}

// fingerprint is the mtime and size of every file register would read for
// file — the workflow file, the agent profiles and context files it sends
// (source.Read's own list) — and of the profiles folder itself, so a profile
// added or removed counts as a change.
func fingerprint(file string) string {
	var b strings.Builder
	stat := func(p string) {
		fi, err := os.Stat(p)
		if err != nil {
			fmt.Fprintf(&b, "%s: missing\n", p)
			return
		}
		fmt.Fprintf(&b, "%s: %d %d\n", p, fi.ModTime().UnixNano(), fi.Size())
	}
	stat(file)
	src, err := source.Read(file)
	if err != nil {
		return b.String()
	}
	dir := filepath.Dir(file)
	var head struct {
		ProfilesDir string `yaml:"profiles_dir"`
	}
	_ = yaml.Unmarshal(src.GetYaml(), &head)
	if head.ProfilesDir == "" {
		head.ProfilesDir = source.DefaultProfilesDir
	}
	stat(source.Resolve(dir, head.ProfilesDir))
	rels := make([]string, 0, len(src.GetFiles()))
	for rel := range src.GetFiles() {
		rels = append(rels, rel)
	}
	sort.Strings(rels)
	for _, rel := range rels {
		stat(source.Resolve(dir, filepath.FromSlash(rel)))
	}
	return b.String()
}
