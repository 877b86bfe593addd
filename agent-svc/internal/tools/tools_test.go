package tools_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/realm-go/realm/agent-svc/internal/tools"
	"github.com/realm-go/realm/agent-svc/internal/tools/toolstest"
	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/workflow"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func envOf(kv ...string) tools.Env {
	return func(name string) (string, bool) {
		for _, e := range kv {
			if k, v, ok := strings.Cut(e, "="); ok && k == name {
				return v, true
			}
		}
		return "", false
	}
}

// setup is a pool of the stdio notes server ("notes") and the HTTP one
// ("web", token "http-secret").
func setup(t *testing.T, env tools.Env) *tools.Pool {
	t.Helper()
	bin := toolstest.Build(t)
	url := toolstest.ServeHTTP(t, "http-secret")
	p := tools.NewPool([]workflow.MCPServer{
		{ID: "notes", Transport: "stdio", Command: bin, Env: map[string]string{"NOTES_TOKEN": "${NOTES_TOKEN}"}},
		{ID: "web", Transport: "http", URL: url, Headers: map[string]string{"Authorization": "Bearer ${WEB_TOKEN}"}},
	}, env)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func codeOf(err error) errcode.Code {
	var te *tools.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return ""
}

func TestDiscoveryAndRefusals(t *testing.T) {
	t.Parallel()
	full := envOf("NOTES_TOKEN=notes-secret", "WEB_TOKEN=http-secret", "PATH=/usr/bin:/bin")
	tests := []struct {
		name     string
		env      tools.Env
		declared []string
		code     errcode.Code
		msg      string
		names    []string
	}{
		{name: "declared tools of both transports are kept in order", env: full,
			declared: []string{"web:search", "notes:read_note"}, names: []string{"search", "read_note"}},
		{name: "a tool the server lacks", env: full, declared: []string{"notes:read_pdf"}, code: errcode.MCPToolNotFound,
			msg: "Step 'answer' declares tool 'notes:read_pdf' which is not exposed by MCP server 'notes'. Check the tool name against the server's published tool list."},
		{name: "one bare name from two servers", env: full, declared: []string{"notes:read_note", "web:read_note"}, code: errcode.MCPToolNameCollision,
			msg: "Step 'answer' declares tool 'read_note' from both MCP server 'notes' and MCP server 'web'."},
		{name: "an unset env var", env: envOf("WEB_TOKEN=http-secret"), declared: []string{"notes:read_note"}, code: errcode.MCPConnectionFailed,
			msg: "MCP server 'notes': env var NOTES_TOKEN is not set"},
		{name: "an unset header var", env: envOf("NOTES_TOKEN=x"), declared: []string{"web:search"}, code: errcode.MCPConnectionFailed,
			msg: "MCP server 'web': env var WEB_TOKEN is not set"},
		{name: "a wrong header is a connection failure", env: envOf("WEB_TOKEN=wrong"), declared: []string{"web:search"}, code: errcode.MCPConnectionFailed,
			msg: "MCP server 'web': cannot connect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := setup(t, tt.env)
			set, err := p.Discover(ctx(t), "answer", tt.declared)
			if tt.code != "" {
				if codeOf(err) != tt.code || !strings.HasPrefix(err.Error(), tt.msg) {
					t.Fatalf("err = %v (%s), want %s %q", err, codeOf(err), tt.code, tt.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range set.Tools() {
				names = append(names, tool.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.names, ",") {
				t.Fatalf("tools %v, want %v", names, tt.names)
			}
		})
	}
}

func TestAVariableTheDriverKeepsIsNeverRead(t *testing.T) {
	t.Parallel()
	p := tools.NewPool([]workflow.MCPServer{{ID: "web", Transport: "http", URL: "http://127.0.0.1:1/mcp",
		Headers: map[string]string{"X-Key": "${ANTHROPIC_API_KEY}"}}}, envOf("ANTHROPIC_API_KEY=sk-ant-secret"))
	p.Readable = func(name string) bool { return name != "ANTHROPIC_API_KEY" }
	_, err := p.Discover(ctx(t), "answer", []string{"web:search"})
	want := "MCP server 'web': env var ANTHROPIC_API_KEY may not be read by tools (the driver keeps it for itself; see REALM_AGENT_TOOL_ENV)"
	if codeOf(err) != errcode.MCPConnectionFailed || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if len(p.Secrets()) != 0 {
		t.Fatalf("the kept value was read: %v", p.Secrets())
	}
}

func TestCallsReachBothTransports(t *testing.T) {
	t.Parallel()
	p := setup(t, envOf("NOTES_TOKEN=notes-secret", "WEB_TOKEN=http-secret"))
	set, err := p.Discover(ctx(t), "answer", []string{"notes:read_note", "notes:fail", "web:search"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := set.Call(ctx(t), "read_note", map[string]any{"name": "a"}); err != nil || got != "note a: the invoice total is 120" {
		t.Fatalf("read_note = %q, %v", got, err)
	}
	if got, err := set.Call(ctx(t), "search", map[string]any{"name": "q"}); err != nil || got != `{"hits":["q-1","q-2"]}` {
		t.Fatalf("search = %q, %v", got, err)
	}
	if _, err := set.Call(ctx(t), "fail", nil); err == nil || !strings.Contains(err.Error(), "the notes backend refused the request") {
		t.Fatalf("fail = %v", err)
	}
	if s, ok := set.Lookup("search"); !ok || s.Server != "web" {
		t.Fatalf("search maps back to %q", s.Server)
	}
	if secrets := p.Secrets(); len(secrets) != 2 {
		t.Fatalf("secrets %v, want the two expanded tokens", secrets)
	}
}

func TestCloseStopsTheStdioServer(t *testing.T) {
	t.Parallel()
	bin := toolstest.Build(t)
	p := tools.NewPool([]workflow.MCPServer{{ID: "notes", Transport: "stdio", Command: bin}}, envOf())
	set, err := p.Discover(ctx(t), "answer", []string{"notes:pid"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := set.Call(ctx(t), "pid", nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(out)
	if !Alive(pid) {
		t.Fatalf("server %d not running", pid)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if Alive(pid) {
		t.Fatalf("server %d still running after Close", pid)
	}
	if _, err := set.Call(ctx(t), "pid", nil); codeOf(err) != errcode.MCPConnectionFailed {
		t.Fatalf("call after Close = %v", err)
	}
}

// Alive reports whether process pid runs (a zombie, which nobody may
// reap in a container, has ended).
func Alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// holderEnv, when set, makes the test binary a driver that holds a stdio
// server (the path it names) and waits to be killed.
const holderEnv = "TOOLS_TEST_HOLD_SERVER"

func TestMain(m *testing.M) {
	if bin := os.Getenv(holderEnv); bin != "" {
		hold(bin)
		return
	}
	os.Exit(m.Run())
}

func hold(bin string) {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := tools.NewPool([]workflow.MCPServer{{ID: "notes", Transport: "stdio", Command: bin}}, os.LookupEnv)
	set, err := p.Discover(c, "answer", []string{"notes:pid"})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	out, err := set.Call(c, "pid", nil)
	fmt.Println(out, err)
	<-c.Done()
}

func TestAStdioServerDiesWithAKilledDriver(t *testing.T) {
	t.Parallel()
	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), holderEnv+"="+toolstest.Build(t))
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	pid, _ := strconv.Atoi(strings.Fields(line + " x")[0])
	if !Alive(pid) {
		_ = holder.Process.Kill()
		t.Fatalf("no stdio server held: %q", line)
	}
	_ = holder.Process.Kill() // SIGKILL: nothing of the driver runs after it
	_ = holder.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for Alive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if Alive(pid) {
		t.Fatalf("stdio server %d outlived its killed driver", pid)
	}
}
