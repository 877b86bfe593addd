package trigger_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/realm-go/realm/pkg/trigger"
)

func block(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestParseRefusesInTheValidatorsWords(t *testing.T) {
	t.Parallel()
	cases := []struct{ block, want string }{
		{`{"type":"cron","auth":{"mode":"none"}}`, "trigger/type must be equal to constant"},
		{`{"type":"webhook"}`, "trigger: missing required property 'auth'"},
		{`{"type":"webhook","auth":{"mode":"basic"}}`, "trigger/auth/mode must be equal to one of the allowed values"},
		{`{"type":"webhook","auth":{"mode":"github"}}`, "trigger/auth: missing required property 'secret_from'"},
		{`{"type":"webhook","auth":{"mode":"github","secret_from":"S","algorithm":"sha1"}}`, "trigger/auth: unknown property 'algorithm'"},
		{`{"type":"webhook","auth":{"mode":"none"},"filter":{"all":[{"path":"body.a","header":"x","value":"1"}]}}`,
			"trigger/filter/all/0: must have exactly one of 'header' or 'path'"},
		{`{"type":"webhook","auth":{"mode":"none"},"filter":{"all":[` +
			`{"path":"body.a","value":"1"},{"path":"body.a","value":"1"},{"path":"body.a","value":"1"},{"path":"body.a","value":"1"},` +
			`{"path":"body.a","value":"1"},{"path":"body.a","value":"1"},{"path":"body.a","value":"1"},{"path":"body.a","value":"1"},` +
			`{"path":"body.a","value":"1"}]}}`, "trigger/filter/all must NOT have more than 8 items"},
		{`{"type":"webhook","auth":{"mode":"none"},"dedup":{"ttl_minutes":5}}`, "trigger/dedup: missing required property 'id_from'"},
		{`{"type":"webhook","auth":{"mode":"none"},"dedup":{"id_from":"body.id","ttl_minutes":10081}}`, "trigger/dedup/ttl_minutes must be <= 10080"},
		{`{"type":"webhook","auth":{"mode":"none"},"params_map":{"a":1}}`, "trigger/params_map/a must be string"},
		{`{"type":"webhook","auth":{"mode":"stripe","secret_from":"S","max_age_seconds":0}}`, "trigger/auth/max_age_seconds must be >= 1"},
		{`{"type":"webhook","auth":{"mode":"none"},"retries":3}`, "trigger: unknown property 'retries'"},
		{`{"type":"webhook","auth":{"mode":"shared_secret","header":"","secret_from":"S"}}`, "trigger/auth/header must NOT have fewer than 1 characters"},
		{`{"type":"webhook","auth":{"mode":"stripe","secret_from":"S","max_age_seconds":9000000000000000000}}`, "trigger/auth/max_age_seconds must be <= 86400"},
		{`{"type":"webhook","auth":{"mode":"none"},"filter":{"path":"body.a","value":null}}`, "trigger/filter/value must be string or array"},
		{`{"type":"webhook","auth":{"mode":"none"},"rate_limit":{"burst":2}}`, "trigger/rate_limit: missing required property 'per_second'"},
		{`{"type":"webhook","auth":{"mode":"none"},"rate_limit":{"per_second":0}}`, "trigger/rate_limit/per_second must be > 0"},
		{`{"type":"webhook","auth":{"mode":"none"},"rate_limit":{"per_second":"5"}}`, "trigger/rate_limit/per_second must be number"},
		{`{"type":"webhook","auth":{"mode":"none"},"rate_limit":{"per_second":1000001}}`, "trigger/rate_limit/per_second must be <= 100000"},
		{`{"type":"webhook","auth":{"mode":"none"},"rate_limit":{"per_second":5,"burst":0}}`, "trigger/rate_limit/burst must be >= 1"},
		{`{"type":"webhook","auth":{"mode":"none"},"rate_limit":{"per_second":5,"burst":1.5}}`, "trigger/rate_limit/burst must be integer"},
		{`{"type":"webhook","auth":{"mode":"none"},"rate_limit":{"per_second":5,"window":60}}`, "trigger/rate_limit: unknown property 'window'"},
		{`{"type":"webhook","auth":{"mode":"none"},"rate_limit":true}`, "trigger/rate_limit must be object or false"},
	}
	for _, c := range cases {
		_, err := trigger.Parse(block(t, c.block))
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: got %v, want %q", c.block, err, c.want)
		}
	}
}

