package apistub

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// GitHubToken is the token the GitHub stub accepts.
const GitHubToken = "ghp_stub_token"

// GitHub stands in for GitHub's REST API for repository octo/app: pull
// request 7 (three files; its description closes #12, octo/lib#3, #99,
// which does not exist, and #7, itself a pull request), issues 12 and octo/lib#3,
// their comments, review comments, README.md and docs/ at ref main or
// v1. A request without "Authorization: Bearer GitHubToken" is answered
// 401; an unknown path 404, as GitHub does.
type GitHub struct {
	stub
	mu     sync.Mutex
	prBody string
	nextID int
}

// GitHubComments is how many comments issue 12 has: more than one page
// of 100, so a reader must follow the pages.
const GitHubComments = 101

// NewGitHub starts the stub; it stops when the test ends.
func NewGitHub(t testing.TB) *GitHub {
	g := &GitHub{prBody: "Fixes #12 and closes octo/lib#3; resolves #99, fixes #7.", nextID: 900}
	g.startReading(t, g.serve)
	return g
}

// URL is the stub's base URL (the adapter's base_url).
func (g *GitHub) URL() string { return g.srv.URL }

// GitHubExample is get_pr_diff of octo/app#7 against stub.
func GitHubExample(stub *GitHub) Example {
	return Example{
		Adapter:   "github",
		Config:    map[string]any{"base_url": stub.URL(), "auth": map[string]any{"token": "${secret:GITHUB_TOKEN}"}},
		Env:       map[string]string{"GITHUB_TOKEN": GitHubToken},
		Method:    "fetch",
		Operation: "get_pr_diff",
		Params:    map[string]any{"repo": "octo/app", "pr_number": 7.0},
		Output: map[string]any{
			"diff_text":     GitHubDiff,
			"pr_title":      "Retry the ledger sync",
			"base_branch":   "main",
			"head_sha":      "6dcb09b5b57875f334f61aebed695e2e4193db5e",
			"files_changed": []any{"sync/ledger.go", "sync/ledger_test.go", "docs/logo.png"},
			"repo":          "octo/app",
		},
	}
}

// GitHubDiff is the diff_text of octo/app#7.
const GitHubDiff = `diff --git a/sync/ledger.go b/sync/ledger.go
--- a/sync/ledger.go
+++ b/sync/ledger.go
@@ -1,2 +1,3 @@
 package sync
+// Retry once.
diff --git a/sync/ledger_test.go b/sync/ledger_test.go
--- /dev/null
+++ b/sync/ledger_test.go
@@ -0,0 +1 @@
+package sync
diff --git a/img/logo.png b/docs/logo.png
(binary or too large: no patch shown)
`

