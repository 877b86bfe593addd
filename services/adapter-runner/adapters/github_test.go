package adapters_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/runner"
	"github.com/realm-go/realm/services/adapter-runner/apistub"
)

// githubAdapter is the manifest entry `use: github` pointing at a stub,
// its token from ${secret:GITHUB_TOKEN}.
func githubAdapter(t *testing.T) (*apistub.GitHub, runner.Adapter, *fakeClock) {
	t.Helper()
	stub := apistub.NewGitHub(t)
	a, clock := buildFrom(t, "github", map[string]any{"base_url": stub.URL(), "auth": map[string]any{"token": "${secret:GITHUB_TOKEN}"}},
		map[string]string{"GITHUB_TOKEN": apistub.GitHubToken})
	return stub, a, clock
}

func TestGitHubOperationsSendTheirRequestsAndShapeTheirResults(t *testing.T) {
	t.Parallel()
	issue12 := `{"body":"Seen twice this week.","labels":[{"name":"bug"}],"number":12,"state":"open","title":"Ledger sync drops entries (octo/app)","user":{"login":"ada"}}`
	issue3 := `{"body":"Seen twice this week.","labels":[{"name":"bug"}],"number":3,"state":"open","title":"Ledger sync drops entries (octo/lib)","user":{"login":"ada"}}`
	tests := []struct {
		name, method, op string
		params           map[string]any
		wantRequests     []string // "METHOD path?query"
		wantBody         string   // of the last request
		want             string   // data as JSON; "" when check is set
		check            func(t *testing.T, data any)
	}{
		{"get_pr_diff: the pull request and its files as one diff", "fetch", "get_pr_diff", map[string]any{"repo": "octo/app", "pr_number": 7.0},
			[]string{"GET /repos/octo/app/pulls/7", "GET /repos/octo/app/pulls/7/files?page=1&per_page=100"}, "",
			"", func(t *testing.T, data any) {
				stub := apistub.NewGitHub(t)
				if got, want := mustJSON(t, data), mustJSON(t, apistub.GitHubExample(stub).Output); got != want {
					t.Errorf("data = %s\nwant %s", got, want)
				}
			}},
		{"get_issue: GitHub's issue as it came", "fetch", "get_issue", map[string]any{"repo": "octo/app", "issue_number": 12.0},
			[]string{"GET /repos/octo/app/issues/12"}, "", issue12, nil},
		{"get_issue_comments: every page, as author/body/created_at", "fetch", "get_issue_comments", map[string]any{"repo": "octo/app", "issue_number": 12.0},
			[]string{"GET /repos/octo/app/issues/12/comments?page=1&per_page=100", "GET /repos/octo/app/issues/12/comments?page=2&per_page=100"}, "",
			"", func(t *testing.T, data any) {
				list, _ := data.([]any)
				if len(list) != apistub.GitHubComments {
					t.Fatalf("%d comments, want %d", len(list), apistub.GitHubComments)
				}
				if got, want := mustJSON(t, list[100]), `{"author":"user101","body":"comment 101","created_at":"2026-03-01T12:00:00Z"}`; got != want {
					t.Errorf("last comment = %s, want %s", got, want)
				}
			}},
		{"get_linked_issues: the issues the description closes; a missing one and a pull request left out", "fetch", "get_linked_issues",
			map[string]any{"repo": "octo/app", "pr_number": 7.0},
			[]string{"GET /repos/octo/app/pulls/7", "GET /repos/octo/app/issues/12", "GET /repos/octo/lib/issues/3", "GET /repos/octo/app/issues/99", "GET /repos/octo/app/issues/7"}, "",
			"[" + issue12 + "," + issue3 + "]", nil},
		{"get_file_contents: decoded text at a ref", "fetch", "get_file_contents", map[string]any{"repo": "octo/app", "path": "/README.md", "ref": "v1"},
			[]string{"GET /repos/octo/app/contents/README.md?ref=v1"}, "",
			mustJSONString(map[string]any{"path": "/README.md", "content": apistub.GitHubReadme}), nil},
		{"get_pr_review_comments: file/line/author/body; an outdated comment's original line, a deleted author's ghost", "fetch", "get_pr_review_comments",
			map[string]any{"repo": "octo/app", "pr_number": 7.0},
			[]string{"GET /repos/octo/app/pulls/7/comments?page=1&per_page=100"}, "",
			`[{"author":"hubot","body":"Why once?","file":"sync/ledger.go","line":2},{"author":"ghost","body":"Outdated.","file":"sync/ledger.go","line":9}]`, nil},
		{"post_comment on a pull request: the Issues API", "create", "post_comment", map[string]any{"repo": "octo/app", "pr_number": 7.0, "body": "LGTM"},
			[]string{"POST /repos/octo/app/issues/7/comments"}, `{"body":"LGTM"}`,
			`{"body":"LGTM","html_url":"https://github.com/octo/app/issues/7#issuecomment-901","id":901,"user":{"login":"realm-bot"}}`, nil},
		{"apply_labels: GitHub's labels afterwards", "create", "apply_labels", map[string]any{"repo": "octo/app", "issue_number": 12.0, "labels": []any{"needs-review"}},
			[]string{"POST /repos/octo/app/issues/12/labels"}, `{"labels":["needs-review"]}`,
			`[{"color":"d73a4a","name":"bug"},{"color":"0e8a16","name":"needs-review"}]`, nil},
		{"set_pr_description: ok and the body as stored", "update", "set_pr_description", map[string]any{"repo": "octo/app", "pr_number": 7.0, "body": "Retries once."},
			[]string{"PATCH /repos/octo/app/pulls/7"}, `{"body":"Retries once."}`,
			`{"body":"Retries once.","ok":true}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stub, a, _ := githubAdapter(t)
			out, err := ghCall(t, a, tt.method, tt.op, tt.params, nil)
			if err != nil {
				t.Fatalf("error %s: %s", err.Code, err.Message)
			}
			data := out.(map[string]any)["data"]
			if tt.check != nil {
				tt.check(t, data)
			} else if got := mustJSON(t, data); got != tt.want {
				t.Errorf("data = %s\nwant %s", got, tt.want)
			}
			reqs := stub.Requests()
			var got []string
			for _, r := range reqs {
				got = append(got, strings.TrimSuffix(r.Method+" "+r.Path+"?"+r.RawQuery, "?"))
				for k, v := range map[string]string{"Authorization": "Bearer " + apistub.GitHubToken, "Accept": "application/vnd.github+json", "X-Github-Api-Version": "2022-11-28"} {
					if r.Header.Get(k) != v {
						t.Errorf("%s %s: header %s = %q, want %q", r.Method, r.Path, k, r.Header.Get(k), v)
					}
				}
			}
			if !slices.Equal(got, tt.wantRequests) {
				t.Errorf("requests = %q\nwant %q", got, tt.wantRequests)
			}
			if tt.wantBody != "" {
				last := reqs[len(reqs)-1]
				if last.Body != tt.wantBody || last.Header.Get("Content-Type") != "application/json" {
					t.Errorf("body = %s (%s), want %s (application/json)", last.Body, last.Header.Get("Content-Type"), tt.wantBody)
				}
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustJSONString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestGitHubClassifiesEachAnswerPerSpec13_4(t *testing.T) {
	t.Parallel()
	now := newFakeClock().Now()
	resetIn := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	issue := map[string]any{"repo": "octo/app", "issue_number": 12.0}
	limited := apistub.Fault{Status: 403, Header: map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": resetIn(30 * time.Second)},
		Body: `{"message":"API rate limit exceeded for user ID 1."}`}
	secondary := apistub.Fault{Status: 403, Body: `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`}
	repeat := func(f apistub.Fault) []apistub.Fault { return []apistub.Fault{f, f, f, f} }
	tests := []struct {
		name       string
		op         string
		method     string
		params     map[string]any
		faults     []apistub.Fault
		closed     bool // the stub is down: a network failure
		want       wantErr
		wantSleeps []time.Duration
	}{
		{"401: auth failed", "get_issue", "fetch", issue, []apistub.Fault{{Status: 401, Body: `{"message":"Bad credentials"}`}},
			false, wantErr{errcode.ServiceAuthFailed, errcode.ActionStop, false, nil}, nil},
		{"404: SERVICE_HTTP_4XX with stop (github's exception)", "get_issue", "fetch", map[string]any{"repo": "octo/app", "issue_number": 404.0}, nil,
			false, wantErr{errcode.ServiceHTTP4xx, errcode.ActionStop, false, nil}, nil},
		{"403 without a rate limit: a refusal, SERVICE_HTTP_4XX", "get_issue", "fetch", issue, []apistub.Fault{{Status: 403, Body: `{"message":"Resource not accessible by integration"}`}},
			false, wantErr{errcode.ServiceHTTP4xx, errcode.ActionStop, false, nil}, nil},
		{"422: SERVICE_HTTP_4XX", "apply_labels", "create", map[string]any{"repo": "octo/app", "issue_number": 12.0, "labels": []any{"nope"}}, nil,
			false, wantErr{errcode.ServiceHTTP4xx, errcode.ActionStop, false, nil}, nil},
		{"429 with Retry-After: waited, then sent again", "get_issue", "fetch", issue, []apistub.Fault{{Status: 429, Header: map[string]string{"Retry-After": "2"}}},
			false, wantErr{}, []time.Duration{2 * time.Second}},
		{"429 with Retry-After every time: rate limited with retry_after", "get_issue", "fetch", issue, repeat(apistub.Fault{Status: 429, Header: map[string]string{"Retry-After": "2"}}),
			false, wantErr{errcode.ServiceRateLimited, errcode.ActionWaitAndProceed, true, 2.0}, []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}},
		{"429 without Retry-After or reset: GitHub's minute, then sent again", "get_issue", "fetch", issue, []apistub.Fault{{Status: 429}},
			false, wantErr{}, []time.Duration{time.Minute}},
		{"429 without Retry-After every time: rate limited, retry_after GitHub's minute", "get_issue", "fetch", issue, repeat(apistub.Fault{Status: 429}),
			false, wantErr{errcode.ServiceRateLimited, errcode.ActionWaitAndProceed, true, 60.0}, []time.Duration{time.Minute, time.Minute, time.Minute}},
		{"403 with x-ratelimit-remaining 0: waited until x-ratelimit-reset", "get_issue", "fetch", issue, []apistub.Fault{limited},
			false, wantErr{}, []time.Duration{30 * time.Second}},
		{"403 secondary rate limit without Retry-After: a minute", "get_issue", "fetch", issue, []apistub.Fault{secondary},
			false, wantErr{}, []time.Duration{time.Minute}},
		{"5xx: report_to_user, retryable", "get_issue", "fetch", issue, []apistub.Fault{{Status: 502, Body: "<html>bad gateway</html>"}},
			false, wantErr{errcode.ServiceHTTP5xx, errcode.ActionReportToUser, true, nil}, nil},
		{"malformed body", "get_issue", "fetch", issue, []apistub.Fault{{Status: 200, Body: `{"number": 12,`}},
			false, wantErr{errcode.ServiceResponseInvalid, errcode.ActionReportToUser, false, nil}, nil},
		{"network failure on a read: retryable", "get_issue", "fetch", issue, nil,
			true, wantErr{errcode.NetworkUnreachable, errcode.ActionWaitForHuman, true, nil}, nil},
		{"network failure on post_comment: not retried (it may have been posted)", "post_comment", "create", map[string]any{"repo": "octo/app", "issue_number": 12.0, "body": "x"}, nil,
			true, wantErr{errcode.NetworkUnreachable, errcode.ActionWaitForHuman, false, nil}, nil},
		{"unknown operation: ENGINE_ADAPTER_FAILED (github's exception)", "get_repo", "fetch", issue, nil,
			false, wantErr{errcode.EngineAdapterFailed, errcode.ActionStop, false, nil}, nil},
		{"missing method", "get_issue", "delete", issue, nil,
			false, wantErr{errcode.AdapterOpUnsupported, errcode.ActionReportToUser, false, nil}, nil},
		{"bad params: repo not owner/name", "get_issue", "fetch", map[string]any{"repo": "octo", "issue_number": 12.0}, nil,
			false, wantErr{errcode.AdapterValidationFailed, errcode.ActionProvideInput, false, nil}, nil},
		{"bad params: a path leaving the contents API", "get_file_contents", "fetch", map[string]any{"repo": "octo/app", "path": "../../../user"}, nil,
			false, wantErr{errcode.AdapterValidationFailed, errcode.ActionProvideInput, false, nil}, nil},
		{"bad params: issue_number and pr_number both", "post_comment", "create", map[string]any{"repo": "octo/app", "issue_number": 12.0, "pr_number": 7.0, "body": "x"}, nil,
			false, wantErr{errcode.AdapterValidationFailed, errcode.ActionProvideInput, false, nil}, nil},
		{"bad params: no labels", "apply_labels", "create", map[string]any{"repo": "octo/app", "issue_number": 12.0, "labels": []any{}}, nil,
			false, wantErr{errcode.AdapterValidationFailed, errcode.ActionProvideInput, false, nil}, nil},
		{"a directory is not a file", "get_file_contents", "fetch", map[string]any{"repo": "octo/app", "path": "docs"}, nil,
			false, wantErr{errcode.EngineAdapterFailed, errcode.ActionStop, false, nil}, nil},
		{"a file over 1 MB has no content", "get_file_contents", "fetch", map[string]any{"repo": "octo/app", "path": "big.bin"}, nil,
			false, wantErr{errcode.EngineAdapterFailed, errcode.ActionStop, false, nil}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stub, a, clock := githubAdapter(t)
			stub.Answer(tt.faults...)
			if tt.closed {
				stub.Close()
			}
			out, err := ghCall(t, a, tt.method, tt.op, tt.params, nil)
			if got := clock.recorded(); !slices.Equal(got, tt.wantSleeps) {
				t.Errorf("sleeps = %v, want %v", got, tt.wantSleeps)
			}
			if tt.want.code == "" {
				if err != nil {
					t.Fatalf("error %s: %s", err.Code, err.Message)
				}
				if got := out.(map[string]any)["data"].(map[string]any)["number"]; got != 12.0 {
					t.Errorf("data.number = %v, want 12", got)
				}
				return
			}
			tt.want.check(t, err)
		})
	}
}

func TestGitHubPrimaryLimitResettingAfterTheStepsDeadlineIsRateLimitedWithRetryAfter(t *testing.T) {
	t.Parallel()
	stub, a, clock := githubAdapter(t)
	reset := clock.Now().Add(time.Hour).Unix()
	stub.Answer(apistub.Fault{Status: 403, Header: map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": strconv.FormatInt(reset, 10)},
		Body: `{"message":"API rate limit exceeded"}`})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, err := ghCallCtx(ctx, t, a, "fetch", "get_issue", map[string]any{"repo": "octo/app", "issue_number": 12.0}, nil)
	wantErr{errcode.ServiceRateLimited, errcode.ActionWaitAndProceed, true, 3600.0}.check(t, err)
	if got := clock.recorded(); len(got) != 0 {
		t.Errorf("slept %v, want no wait", got)
	}
}

func TestGitHub404SaysWhatItMayMean(t *testing.T) {
	t.Parallel()
	_, a, _ := githubAdapter(t)
	_, err := ghCall(t, a, "fetch", "get_pr_diff", map[string]any{"repo": "octo/app", "pr_number": 8.0}, nil)
	if err == nil || !strings.Contains(err.Message, "gh pr view 8 --repo octo/app") || err.Details["status"] != http.StatusNotFound {
		t.Errorf("error = %+v, want the gh check command and status 404", err)
	}
}

func TestGitHubStepAbortedWhenTheStepsTimeHasPassed(t *testing.T) {
	t.Parallel()
	stub, a, _ := githubAdapter(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ghCallCtx(ctx, t, a, "fetch", "get_issue", map[string]any{"repo": "octo/app", "issue_number": 12.0}, nil)
	wantErr{errcode.StepAborted, errcode.ActionReportToUser, false, nil}.check(t, err)
	if n := len(stub.Requests()); n != 0 {
		t.Errorf("%d requests sent after the step's time passed", n)
	}
}

func TestGitHubConstructionRefusesWhatItDoesNotActOn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		config string
		want   string
	}{
		{"an unknown key", `{token: x}`, "config: unknown key 'token' (known: auth, base_url)"},
		{"auth without its token", `{auth: {}}`, "config.auth: config.token is required"},
		{"auth with another key", `{auth: {token: x, type: bearer}}`, "config.auth: config: unknown key 'type'"},
		{"an unset secret", `{auth: {token: '${secret:GITHUB_TOKEN}'}}`, "GITHUB_TOKEN"},
		{"base_url not http", `{base_url: 'ftp://x'}`, "config.base_url 'ftp://x' must be an http:// or https:// URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := writeFile(t, dir, "realm.yaml", "version: 1\nadapters:\n  gh:\n    use: github\n    config: "+tt.config+"\n")
			_, err := loadManifest(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
