package webhook_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/realm-go/realm/listen-svc/webhook"
)

func staticOf(t testing.TB, h *harness) webhook.Catalog {
	t.Helper()
	var decls []webhook.Declared
	for _, n := range testWorkflows {
		decls = append(decls, declare(t, n))
	}
	table, problems := webhook.Build(decls, getenv, true)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	return webhook.Static{T: table}
}

func httptestServer(t testing.TB, h http.Handler) string {
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

func postTo(t testing.TB, url, body string, headers map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
