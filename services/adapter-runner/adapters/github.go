package adapters

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/runner"
)

// NameGitHub is the catalog name of the GitHub adapter.
const NameGitHub = "github"

// githubPerPage and githubMaxPages bound the list operations: GitHub's
// largest page, and 30 of them (3,000 items, GitHub's own cap on a pull
// request's files).
const (
	githubPerPage  = 100
	githubMaxPages = 30
	// githubMaxLinked bounds the issues get_linked_issues fetches.
	githubMaxLinked = 25
)

// GitHub is the catalog's `github` adapter (spec §13.3): the REST API of
// github.com or of a GitHub Enterprise Server (base_url).
//
// It speaks through the shared api layer rather than go-github: several
// operations return GitHub's JSON as it came (get_issue, post_comment,
// apply_labels, get_linked_issues), which go-github's typed structs would
// re-encode with only the fields they model; go-github also keeps its own
// rate-limit state and refuses requests locally until a reset, a second
// rate-limit policy beside the runner's bucket and 429 waits; and it
// consumes error bodies, so §13.4 would need a second mapping. The eight
// operations are ten plain REST requests.
type GitHub struct {
	api *api
	ops ops
}

// githubKeys are a manifest entry's config keys.
var githubKeys = []string{"auth", "base_url"}

// newGitHub builds the adapter from its manifest config:
// auth.token (optional: public repositories need none) and base_url.
func newGitHub(name string, config map[string]any, opts Options) (runner.Adapter, error) {
	s, err := readSettings(config, githubKeys...)
	if err != nil {
		return nil, err
	}
	base, err := s.baseURL("https://api.github.com")
	if err != nil {
		return nil, err
	}
	header := http.Header{
		"Accept":               {"application/vnd.github+json"},
		"X-Github-Api-Version": {"2022-11-28"},
		// GitHub refuses requests without a User-Agent.
		"User-Agent": {"realm-adapter-runner"},
	}
	auth, err := s.object("auth", false)
	if err != nil {
		return nil, err
	}
	if auth != nil {
		a, err := readSettings(auth, "token")
		if err != nil {
			return nil, fmt.Errorf("config.auth: %w", err)
		}
		token, err := a.text("token", true, "")
		if err != nil {
			return nil, fmt.Errorf("config.auth: %w", err)
		}
		header.Set("Authorization", "Bearer "+token)
	}
	a, err := newAPI(name, base, header, opts, rules{
		notFound: errcode.ServiceHTTP4xx, notFoundAction: errcode.ActionStop,
		// GitHub: with no retry-after and no reset, "wait for at least one
		// minute before retrying".
		defaultRetryAfter: githubDefaultWait,
	})
	if err != nil {
		return nil, err
	}
	a.client.Transport = githubLimits{next: a.client.Transport, now: a.opts.Limiters.Clock().Now}
	g := &GitHub{api: a}
	g.ops = ops{
		"fetch": {
			"get_pr_diff":            g.getPRDiff,
			"get_issue":              g.getIssue,
			"get_issue_comments":     g.getIssueComments,
			"get_linked_issues":      g.getLinkedIssues,
			"get_file_contents":      g.getFileContents,
			"get_pr_review_comments": g.getPRReviewComments,
		},
		"create": {"post_comment": g.postComment, "apply_labels": g.applyLabels},
		"update": {"set_pr_description": g.setPRDescription},
	}
	return g, nil
}

// Call runs one operation; an unknown one is ENGINE_ADAPTER_FAILED (spec
// §13.4's exception for github) which, like every local failure, says
// stop.
func (g *GitHub) Call(ctx context.Context, call runner.AdapterCall) (any, error) {
	out, err := g.ops.dispatch(ctx, g.api.name, errcode.EngineAdapterFailed, call)
	if we := asWorkflowError(err); we != nil && we.Code == errcode.EngineAdapterFailed {
		we.AgentAction = errcode.ActionStop
	}
	return out, err
}

// ghUser is an author; null for a deleted account, which GitHub shows as
// "ghost".
type ghUser struct {
	Login string `json:"login"`
}

