package adapters_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/runner"
	"github.com/realm-go/realm/services/adapter-runner/adapters"
)

func mustCatalog(t *testing.T, fsRoot string) map[string]runner.Adapter {
	t.Helper()
	adps, err := adapters.Catalog(adapters.Options{}, fsRoot)
	if err != nil {
		t.Fatal(err)
	}
	return adps
}

func TestFilesystemReadsFilesBelowItsRoot(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	outside := t.TempDir()
	write := func(dir, name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write(root, "claim.txt", "Taxi 12.50\nHotel 80\n")
	secret := write(outside, "secret.txt", "no")
	if err := os.Symlink(secret, filepath.Join(root, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "dirlink")); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(root, secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rel, filepath.Join(root, "rel-link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	// The root may itself be reached through a symlink (macOS /var).
	realRoot, _ := filepath.EvalSymlinks(root)
	claim := filepath.Join(realRoot, "claim.txt")

	s := serve(t, mustCatalog(t, root))
	tests := []struct {
		name, method, op string
		params           map[string]any
		want             string
		wantCode         errcode.Code
	}{
		{"read", "fetch", "read", map[string]any{"path": claim},
			`{"data":{"content":"Taxi 12.50\nHotel 80\n","line_count":2,"path":"` + claim + `","size_bytes":20},"status":200}`, ""},
		{"a relative path", "fetch", "read", map[string]any{"path": "claim.txt"}, "", errcode.ValidationInputSchema},
		{"no path", "fetch", "read", map[string]any{}, "", errcode.ValidationInputSchema},
		{"a missing file", "fetch", "read", map[string]any{"path": filepath.Join(realRoot, "nope.txt")}, "", errcode.ResourceFetchFailed},
		{"a directory", "fetch", "read", map[string]any{"path": filepath.Join(realRoot, "dir")}, "", errcode.ResourceFetchFailed},
		{"a file outside the root", "fetch", "read", map[string]any{"path": secret}, "", errcode.ResourceFetchFailed},
		{"a symlink out of the root", "fetch", "read", map[string]any{"path": filepath.Join(realRoot, "link.txt")}, "", errcode.ResourceFetchFailed},
		{"a symlinked folder out of the root", "fetch", "read", map[string]any{"path": filepath.Join(realRoot, "dirlink", "secret.txt")}, "", errcode.ResourceFetchFailed},
		{"a relative symlink climbing out with '..'", "fetch", "read", map[string]any{"path": filepath.Join(realRoot, "rel-link.txt")}, "", errcode.ResourceFetchFailed},
		{"'..' out of the root", "fetch", "read", map[string]any{"path": filepath.Join(realRoot, "..", filepath.Base(outside), "secret.txt")}, "", errcode.ResourceFetchFailed},
		{"another operation", "fetch", "write", map[string]any{"path": claim}, "", errcode.AdapterOpUnsupported},
		{"another method", "create", "read", map[string]any{"path": claim}, "", errcode.AdapterOpUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, err := s.client.CallAdapter(context.Background(), &realmv1.CallAdapterRequest{
				Adapter: "filesystem", Method: tt.method, Operation: tt.op, Params: mustStruct(t, tt.params)})
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantCode != "" {
				if e := resp.GetError(); e.GetCode() != string(tt.wantCode) || e.GetRetryable() {
					t.Errorf("error = %s retryable %v (%s), want %s", e.GetCode(), e.GetRetryable(), e.GetMessage(), tt.wantCode)
				}
				return
			}
			if resp.GetError() != nil {
				t.Fatalf("error: %v", resp.GetError())
			}
			if got := asJSON(t, resp.GetData().AsInterface()); got != tt.want {
				t.Errorf("data = %s\nwant   %s", got, tt.want)
			}
		})
	}
}
