package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// setup reads the real catalogue and renders it in memory.
func setup(t *testing.T) (goSrc, md []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "codes.json"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := parse(data)
	if err != nil {
		t.Fatalf("codes.json: %v", err)
	}
	goSrc, err = renderGo(entries)
	if err != nil {
		t.Fatal(err)
	}
	return goSrc, renderMarkdown(entries)
}

func TestGeneratedFilesAreCurrent(t *testing.T) {
	t.Parallel()
	goSrc, md := setup(t)
	files := []struct {
		path string
		want []byte
	}{
		{filepath.Join("..", "..", "codes_gen.go"), goSrc},
		{filepath.Join("..", "..", "..", "..", "docs", "error-codes.md"), md},
	}
	for _, f := range files {
		got, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.want) {
			t.Errorf("%s is stale versus codes.json; run `go generate ./...` in pkg/errcode", f.path)
		}
	}
}

func TestParseRejectsBadEntries(t *testing.T) {
	t.Parallel()
	const ok = `{"code": "STATE_RUN_NOT_FOUND", "category": "STATE", "agent_action": "report_to_user", "retryable": false, "raised": true, "grpc": "NOT_FOUND", "meaning": "No run."}`
	tests := []struct {
		name    string
		json    string
		wantErr string
	}{
		{"unknown category", strings.Replace(ok, `"STATE"`, `"STORAGE"`, 1), "unknown category"},
		{"unknown action", strings.Replace(ok, `"report_to_user"`, `"await"`, 1), "unknown agent_action"},
		{"also repeats default", strings.Replace(ok, `"retryable"`, `"also_actions": ["report_to_user"], "retryable"`, 1), "also_actions"},
		{"bad gRPC name", strings.Replace(ok, `"NOT_FOUND"`, `"MISSING"`, 1), "not a gRPC error code"},
		{"OK is not an error", strings.Replace(ok, `"NOT_FOUND"`, `"OK"`, 1), "not a gRPC error code"},
		{"empty meaning", strings.Replace(ok, `"No run."`, `""`, 1), "meaning"},
		{"pipe breaks the table", strings.Replace(ok, `"No run."`, `"a | b"`, 1), "meaning"},
		{"lower-case code", strings.Replace(ok, `"STATE_RUN_NOT_FOUND"`, `"state_run_not_found"`, 1), "UPPER_SNAKE_CASE"},
		{"unknown field", strings.Replace(ok, `"raised"`, `"rased"`, 1), "unknown field"},
		{"trailing data", ok + `]  [`, "trailing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parse([]byte("[" + tc.json + "]"))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parse error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestParseNamesEveryProblemAndDuplicates(t *testing.T) {
	t.Parallel()
	const row = `{"code": "STEP_TIMEOUT", "category": "ENGINE", "agent_action": "report_to_user", "retryable": false, "raised": true, "grpc": "DEADLINE_EXCEEDED", "meaning": "Too slow."}`
	bad := strings.Replace(row, `"ENGINE"`, `"X"`, 1)
	_, err := parse([]byte("[" + row + "," + bad + "]"))
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"duplicate code", "unknown category"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestGoName(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"VALIDATION_INPUT_SCHEMA": "ValidationInputSchema",
		"SERVICE_HTTP_4XX":        "ServiceHTTP4xx",
		"MCP_TOOL_NOT_FOUND":      "MCPToolNotFound",
		"NETWORK_DNS_FAILED":      "NetworkDNSFailed",
		"BUFFER_FULL":             "BufferFull",
		"wait_for_human":          "WaitForHuman",
	}
	for in, want := range tests {
		if got := goName(in); got != want {
			t.Errorf("goName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRenderedDocCountsMatchTheCatalogue(t *testing.T) {
	t.Parallel()
	_, md := setup(t)
	for _, want := range []string{"90 codes: 76 raised by Realm, 14 never raised.", "## Raised: STATE (25)", "## Never raised by Realm (14)"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("doc lacks %q", want)
		}
	}
}