func (u *ghUser) login() string {
	if u == nil {
		return "ghost"
	}
	return u.Login
}

type ghPull struct {
	Title string  `json:"title"`
	Body  *string `json:"body"`
	Base  struct {
		Ref string `json:"ref"`
	} `json:"base"`
	Head struct {
		SHA string `json:"sha"`
	} `json:"head"`
}

type ghFile struct {
	Filename         string  `json:"filename"`
	PreviousFilename string  `json:"previous_filename"`
	Status           string  `json:"status"`
	Patch            *string `json:"patch"`
}

// ghTarget is the repository and number an operation is about.
type ghTarget struct {
	repo   string // owner/name, as given
	path   string // repos/{owner}/{name}, escaped
	number int64
	kind   string // "pr" or "issue", for the 404 hint
}

// ghTargetOf reads repo and the number param key.
func ghTargetOf(p args, key, kind string) (ghTarget, error) {
	repo, err := p.text("repo", true)
	if err != nil {
		return ghTarget{}, err
	}
	path, err := ghRepoPath(repo)
	if err != nil {
		return ghTarget{}, err
	}
	n, _, err := p.integer(key, true)
	if err != nil {
		return ghTarget{}, err
	}
	if n <= 0 {
		return ghTarget{}, invalid("param '%s' must be a positive number", key)
	}
	return ghTarget{repo: repo, path: path, number: n, kind: kind}, nil
}

// ghRepoPath is repos/{owner}/{name} for "owner/name". A segment "." or
// ".." is refused: it would move the request to another API path.
func ghRepoPath(repo string) (string, error) {
	parts := strings.Split(repo, "/")
	if len(parts) != 2 || !ghSegment(parts[0]) || !ghSegment(parts[1]) {
		return "", invalid("param 'repo' must be 'owner/name', not '%s'", repo)
	}
	return "repos/" + url.PathEscape(parts[0]) + "/" + url.PathEscape(parts[1]), nil
}

func ghSegment(s string) bool {
	return strings.TrimSpace(s) != "" && s != "." && s != ".."
}

// notFound adds to a 404 what it may mean: GitHub answers 404, not 403,
// for a private repository the token cannot see.
func (t ghTarget) notFound(err error) error {
	we := asWorkflowError(err)
	if we == nil || we.Code != errcode.ServiceHTTP4xx || we.Details["status"] != http.StatusNotFound {
		return err
	}
	noun, cmd := "pull request", "gh pr view"
	if t.kind == "issue" {
		noun, cmd = "issue", "gh issue view"
	}
	we.Message += fmt.Sprintf(". Either repository '%s' or %s #%d does not exist, or the token cannot see the repository (GitHub answers 404 for a private repository it may not read). Check with: %s %d --repo %s",
		t.repo, noun, t.number, cmd, t.number, t.repo)
	return we
}

func (g *GitHub) get(ctx context.Context, config map[string]any, path string, query url.Values, out any) (answer, error) {
	return g.api.call(ctx, config, request{method: http.MethodGet, path: path, query: query}, out)
}

// ghList reads every page of a list endpoint (up to githubMaxPages).
func ghList[T any](ctx context.Context, g *GitHub, config map[string]any, path string) ([]T, int, error) {
	var all []T
	status := http.StatusOK
	for page := 1; page <= githubMaxPages; page++ {
		var items []T
		q := url.Values{"per_page": {strconv.Itoa(githubPerPage)}, "page": {strconv.Itoa(page)}}
		resp, err := g.get(ctx, config, path, q, &items)
		if err != nil {
			return nil, 0, err
		}
		status = resp.status
		all = append(all, items...)
		if len(items) < githubPerPage {
			break
		}
	}
	return all, status, nil
}

