package command

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// envFor is a realm Env against the live engine with the given streams.
func envFor(l *live, stdin io.Reader, stdout, stderr io.Writer, vars map[string]string) Env {
	all := map[string]string{"REALM_ENGINE_ADDR": l.addr}
	for k, v := range vars {
		all[k] = v
	}
	return Env{Stdin: stdin, Stdout: stdout, Stderr: stderr, Getenv: func(k string) string { return all[k] }}
}

// toolNames lists a session's tools, sorted.
func toolNames(t *testing.T, s *mcp.ClientSession) []string {
	t.Helper()
	res, err := s.ListTools(l30s(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

func l30s(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var elevenTools = []string{"abandon_run", "advance_run", "append_trace", "create_workflow", "execute_step", "get_run_state",
	"get_workflow_protocol", "list_workflows", "start_run", "submit_human_response", "start_run_batch"}

// `realm mcp`: the 11 tools over stdio, a real MCP client on the other end
// of the pipes; the command ends with exit 0 when stdin closes.
func TestRealmMCPServesTheToolsOverStdio(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *live) {
		l.register("support")
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		var errb bytes.Buffer
		done := make(chan int, 1)
		go func() {
			code := Run(context.Background(), []string{"mcp"}, envFor(l, inR, outW, &errb, nil))
			_ = outW.Close()
			done <- code
		}()
		client := mcp.NewClient(&mcp.Implementation{Name: "cli-test", Version: "1"}, nil)
		s, err := client.Connect(l30s(t), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(elevenTools)
		slices.Sort(want)
		if got := toolNames(t, s); !slices.Equal(got, want) {
			t.Errorf("tools = %v, want %v", got, want)
		}
		res, err := s.CallTool(l30s(t), &mcp.CallToolParams{Name: "list_workflows", Arguments: map[string]any{}})
		if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"support"`) {
			t.Errorf("list_workflows: %v %+v", err, res)
		}
		_ = s.Close()
		_ = inW.Close()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("exit %d, stderr %q", code, errb.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatal("realm mcp did not end when stdin closed")
		}
	})
}

var listeningLine = regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)/`)

// `realm serve`: the tools over streamable HTTP; without a token it
// refuses to start unless --dev; Ctrl-C (the context) stops it with exit 0.
func TestRealmServeServesTheToolsOverHTTP(t *testing.T) {
	eachBackend(t, func(t *testing.T, l *live) {
		var errb bytes.Buffer
		if code := Run(context.Background(), []string{"serve", "--port", "0"}, envFor(l, nil, io.Discard, &errb, nil)); code != ExitRefused || errb.Len() == 0 {
			t.Errorf("without a token or --dev: exit %d, stderr %q", code, errb.String())
		}

		outR, outW := io.Pipe()
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		done := make(chan int, 1)
		go func() {
			code := Run(ctx, []string{"serve", "--port", "0", "--host", "127.0.0.1"}, envFor(l, nil, outW, io.Discard, map[string]string{"REALM_SERVE_TOKEN": "s3cret"}))
			_ = outW.Close()
			done <- code
		}()
		lines := bufio.NewScanner(outR)
		var printed []string
		var url string
		for url == "" && lines.Scan() {
			printed = append(printed, lines.Text())
			if m := listeningLine.FindStringSubmatch(lines.Text()); m != nil {
				url = m[1]
			}
		}
		go func() { _, _ = io.Copy(io.Discard, outR) }()
		if url == "" {
			t.Fatalf("no listening line: %q", printed)
		}
		if printed[0] != "Realm MCP server listening on "+url+"/" {
			t.Errorf("first line %q", printed[0])
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "cli-test", Version: "1"}, nil)
		hc := &bearer{token: "s3cret"}
		s, err := client.Connect(l30s(t), &mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: hc.client()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := toolNames(t, s); len(got) != 11 {
			t.Errorf("tools = %v", got)
		}
		_ = s.Close()
		stop()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("exit %d after the stop", code)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("realm serve did not stop")
		}
	})
}

// bearer is an HTTP client that sends Authorization: Bearer <token>.
type bearer struct{ token string }

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func (b *bearer) client() *http.Client { return &http.Client{Transport: b} }