func TestParseFillsDefaultsAndNormalisesASingleCondition(t *testing.T) {
	t.Parallel()
	tr, err := trigger.Parse(block(t, `{"type":"webhook","auth":{"mode":"hmac","header":"X-Sig","secret_from":"S"},
		"filter":{"path":"body.kind","value":"order-paid"},"dedup":{"id_from":"body.id"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Auth.Algorithm != "sha256" || tr.Auth.Encoding != "hex" {
		t.Errorf("hmac defaults: %+v", tr.Auth)
	}
	if len(tr.Filter) != 1 || tr.Filter[0].Path != "body.kind" || tr.Dedup.TTL.Minutes() != 60 || tr.Dedup.RejectMissing {
		t.Errorf("filter %+v dedup %+v", tr.Filter, tr.Dedup)
	}
	if tr.MountPath("orders") != "/orders" {
		t.Errorf("default path %q", tr.MountPath("orders"))
	}
	if d, _ := trigger.Parse(block(t, `{"type":"webhook","auth":{"mode":"none"},"dedup":false}`)); d.Dedup != nil {
		t.Error("dedup: false left dedup on")
	}
}

func TestFilterAndParamsReadBodyAndHeadersAsTheOriginal(t *testing.T) {
	t.Parallel()
	tr, err := trigger.Parse(block(t, `{"type":"webhook","auth":{"mode":"none"},
		"filter":{"all":[{"path":"body.n","value":["101"]},{"header":"X-Source","value":"helpdesk"}]},
		"params_map":{"n":"body.n","src":"headers.x-source","gone":"body.missing","wrong_root":"header.x-source"}}`))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("X-Source", "helpdesk")
	r := trigger.NewRequest(h, map[string]any{"n": 101.0})
	if !tr.Matches(r) {
		t.Error("number 101 should match \"101\" and the header case-insensitively")
	}
	params, missing := tr.Params(r)
	if params["n"] != 101.0 || params["src"] != "helpdesk" || len(params) != 2 {
		t.Errorf("params %v", params)
	}
	if len(missing) != 2 {
		t.Errorf("missing %v, want body.missing and header.x-source", missing)
	}
	for _, body := range []any{map[string]any{"n": nil}, map[string]any{"n": []any{"101"}}, map[string]any{}} {
		if tr.Matches(trigger.NewRequest(h, body)) {
			t.Errorf("%v matched", body)
		}
	}
	h.Add("X-Source", "helpdesk")
	if tr.Matches(trigger.NewRequest(h, map[string]any{"n": 101.0})) {
		t.Error("a repeated header must count as absent")
	}
}

func TestRateLimitTakesItsBurstFromTheRateUnlessGivenAndFalseTurnsItOff(t *testing.T) {
	t.Parallel()
	cases := []struct {
		block string
		want  trigger.RateLimit
	}{
		{`{"per_second":2.5}`, trigger.RateLimit{PerSecond: 2.5, Burst: 3}},
		{`{"per_second":0.1}`, trigger.RateLimit{PerSecond: 0.1, Burst: 1}},
		{`{"per_second":10,"burst":40}`, trigger.RateLimit{PerSecond: 10, Burst: 40}},
		{`false`, trigger.RateLimit{Off: true}},
	}
	for _, c := range cases {
		tr, err := trigger.Parse(block(t, `{"type":"webhook","auth":{"mode":"none"},"rate_limit":`+c.block+`}`))
		if err != nil || tr.RateLimit == nil || *tr.RateLimit != c.want {
			t.Errorf("%s: %+v %v, want %+v", c.block, rateOf(tr), err, c.want)
		}
	}
}

func rateOf(tr *trigger.Trigger) any {
	if tr == nil {
		return nil
	}
	return tr.RateLimit
}