// getPRDiff is the pull request's metadata and its files' patches as one
// unified diff.
func (g *GitHub) getPRDiff(ctx context.Context, call runner.AdapterCall) (any, error) {
	t, err := ghTargetOf(call.Params, "pr_number", "pr")
	if err != nil {
		return nil, err
	}
	pr := fmt.Sprintf("%s/pulls/%d", t.path, t.number)
	var meta ghPull
	resp, err := g.get(ctx, call.Config, pr, nil, &meta)
	if err != nil {
		return nil, t.notFound(err)
	}
	files, _, err := ghList[ghFile](ctx, g, call.Config, pr+"/files")
	if err != nil {
		return nil, t.notFound(err)
	}
	sections, names := make([]string, 0, len(files)), make([]any, 0, len(files))
	for _, f := range files {
		sections = append(sections, f.diff())
		names = append(names, f.Filename)
	}
	return reply(resp.status, map[string]any{
		"diff_text": strings.Join(sections, ""), "pr_title": meta.Title, "base_branch": meta.Base.Ref,
		"head_sha": meta.Head.SHA, "files_changed": names, "repo": t.repo,
	}), nil
}

// diff is the file's section of a unified diff; GitHub gives no patch for
// a binary file or one too large to show.
func (f ghFile) diff() string {
	from, to := "a/"+f.Filename, "b/"+f.Filename
	if f.PreviousFilename != "" {
		from = "a/" + f.PreviousFilename
	}
	head := fmt.Sprintf("diff --git %s %s\n", from, to)
	switch f.Status {
	case "added":
		from = "/dev/null"
	case "removed":
		to = "/dev/null"
	}
	if f.Patch == nil {
		return head + "(binary or too large: no patch shown)\n"
	}
	return head + "--- " + from + "\n+++ " + to + "\n" + strings.TrimSuffix(*f.Patch, "\n") + "\n"
}

// getIssue is GitHub's issue object as it came.
func (g *GitHub) getIssue(ctx context.Context, call runner.AdapterCall) (any, error) {
	t, err := ghTargetOf(call.Params, "issue_number", "issue")
	if err != nil {
		return nil, err
	}
	var issue map[string]any
	resp, err := g.get(ctx, call.Config, fmt.Sprintf("%s/issues/%d", t.path, t.number), nil, &issue)
	if err != nil {
		return nil, t.notFound(err)
	}
	return reply(resp.status, issue), nil
}

// getIssueComments is every comment as {author, body, created_at}.
func (g *GitHub) getIssueComments(ctx context.Context, call runner.AdapterCall) (any, error) {
	t, err := ghTargetOf(call.Params, "issue_number", "issue")
	if err != nil {
		return nil, err
	}
	type comment struct {
		User      *ghUser `json:"user"`
		Body      string  `json:"body"`
		CreatedAt string  `json:"created_at"`
	}
	raw, status, err := ghList[comment](ctx, g, call.Config, fmt.Sprintf("%s/issues/%d/comments", t.path, t.number))
	if err != nil {
		return nil, t.notFound(err)
	}
	out := make([]any, 0, len(raw))
	for _, c := range raw {
		out = append(out, map[string]any{"author": c.User.login(), "body": c.Body, "created_at": c.CreatedAt})
	}
	return reply(status, out), nil
}

// getPRReviewComments is every inline review comment as {file, line,
// author, body}; line is the comment's line, else its original line (an
// outdated comment), else 0.
func (g *GitHub) getPRReviewComments(ctx context.Context, call runner.AdapterCall) (any, error) {
	t, err := ghTargetOf(call.Params, "pr_number", "pr")
	if err != nil {
		return nil, err
	}
	type comment struct {
		Path         string  `json:"path"`
		Line         *int64  `json:"line"`
		OriginalLine *int64  `json:"original_line"`
		User         *ghUser `json:"user"`
		Body         string  `json:"body"`
	}
	raw, status, err := ghList[comment](ctx, g, call.Config, fmt.Sprintf("%s/pulls/%d/comments", t.path, t.number))
	if err != nil {
		return nil, t.notFound(err)
	}
	out := make([]any, 0, len(raw))
	for _, c := range raw {
		line := int64(0)
		if c.Line != nil {
			line = *c.Line
		} else if c.OriginalLine != nil {
			line = *c.OriginalLine
		}
		out = append(out, map[string]any{"file": c.Path, "line": line, "author": c.User.login(), "body": c.Body})
	}
	return reply(status, out), nil
}

