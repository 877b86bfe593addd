package replicas

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// toolChat is an OpenAI Chat Completions service that works through the
// invoice-notes example as a model would: it lists the notes, reads the
// invoice, then answers. Which turn it is comes from the tool messages the
// request carries, so a driver that drops a result is asked again for it.
type toolChat struct {
	mu   sync.Mutex
	told []string // each tool message's content, in the order received
	reqs int
}

func (c *toolChat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var results []string
	for _, m := range body.Messages {
		if m.Role == "tool" {
			s, _ := m.Content.(string)
			results = append(results, s)
		}
	}
	c.mu.Lock()
	c.reqs++
	c.told = results
	c.mu.Unlock()
	msg := map[string]any{"role": "assistant", "refusal": nil}
	finish := "tool_calls"
	call := func(id, name, args string) []any {
		return []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}}
	}
	switch len(results) {
	case 0:
		msg["content"], msg["tool_calls"] = nil, call("call_1", "list_notes", `{"prefix":"invoice"}`)
	case 1:
		msg["content"], msg["tool_calls"] = nil, call("call_2", "read_note", `{"name":"invoice-1042"}`)
	default:
		finish = "stop"
		msg["content"] = `{"answer":"Invoice 1042 totals 120 EUR.","total_eur":120,"sources":["invoice-1042"]}`
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
		"choices": []any{map[string]any{"index": 0, "finish_reason": finish, "logprobs": nil, "message": msg}},
		"usage":   map[string]any{"prompt_tokens": 60, "completion_tokens": 9, "total_tokens": 69},
	})
}

// TestRealmAgentDrivesTheToolExampleToCompletion runs the shipped
// examples/invoice-notes.yaml, unmodified, the way a user does after make
// run: agent-svc runs in a folder with bin/notes-mcp (the example's stdio
// command), and `realm agent --workflow examples/invoice-notes.yaml`
// drives it against a model (a stub of the OpenAI service, spoken to by
// the official SDK). The run completes, the model was told what the real
// notes server returned, and realm run inspect lists both tool calls.
func TestRealmAgentDrivesTheToolExampleToCompletion(t *testing.T) {
	t.Parallel()
	bins := buildBinaries(t)
	work := t.TempDir()
	build := exec.Command(goTool(), "build", "-o", filepath.Join(work, "bin", "notes-mcp"), "./services/notes-mcp/cmd/notes-mcp")
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build notes-mcp: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := redisURL()
	engineAddr := freeAddr(t)
	if _, err := startEngine(bins, "engine-svc", engineAddr, url, isolatedPrefix(t, url), time.Minute, t); err != nil {
		t.Fatal(err)
	}
	model := &toolChat{}
	stub := httptest.NewServer(model)
	t.Cleanup(stub.Close)
	agentAddr := freeAddr(t)
	env := append(os.Environ(), "OPENAI_API_KEY=test-key", "OPENAI_BASE_URL="+stub.URL)
	agent := &proc{name: "agent-svc", out: &syncBuffer{}, done: make(chan struct{}),
		cmd: exec.Command(bins.agent, "--addr", agentAddr, "--engine-addr", engineAddr, "--shutdown-grace", "1s")}
	agent.cmd.Dir, agent.cmd.Env = work, env // as make run starts it: next to bin/
	agent.cmd.Stdout, agent.cmd.Stderr = agent.out, agent.out
	if err := agent.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = agent.cmd.Wait(); close(agent.done) }()
	t.Cleanup(func() {
		agent.kill()
		if t.Failed() {
			t.Logf("--- output of agent-svc ---\n%s", tail(agent.out.String(), 4000))
		}
	})
	if err := awaitEngine(agent, "agent-svc", agentAddr); err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(ctx, bins.realm, "--addr", engineAddr, "agent",
		"--workflow", filepath.Join(repoRoot(t), "examples", "invoice-notes.yaml"),
		"--params", `{"question":"What is the total of invoice 1042?"}`,
		"--provider", "openai", "--model", "gpt-test", "--agent-addr", agentAddr)
	cmd.Env = append(os.Environ(), "REALM_OPERATOR=tool-example-test")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("realm agent: %v (exit 0 only when the run completed)\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	id := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`).FindString(stdout.String())
	if id == "" {
		t.Fatalf("realm agent printed no run id:\n%s", stdout.String())
	}

	model.mu.Lock()
	told, reqs := model.told, model.reqs
	model.mu.Unlock()
	if reqs != 3 || len(told) != 2 || told[0] != "invoice-1042\ninvoice-1043" || !strings.Contains(told[1], "total 120 EUR") {
		t.Errorf("the model made %d requests and was last told %q; want 3, the notes listed and invoice-1042 read", reqs, told)
	}
	inspect := realm(t, bins, engineAddr, "run", "inspect", id)
	for _, want := range []string{"completed", "Tool calls (2):", "[notes:list_notes]", "[notes:read_note]"} {
		if !strings.Contains(inspect, want) {
			t.Errorf("realm run inspect %s lacks %q:\n%s", id, want, inspect)
		}
	}
}
