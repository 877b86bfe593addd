// Package toolstest is a real MCP server written with the go-sdk for the
// tests of tool-calling steps: served over stdio by the notes-mcp program
// it builds (Build), or over streamable HTTP in the test's own process
// (ServeHTTP).
package toolstest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// NoteArgs names a note.
type NoteArgs struct {
	Name string `json:"name" jsonschema:"the note's name"`
}

// SlowArgs is how long slow waits.
type SlowArgs struct {
	MS int `json:"ms" jsonschema:"milliseconds to wait"`
}

// RunArgs names a workflow to start.
type RunArgs struct {
	Workflow string `json:"workflow"`
}

// Empty takes nothing.
type Empty struct{}

// Notes is the notes server: read_note, search, slow, fail, leak (returns
// the NOTES_TOKEN it was started with), pid (its process id) and
// start_run (a fan-out tool by name).
func Notes() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	text := func(t string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: t}}}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "read_note", Description: "Read a note by name."},
		func(_ context.Context, _ *mcp.CallToolRequest, a NoteArgs) (*mcp.CallToolResult, any, error) {
			return text(fmt.Sprintf("note %s: the invoice total is 120", a.Name)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "search", Description: "Search the notes."},
		func(_ context.Context, _ *mcp.CallToolRequest, a NoteArgs) (*mcp.CallToolResult, any, error) {
			return text(fmt.Sprintf(`{"hits":["%s-1","%s-2"]}`, a.Name, a.Name)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Wait, then answer."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a SlowArgs) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(a.MS) * time.Millisecond):
				return text("done"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *mcp.CallToolRequest, Empty) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("the notes backend refused the request")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "leak", Description: "Shows its token."},
		func(context.Context, *mcp.CallToolRequest, Empty) (*mcp.CallToolResult, any, error) {
			return text("token is " + os.Getenv("NOTES_TOKEN")), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "The server's process id."},
		func(context.Context, *mcp.CallToolRequest, Empty) (*mcp.CallToolResult, any, error) {
			return text(fmt.Sprint(os.Getpid())), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "start_run", Description: "Start a workflow run."},
		func(context.Context, *mcp.CallToolRequest, RunArgs) (*mcp.CallToolResult, any, error) {
			return text("started " + "run-of-" + "x"), nil, nil
		})
	return s
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// Build compiles the notes-mcp program once per test binary and returns
// its path.
func Build(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "notes-mcp-")
		if err != nil {
			buildErr = err
			return
		}
		_, here, _, _ := runtime.Caller(0)
		built = filepath.Join(dir, "notes-mcp")
		cmd := exec.Command("go", "build", "-o", built, ".")
		cmd.Dir = filepath.Join(filepath.Dir(here), "notes-mcp")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build notes-mcp: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// ServeHTTP serves the notes server over streamable HTTP on 127.0.0.1;
// when token is set, requests must carry `Authorization: Bearer <token>`.
func ServeHTTP(t testing.TB, token string) string {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return Notes() }, &mcp.StreamableHTTPOptions{Stateless: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