// ghClosing finds the closing references in a pull request's description
// ("Fixes #12", "closes octo/other#3"): the links GitHub's REST API shows.
var ghClosing = regexp.MustCompile(`(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+([\w.-]+/[\w.-]+)?#(\d+)\b`)

// getLinkedIssues is the issues the pull request's description closes,
// each GitHub's issue object. A reference that names no issue (a 404, or
// another pull request) is not a link and is left out.
func (g *GitHub) getLinkedIssues(ctx context.Context, call runner.AdapterCall) (any, error) {
	t, err := ghTargetOf(call.Params, "pr_number", "pr")
	if err != nil {
		return nil, err
	}
	var meta ghPull
	resp, err := g.get(ctx, call.Config, fmt.Sprintf("%s/pulls/%d", t.path, t.number), nil, &meta)
	if err != nil {
		return nil, t.notFound(err)
	}
	out, seen := []any{}, map[string]bool{}
	body := ""
	if meta.Body != nil {
		body = *meta.Body
	}
	for _, m := range ghClosing.FindAllStringSubmatch(body, -1) {
		repoPath := t.path
		if m[1] != "" {
			if repoPath, err = ghRepoPath(m[1]); err != nil {
				continue
			}
		}
		path := repoPath + "/issues/" + m[2]
		if seen[path] || len(seen) >= githubMaxLinked {
			continue
		}
		seen[path] = true
		var issue map[string]any
		if _, err := g.get(ctx, call.Config, path, nil, &issue); err != nil {
			if we := asWorkflowError(err); we != nil && we.Details["status"] == http.StatusNotFound {
				continue
			}
			return nil, err
		}
		if _, isPR := issue["pull_request"]; !isPR {
			out = append(out, issue)
		}
	}
	return reply(resp.status, out), nil
}

// getFileContents is a file's UTF-8 text at ref (default: the default
// branch).
func (g *GitHub) getFileContents(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	repo, err := p.text("repo", true)
	if err != nil {
		return nil, err
	}
	repoPath, err := ghRepoPath(repo)
	if err != nil {
		return nil, err
	}
	file, err := p.text("path", true)
	if err != nil {
		return nil, err
	}
	ref, err := p.text("ref", false)
	if err != nil {
		return nil, err
	}
	segments := strings.Split(strings.Trim(file, "/"), "/")
	for i, s := range segments {
		if !ghSegment(s) {
			return nil, invalid("param 'path' '%s' must be a path inside the repository (no empty, '.' or '..' segments)", file)
		}
		segments[i] = url.PathEscape(s)
	}
	var q url.Values
	if ref != "" {
		q = url.Values{"ref": {ref}}
	}
	var raw json.RawMessage
	resp, err := g.get(ctx, call.Config, repoPath+"/contents/"+strings.Join(segments, "/"), q, &raw)
	if err != nil {
		if we := asWorkflowError(err); we != nil && we.Details["status"] == http.StatusNotFound {
			we.Message += fmt.Sprintf(". Check that '%s' exists in %s at ref '%s' and that the token can read the repository", file, repo, cmpOr(ref, "the default branch"))
		}
		return nil, err
	}
	if strings.HasPrefix(strings.TrimSpace(string(raw)), "[") {
		return nil, fail(errcode.EngineAdapterFailed, map[string]any{"path": file}, "'%s' in %s is a directory, not a file", file, repo)
	}
	var c struct {
		Type, Encoding, Content string
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fail(errcode.ServiceResponseInvalid, map[string]any{"path": file}, "GitHub's answer for '%s' is not a contents object: %v", file, err)
	}
	switch {
	case c.Type != "file":
		return nil, fail(errcode.EngineAdapterFailed, map[string]any{"path": file, "type": c.Type}, "'%s' in %s is a %s, not a file", file, repo, c.Type)
	case c.Encoding == "none":
		return nil, fail(errcode.EngineAdapterFailed, map[string]any{"path": file}, "'%s' in %s is larger than the 1 MB GitHub's contents API returns", file, repo)
	case c.Encoding != "base64":
		return nil, fail(errcode.EngineAdapterFailed, map[string]any{"path": file, "encoding": c.Encoding}, "'%s' came in an encoding the adapter does not read: '%s'", file, c.Encoding)
	}
	text, err := base64.StdEncoding.DecodeString(strings.NewReplacer("\n", "", "\r", "").Replace(c.Content))
	if err != nil {
		return nil, fail(errcode.ServiceResponseInvalid, map[string]any{"path": file}, "'%s': GitHub's base64 content does not decode: %v", file, err)
	}
	if !utf8.Valid(text) {
		return nil, fail(errcode.EngineAdapterFailed, map[string]any{"path": file}, "'%s' in %s is not UTF-8 text", file, repo)
	}
	return reply(resp.status, map[string]any{"path": file, "content": string(text)}), nil
}

