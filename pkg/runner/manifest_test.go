package runner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/realm-go/realm/pkg/handler"
	"github.com/realm-go/realm/pkg/runner"
)

// makeTotal is the contract's manifest factory: built once with its config.
type makeTotal struct{ handler.Handler }

func (makeTotal) Configure(id string, config map[string]any) (handler.Handler, error) {
	price, ok := config["unit_price"].(float64)
	if !ok {
		return nil, errors.New("config.unit_price must be a number")
	}
	return handler.Func(func(context.Context, handler.Inputs, handler.StepContext) (handler.Result, error) {
		return handler.Data(map[string]any{"total": 4 * price, "id": id}), nil
	}), nil
}

func writeManifest(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "realm.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadManifestBuildsTheHandlersItNames(t *testing.T) {
	t.Parallel()
	path := writeManifest(t, `version: 1
secrets:
  sources: [env]
handlers:
  order_total:
    use: makeTotal
    config:
      unit_price: 12.5
  ping:
    use: ok
`)
	regs, err := runner.LoadManifest(path, map[string]handler.Handler{"makeTotal": makeTotal{}, "ok": ok})
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 2 || regs[0].Name != "order_total" || regs[1].Name != "ping" {
		t.Fatalf("registrations %+v", regs)
	}
	for _, r := range regs {
		if r.Manifest != path {
			t.Errorf("%s: Manifest = %q, want %q", r.Name, r.Manifest, path)
		}
	}
	r, err := regs[0].Handler.Execute(context.Background(), handler.Inputs{}, handler.StepContext{})
	if err != nil {
		t.Fatal(err)
	}
	sameMap(t, r.Data, map[string]any{"total": 50.0, "id": "order_total"})
}

func sameMap(t *testing.T, got any, want map[string]any) {
	t.Helper()
	m, isMap := got.(map[string]any)
	if !isMap || len(m) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
}

func TestLoadManifestRefusesWhatItCannotServe(t *testing.T) {
	t.Parallel()
	registry := map[string]handler.Handler{"makeTotal": makeTotal{}, "ok": ok}
	tests := []struct {
		name string
		body string
		want string // the message after "Deployment manifest '<path>'"
	}{
		{"an empty file", ``, ` is invalid: manifest: must be object`},
		{"no version", "handlers: {}\n", ` is invalid: manifest: must have required property 'version'`},
		{"another version", "version: 2\n", ` is invalid: manifest/version: must be equal to constant`},
		{"an unknown top-level key", "version: 1\nextras: 1\n", ` is invalid: manifest: unknown key 'extras'`},
		{"an unknown entry key", "version: 1\nhandlers:\n  h:\n    use: ok\n    with: 1\n", ` is invalid: manifest/handlers/h: unknown key 'with'`},
		{"an entry without use", "version: 1\nhandlers:\n  h:\n    config: {}\n",
			`: handlers.h needs 'use:' — the name of a handler registered in this runner's code.`},
		{"a use nothing registered", "version: 1\nhandlers:\n  h:\n    use: nope\n",
			`: handlers.h — no handler 'nope' is registered in this runner's code. Available: makeTotal, ok.`},
		{"config for a handler that takes none", "version: 1\nhandlers:\n  h:\n    use: ok\n    config: {a: 1}\n",
			`: handlers.h — 'ok' takes no config (it is not a handler.Configurable); remove the 'config:' block.`},
		{"a factory that refuses its config", "version: 1\nhandlers:\n  h:\n    use: makeTotal\n    config: {unit_price: cheap}\n",
			`: constructing handlers.h (use: makeTotal) failed: config.unit_price must be a number`},
		{"a secret reference", "version: 1\nhandlers:\n  h:\n    use: makeTotal\n    config:\n      auth: {token: 'Bearer ${secret:BANK_KEY}'}\n",
			`: handlers.h.config.auth.token → ${secret:BANK_KEY}: secret references are not resolved by this runner; put the value in the config or read it from the environment in code.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeManifest(t, tt.body)
			_, err := runner.LoadManifest(path, registry)
			want := "Deployment manifest '" + path + "'" + tt.want
			if err == nil || err.Error() != want {
				t.Errorf("error:\n got %v\nwant %s", err, want)
			}
		})
	}
}

func TestLoadManifestReportsUnreadableFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		path       func(t *testing.T) string
		wantPrefix string
	}{
		{"a missing file", func(t *testing.T) string { return filepath.Join(t.TempDir(), "realm.yaml") }, "cannot be read: "},
		{"a file that is not YAML", func(t *testing.T) string { return writeManifest(t, "version: [1\n") }, "is not valid YAML: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := tt.path(t)
			_, err := runner.LoadManifest(path, nil)
			if want := "Deployment manifest '" + path + "' " + tt.wantPrefix; err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %v, want prefix %q", err, want)
			}
		})
	}
}

func TestAManifestEntryAndACodeHandlerOfOneNameAreRefused(t *testing.T) {
	t.Parallel()
	path := writeManifest(t, "version: 1\nhandlers:\n  order_total:\n    use: ok\n")
	fromManifest, err := runner.LoadManifest(path, map[string]handler.Handler{"ok": ok})
	if err != nil {
		t.Fatal(err)
	}
	regs := append([]runner.Registration{{Name: "order_total", Handler: ok, Source: "shop/handlers.go"}}, fromManifest...)
	err = runner.Serve(context.Background(), runner.Options{Logger: quietLogger()}, regs...)
	want := "Extension handler 'order_total' is declared by both 'shop/handlers.go' and the deployment manifest '" + path +
		"' — manifest entries and code-module exports share one namespace; names must be unique."
	if err == nil || err.Error() != want {
		t.Errorf("error:\n got %v\nwant %s", err, want)
	}
}