var ghRoutes = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/(pulls|issues|contents)(?:/(\d+))?(/files|/comments|/labels)?(?:/(.*))?$`)

func (g *GitHub) serve(w http.ResponseWriter, r *http.Request, body []byte) {
	if r.Header.Get("Authorization") != "Bearer "+GitHubToken {
		ghAnswer(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
		return
	}
	m := ghRoutes.FindStringSubmatch(r.URL.Path)
	if m == nil {
		ghNotFound(w)
		return
	}
	repo, kind, num, sub, rest := m[1]+"/"+m[2], m[3], m[4], m[5], m[6]
	g.mu.Lock()
	defer g.mu.Unlock()
	switch key := r.Method + " " + kind + " " + num + " " + sub; {
	case repo == "octo/app" && key == "GET pulls 7 ":
		ghAnswer(w, 200, g.pull())
	case repo == "octo/app" && key == "PATCH pulls 7 ":
		var in struct{ Body string }
		if json.Unmarshal(body, &in) != nil {
			ghAnswer(w, 422, map[string]any{"message": "Problems parsing JSON"})
			return
		}
		g.prBody = in.Body
		ghAnswer(w, 200, g.pull())
	case repo == "octo/app" && key == "GET pulls 7 /files":
		ghPage(w, r, ghFiles)
	case repo == "octo/app" && key == "GET pulls 7 /comments":
		ghPage(w, r, []any{
			map[string]any{"id": 1, "path": "sync/ledger.go", "line": 2, "original_line": 2, "user": map[string]any{"login": "hubot"}, "body": "Why once?"},
			map[string]any{"id": 2, "path": "sync/ledger.go", "line": nil, "original_line": 9, "user": nil, "body": "Outdated."},
		})
	case repo == "octo/app" && key == "GET issues 12 ", repo == "octo/lib" && key == "GET issues 3 ":
		ghAnswer(w, 200, ghIssue(repo, num))
	case repo == "octo/app" && key == "GET issues 7 ":
		ghAnswer(w, 200, map[string]any{"number": 7, "title": "Retry the ledger sync", "pull_request": map[string]any{"url": "…"}})
	case repo == "octo/app" && key == "GET issues 12 /comments":
		comments := make([]any, GitHubComments)
		for i := range comments {
			comments[i] = map[string]any{"id": i + 1, "user": map[string]any{"login": fmt.Sprintf("user%d", i+1)}, "body": fmt.Sprintf("comment %d", i+1), "created_at": "2026-03-01T12:00:00Z"}
		}
		ghPage(w, r, comments)
	case repo == "octo/app" && r.Method == "POST" && (num == "12" || num == "7") && sub == "/comments":
		var in struct{ Body string }
		_ = json.Unmarshal(body, &in)
		g.nextID++
		ghAnswer(w, 201, map[string]any{"id": g.nextID, "body": in.Body, "user": map[string]any{"login": "realm-bot"},
			"html_url": fmt.Sprintf("https://github.com/octo/app/issues/%s#issuecomment-%d", num, g.nextID)})
	case repo == "octo/app" && r.Method == "POST" && (num == "12" || num == "7") && sub == "/labels":
		var in struct{ Labels []string }
		_ = json.Unmarshal(body, &in)
		for _, l := range in.Labels {
			if l != "bug" && l != "needs-review" {
				ghAnswer(w, 422, map[string]any{"message": "Validation Failed", "errors": []any{map[string]any{"resource": "Label", "field": "name", "code": "invalid"}}})
				return
			}
		}
		// The issue's labels afterwards: it had "bug".
		out := []any{map[string]any{"name": "bug", "color": "d73a4a"}}
		if slices.Contains(in.Labels, "needs-review") {
			out = append(out, map[string]any{"name": "needs-review", "color": "0e8a16"})
		}
		ghAnswer(w, 200, out)
	case repo == "octo/app" && kind == "contents" && r.Method == "GET":
		g.contents(w, r, rest)
	default:
		ghNotFound(w)
	}
}

func (g *GitHub) pull() map[string]any {
	return map[string]any{"number": 7, "title": "Retry the ledger sync", "body": g.prBody, "state": "open",
		"base": map[string]any{"ref": "main"}, "head": map[string]any{"ref": "retry", "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e"}}
}

func ghIssue(repo, num string) map[string]any {
	n, _ := strconv.Atoi(num)
	return map[string]any{"number": n, "title": "Ledger sync drops entries (" + repo + ")", "body": "Seen twice this week.", "state": "open",
		"labels": []any{map[string]any{"name": "bug"}}, "user": map[string]any{"login": "ada"}}
}

var ghFiles = []any{
	map[string]any{"filename": "sync/ledger.go", "status": "modified", "patch": "@@ -1,2 +1,3 @@\n package sync\n+// Retry once."},
	map[string]any{"filename": "sync/ledger_test.go", "status": "added", "patch": "@@ -0,0 +1 @@\n+package sync"},
	map[string]any{"filename": "docs/logo.png", "previous_filename": "img/logo.png", "status": "renamed"},
}

// GitHubReadme is README.md's text in octo/app.
const GitHubReadme = "# app\n\nSyncs the ledger. ✓\n"

func (g *GitHub) contents(w http.ResponseWriter, r *http.Request, path string) {
	ref := r.URL.Query().Get("ref")
	if ref != "" && ref != "main" && ref != "v1" {
		ghAnswer(w, 404, map[string]any{"message": "No commit found for the ref " + ref})
		return
	}
	enc := base64.StdEncoding.EncodeToString([]byte(GitHubReadme))
	switch path {
	case "README.md":
		// GitHub wraps the base64 at 60 characters.
		ghAnswer(w, 200, map[string]any{"type": "file", "encoding": "base64", "path": path, "content": enc[:20] + "\n" + enc[20:] + "\n"})
	case "docs":
		ghAnswer(w, 200, []any{map[string]any{"type": "file", "path": "docs/logo.png"}})
	case "big.bin":
		ghAnswer(w, 200, map[string]any{"type": "file", "encoding": "none", "path": path, "content": ""})
	default:
		ghNotFound(w)
	}
}

// ghPage answers the page of items that per_page and page ask for, with
// a Link header to the next page as GitHub does.
func ghPage(w http.ResponseWriter, r *http.Request, items []any) {
	per, err := strconv.Atoi(r.URL.Query().Get("per_page"))
	if err != nil || per <= 0 {
		per = 30
	}
	page, err := strconv.Atoi(r.URL.Query().Get("page"))
	if err != nil || page <= 0 {
		page = 1
	}
	from := min((page-1)*per, len(items))
	to := min(from+per, len(items))
	if to < len(items) {
		w.Header().Set("Link", fmt.Sprintf(`<%s?per_page=%d&page=%d>; rel="next"`, r.URL.Path, per, page+1))
	}
	ghAnswer(w, 200, items[from:to])
}

func ghNotFound(w http.ResponseWriter) {
	ghAnswer(w, 404, map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
}

func ghAnswer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