// cmpOr is s, or def when s is empty.
func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ghIssueTarget reads issue_number or pr_number (the Issues API takes
// either); one of them, not both.
func ghIssueTarget(p args) (ghTarget, error) {
	_, hasIssue := p["issue_number"]
	_, hasPR := p["pr_number"]
	switch {
	case hasIssue && hasPR:
		return ghTarget{}, invalid("give param 'issue_number' or 'pr_number', not both")
	case hasPR:
		return ghTargetOf(p, "pr_number", "pr")
	case hasIssue:
		return ghTargetOf(p, "issue_number", "issue")
	}
	return ghTarget{}, invalid("param 'issue_number' or 'pr_number' is required")
}

// postComment comments on an issue or a pull request; GitHub's comment
// as it came. A network failure is not retried: the comment may have
// been posted.
func (g *GitHub) postComment(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	t, err := ghIssueTarget(p)
	if err != nil {
		return nil, err
	}
	body, err := p.text("body", true)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	resp, err := g.api.call(ctx, call.Config, request{method: http.MethodPost, path: fmt.Sprintf("%s/issues/%d/comments", t.path, t.number),
		body: map[string]any{"body": body}, once: true}, &out)
	if err != nil {
		return nil, t.notFound(err)
	}
	return reply(resp.status, out), nil
}

// applyLabels adds existing labels to an issue or a pull request (adding
// one twice changes nothing, so it is retried like a read); GitHub's
// labels array as it came.
func (g *GitHub) applyLabels(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	t, err := ghIssueTarget(p)
	if err != nil {
		return nil, err
	}
	labels, err := p.texts("labels", true)
	if err != nil {
		return nil, err
	}
	if len(labels) == 0 {
		return nil, invalid("param 'labels' must name at least one label")
	}
	var out []any
	resp, err := g.api.call(ctx, call.Config, request{method: http.MethodPost, path: fmt.Sprintf("%s/issues/%d/labels", t.path, t.number),
		body: map[string]any{"labels": labels}}, &out)
	if err != nil {
		return nil, t.notFound(err)
	}
	return reply(resp.status, out), nil
}

// setPRDescription replaces a pull request's body ("" clears it):
// {ok, body} with the body as GitHub stored it.
func (g *GitHub) setPRDescription(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	t, err := ghTargetOf(p, "pr_number", "pr")
	if err != nil {
		return nil, err
	}
	if _, has := p["body"]; !has {
		return nil, invalid("param 'body' is required")
	}
	body, err := p.text("body", false)
	if err != nil {
		return nil, err
	}
	var out ghPull
	resp, err := g.api.call(ctx, call.Config, request{method: http.MethodPatch, path: fmt.Sprintf("%s/pulls/%d", t.path, t.number),
		body: map[string]any{"body": body}}, &out)
	if err != nil {
		return nil, t.notFound(err)
	}
	stored := ""
	if out.Body != nil {
		stored = *out.Body
	}
	return reply(resp.status, map[string]any{"ok": true, "body": stored}), nil
}
