package adapters

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/runner"
)

// DefaultMaxFileBytes bounds a file the filesystem adapter reads (its
// content travels back in one gRPC message).
const DefaultMaxFileBytes = 3 << 20

// Filesystem is the catalog's `filesystem` adapter (spec §13.3): fetch
// `read` with param `path` (absolute) → {content, path, line_count,
// size_bytes}. It takes no config. Unlike the original, which reads any
// path of its host, it reads only below its root: a runner's files (its
// environment under /proc among them) are not a workflow's to read.
type Filesystem struct {
	root     string
	maxBytes int64
}

// NewFilesystem returns the adapter confined to root (made absolute).
func NewFilesystem(root string) (*Filesystem, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, err
	}
	return &Filesystem{root: abs, maxBytes: DefaultMaxFileBytes}, nil
}

// Call reads one file.
func (f *Filesystem) Call(_ context.Context, call runner.AdapterCall) (any, error) {
	if call.Method != "fetch" {
		return nil, unsupported("Adapter 'filesystem' does not support service_method '%s'", call.Method)
	}
	if call.Operation != "read" {
		return nil, unsupported("Adapter 'filesystem' has no operation '%s' (it has: read)", call.Operation)
	}
	path, ok := call.Params["path"].(string)
	if !ok || path == "" {
		return nil, fail(errcode.ValidationInputSchema, map[string]any{"param": "path"}, "The filesystem adapter's 'read' needs param 'path': an absolute file path")
	}
	if !filepath.IsAbs(path) {
		return nil, fail(errcode.ValidationInputSchema, map[string]any{"param": "path", "path": path}, "Path '%s' is not absolute: the filesystem adapter reads absolute paths only", path)
	}
	rel, err := filepath.Rel(f.root, filepath.Clean(path))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, f.unreadable(path, "it is outside the adapter's root '"+f.root+"'", nil)
	}
	// os.Root refuses symlinks and '..' that lead out of the root.
	root, err := os.OpenRoot(f.root)
	if err != nil {
		return nil, f.unreadable(path, err.Error(), err)
	}
	defer root.Close()
	file, err := root.Open(rel)
	if err != nil {
		reason := err.Error()
		if errors.Is(err, fs.ErrNotExist) {
			reason = "no such file"
		}
		return nil, f.unreadable(path, reason, err)
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil {
		return nil, f.unreadable(path, err.Error(), err)
	}
	if info.IsDir() {
		return nil, f.unreadable(path, "it is a directory", nil)
	}
	raw, err := io.ReadAll(io.LimitReader(file, f.maxBytes+1))
	if err != nil {
		return nil, f.unreadable(path, err.Error(), err)
	}
	if int64(len(raw)) > f.maxBytes {
		return nil, fail(errcode.ResourceTooLarge, map[string]any{"path": path, "max_bytes": f.maxBytes}, "File '%s' is larger than %d bytes", path, f.maxBytes)
	}
	if !utf8.Valid(raw) {
		return nil, f.unreadable(path, "it is not UTF-8 text", nil)
	}
	content := string(raw)
	return map[string]any{"status": 200, "data": map[string]any{
		"content":    content,
		"path":       path,
		"line_count": lineCount(content),
		"size_bytes": len(raw),
	}}, nil
}

func (f *Filesystem) unreadable(path, reason string, err error) error {
	e := fail(errcode.ResourceFetchFailed, map[string]any{"path": path}, "Cannot read '%s': %s", path, reason)
	e.Err = err
	return e
}

// lineCount counts lines, the last one whether or not a newline ends it.
func lineCount(s string) int {
	if s == "" {
		return 0
	}
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}
