package webhook_test

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/listen-svc/webhook"
	"github.com/realm-go/realm/pkg/ratelimit"
	"github.com/realm-go/realm/pkg/trigger"
)

// sharedRedis is a client of the Redis at $REDIS_URL (else a miniredis of
// the test's own): each listener opens its own, as replicas do.
func sharedRedis(t *testing.T, addr string) redis.UniversalClient {
	t.Helper()
	opt := &redis.Options{Addr: addr}
	if u := strings.TrimSpace(os.Getenv("REDIS_URL")); u != "" && addr == "" {
		var err error
		if opt, err = redis.ParseURL(u); err != nil {
			t.Fatal(err)
		}
	}
	rc := redis.NewClient(opt)
	t.Cleanup(func() { _ = rc.Close() })
	return rc
}

// Two listeners on one Redis serve a trigger's limit between them, not
// each: with one request per 1000 s and a burst of three, exactly three of
// ten deliveries spread over both are accepted (no token comes back during
// the test, so nothing depends on timing). A trigger's own rate_limit is
// shared the same way.
func TestTwoListenersSharingRedisTogetherServeOnlyTheLimit(t *testing.T) {
	t.Parallel()
	addr := ""
	if strings.TrimSpace(os.Getenv("REDIS_URL")) == "" {
		addr = miniredis.RunT(t).Addr()
	}
	prefix := fmt.Sprintf("test:listen:rate:%d", time.Now().UnixNano())
	listener := func() *harness {
		return newHarness(t, func(o *webhook.Options) {
			o.RateLimit = &trigger.RateLimit{PerSecond: 0.001, Burst: 3}
			o.SharedLimit = ratelimit.NewRedis(sharedRedis(t, addr), prefix)
		})
	}
	hs := []*harness{listener(), listener()}
	count := func(path string, n int) (accepted, limited int) {
		for i := range n {
			status, body := hs[i%2].post(path, `{}`, nil)
			switch status {
			case http.StatusAccepted:
				accepted++
			case http.StatusTooManyRequests:
				limited++
			default:
				t.Fatalf("%s request %d: %d %s", path, i+1, status, body)
			}
		}
		return accepted, limited
	}
	if a, l := count("/open", 10); a != 3 || l != 7 {
		t.Errorf("/open (--rate-limit 0.001:3): %d accepted, %d limited; want 3 and 7", a, l)
	}
	// limited declares rate_limit {per_second: 0.5, burst: 2}: four quick
	// requests get two tokens; a third would need two seconds to come back.
	if a, l := count("/limited", 4); a != 2 || l != 2 {
		t.Errorf("/limited (its own 0.5:2): %d accepted, %d limited; want 2 and 2", a, l)
	}
}

// A shared limiter that cannot answer leaves the limiting to this
// process's own bucket, and says so once: deliveries are neither served
// unlimited nor refused for Redis's fault.
func TestASharedLimitThatFailsFallsBackToTheLocalBucket(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	rc := sharedRedis(t, m.Addr())
	m.Close() // every call now fails
	h := newHarness(t, func(o *webhook.Options) {
		o.RateLimit = &trigger.RateLimit{PerSecond: 0.001, Burst: 2}
		o.SharedLimit = ratelimit.NewRedis(rc, "")
	})
	var got []int
	for range 4 {
		status, _ := h.post("/open", `{}`, nil)
		got = append(got, status)
	}
	if fmt.Sprint(got) != fmt.Sprint([]int{http.StatusAccepted, http.StatusAccepted, http.StatusTooManyRequests, http.StatusTooManyRequests}) {
		t.Errorf("statuses %v, want two accepted then 429s", got)
	}
	if n := strings.Count(h.logs.String(), "the shared rate limit did not answer"); n != 1 {
		t.Errorf("%d warnings about the shared limit, want 1:\n%s", n, h.logs.String())
	}
}
