package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// mainPackages are the binaries of the repository: every <module>/cmd/<name>
// and services/<x>/cmd/<name> folder (as the Makefile's CMDS), so a new
// binary is covered without editing this file.
func mainPackages() ([]string, error) {
	var cmds []string
	for _, glob := range []string{"*/cmd/*/*.go", "*/*/cmd/*/*.go"} {
		files, err := filepath.Glob(filepath.Join(repoRoot, glob))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			rel, err := filepath.Rel(repoRoot, filepath.Dir(f))
			if err != nil {
				return nil, err
			}
			if !slices.Contains(cmds, rel) {
				cmds = append(cmds, rel)
			}
		}
	}
	slices.Sort(cmds)
	if len(cmds) == 0 {
		return nil, errors.New("no */cmd/* main packages found")
	}
	return cmds, nil
}

// built is every binary, built once for all of this package's tests: one
// go build of them all compiles each shared package once, where a build per
// test (or a go run per binary) did the work several times over and, on a
// cold cache on two busy cores, ran past its deadline.
var built struct {
	once sync.Once
	dir  string
	cmds []string
	err  error
}

// builtBinaries returns the folder holding every binary (named as its cmd
// folder) and their main packages.
func builtBinaries(t *testing.T) (string, []string) {
	t.Helper()
	built.once.Do(func() {
		built.cmds, built.err = mainPackages()
		if built.err != nil {
			return
		}
		built.dir, built.err = os.MkdirTemp("", "realm-deploy-bin-")
		if built.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
		defer cancel()
		args := []string{"build", "-o", built.dir + string(filepath.Separator)}
		for _, c := range built.cmds {
			args = append(args, "./"+c)
		}
		build := exec.CommandContext(ctx, "go", args...)
		build.Dir = repoRoot
		build.Env = helpEnv()
		if out, err := build.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir, built.cmds
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

var kebab = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

// TestEveryBinaryAnswersHelp builds every binary and checks that --help
// exits 0 and lists its flags: each one kebab-case, each flag the main
// package defines (but a testing-only one with an empty usage), and the
// environment variable each flag falls back to.
func TestEveryBinaryAnswersHelp(t *testing.T) {
	t.Parallel()
	bin, cmds := builtBinaries(t)

	for _, c := range cmds {
		name := filepath.Base(c)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(bin, name), "--help")
			cmd.Env = helpEnv()
			cmd.Dir = t.TempDir() // a binary that reads ./.env finds none
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s --help: %v (it must exit 0)\n%s", name, err, out.String())
			}
			help := out.String()
			listed := parseHelp(help)
			if len(listed) == 0 {
				t.Fatalf("%s --help lists no flags:\n%s", name, help)
			}
			for f := range listed {
				if len(f) > 1 && !kebab.MatchString(f) { // -h is cobra's
					t.Errorf("%s: flag -%s is not kebab-case", name, f)
				}
			}
			defined, envs := sourceFlags(t, filepath.Join(repoRoot, c))
			for _, f := range defined {
				if _, ok := listed[f]; !ok {
					t.Errorf("%s --help does not list -%s, which its main package defines", name, f)
				}
			}
			for _, e := range envs {
				if !strings.Contains(help, e) {
					t.Errorf("%s --help does not name %s, which a flag falls back to", name, e)
				}
			}
			if t.Failed() {
				t.Logf("%s --help:\n%s", name, help)
			}
		})
	}
}

// helpEnv is this process's environment less the variables that flags fall
// back to (they would replace the built-in defaults in the text; every REDIS_
// one, as make test sets REDIS_CLUSTER_ADDRS too) and
// GOWORK=off (which would hide the workspace the binaries build in).
func helpEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REALM_") && !strings.HasPrefix(kv, "REDIS_") && !strings.HasPrefix(kv, "GOWORK=") {
			env = append(env, kv)
		}
	}
	return env
}

// flagFuncs maps the flag package's defining calls to the index of the
// name among their arguments and their number of arguments.
var flagFuncs = map[string][2]int{
	"String": {0, 3}, "Bool": {0, 3}, "Int": {0, 3}, "Int64": {0, 3}, "Uint": {0, 3}, "Uint64": {0, 3},
	"Float64": {0, 3}, "Duration": {0, 3}, "Func": {0, 3}, "BoolFunc": {0, 3},
	"StringVar": {1, 4}, "BoolVar": {1, 4}, "IntVar": {1, 4}, "Int64Var": {1, 4}, "UintVar": {1, 4},
	"Uint64Var": {1, 4}, "Float64Var": {1, 4}, "DurationVar": {1, 4}, "TextVar": {1, 4}, "Var": {1, 3},
}

var envName = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$`)

// sourceFlags reads the flags a main package defines with the flag package
// (flag.X or a FlagSet's X, with a literal name), leaving out those with an
// empty usage (hidden, for tests), and the environment variables named by
// a literal in a flag's default (envOr("REALM_X", …), os.Getenv("X")), or
// by client.EngineAddr / client.EngineAddrEnv.
func sourceFlags(t *testing.T, dir string) (names, envs []string) {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			shape, ok := flagFuncs[sel.Sel.Name]
			if !ok || len(call.Args) != shape[1] {
				return true
			}
			name, ok := stringLit(call.Args[shape[0]])
			if !ok {
				return true
			}
			if usage, ok := stringLit(call.Args[len(call.Args)-1]); ok && usage == "" {
				return true // hidden: a testing-only flag
			}
			names = append(names, name)
			if sel.Sel.Name != "Var" && sel.Sel.Name != "Func" && sel.Sel.Name != "BoolFunc" {
				envs = append(envs, defaultEnvs(call.Args[shape[0]+1])...)
			}
			return true
		})
	}
	return names, envs
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// defaultEnvs are the environment variables a flag's default reads.
func defaultEnvs(def ast.Expr) []string {
	var envs []string
	ast.Inspect(def, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if s, ok := stringLit(n); ok && envName.MatchString(s) {
				envs = append(envs, s)
			}
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && x.Name == "client" && (n.Sel.Name == "EngineAddr" || n.Sel.Name == "EngineAddrEnv") {
				envs = append(envs, "REALM_ENGINE_ADDR")
			}
		}
		return true
	})
	return envs
}
