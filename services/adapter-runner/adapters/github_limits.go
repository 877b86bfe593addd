package adapters

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"
)

// githubDefaultWait is GitHub's advice after a rate limit that names no
// wait: "wait for at least one minute".
const githubDefaultWait = 60 * time.Second

// githubLimits presents GitHub's rate-limit answers as the 429 with
// Retry-After that the shared layer waits out and classifies
// (SERVICE_RATE_LIMITED with retry_after). GitHub signals a limit with
// 403 or 429 and either x-ratelimit-remaining: 0 (the primary limit,
// lifted at x-ratelimit-reset, epoch seconds) or a "secondary rate limit"
// message (with Retry-After, else the adapter's default minute). Any
// other 403 is left as it came: a permission refusal (SERVICE_HTTP_4XX).
type githubLimits struct {
	next http.RoundTripper
	now  func() time.Time
}

func (g githubLimits) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := g.next.RoundTrip(req)
	if err != nil || (resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests) {
		return resp, err
	}
	primary := resp.Header.Get("X-Ratelimit-Remaining") == "0"
	secondary := false
	if !primary {
		// The secondary limit is told in the body only; read a bounded
		// start of it and hand the body on unchanged.
		head, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		rest := resp.Body
		resp.Body = readCloser{io.MultiReader(bytes.NewReader(head), rest), rest}
		if err != nil {
			return resp, nil
		}
		secondary = bytes.Contains(bytes.ToLower(head), []byte("secondary rate limit"))
	}
	if !primary && !secondary && resp.StatusCode == http.StatusForbidden {
		return resp, nil
	}
	resp.Header = resp.Header.Clone()
	if reset, err := strconv.ParseInt(resp.Header.Get("X-Ratelimit-Reset"), 10, 64); primary && err == nil && resp.Header.Get("Retry-After") == "" {
		wait := max(time.Unix(reset, 0).Sub(g.now()), 0)
		resp.Header.Set("Retry-After", strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10))
	}
	resp.StatusCode, resp.Status = http.StatusTooManyRequests, "429 Too Many Requests"
	return resp, nil
}

// readCloser reads from r and closes c.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error { return r.c.Close() }
