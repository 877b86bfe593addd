package adapters_test

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/services/adapter-runner/apistub"
)

func TestGorgiasOperationsSpeakTheGorgiasAPI(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, op string
		params           map[string]any
		wantVerb         string
		wantPath         string
		wantQuery        url.Values
		wantBody         string // JSON; "" for none
		wantStatus       int
		wantData         string // a part of the data's JSON
	}{
		{"get_ticket reads one ticket", "fetch", "get_ticket", map[string]any{"ticket_id": 101.0},
			"GET", "/api/tickets/101", url.Values{}, "", 200, `"id":101,"status":"open"`},
		{"get_customer reads one customer", "fetch", "get_customer", map[string]any{"customer_id": 7.0},
			"GET", "/api/customers/7", url.Values{}, "", 200, `"email":"ana@example.com"`},
		{"list_tickets sends scalar params as the query and says has_more", "fetch", "list_tickets",
			map[string]any{"limit": 1.0, "trashed": false, "order_by": "created_datetime:desc", "assignee_user_id": nil},
			"GET", "/api/tickets", url.Values{"limit": {"1"}, "trashed": {"false"}, "order_by": {"created_datetime:desc"}}, "", 200,
			`"has_more":true,"meta":{"next_cursor":"MQ","prev_cursor":null}`},
		{"list_customers passes the cursor back", "fetch", "list_customers", map[string]any{"cursor": "MQ"},
			"GET", "/api/customers", url.Values{"cursor": {"MQ"}}, "", 200, `"has_more":false`},
		{"create_message takes ticket_id into the path", "create", "create_message",
			map[string]any{"ticket_id": 101.0, "channel": "email", "via": "api", "from_agent": true, "body_text": "On its way."},
			"POST", "/api/tickets/101/messages", nil, `{"body_text":"On its way.","channel":"email","from_agent":true,"via":"api"}`, 201,
			`"ticket_id":101`},
		{"create_ticket posts the params", "create", "create_ticket",
			map[string]any{"channel": "email", "messages": []any{map[string]any{"body_text": "Hello"}}},
			"POST", "/api/tickets", nil, `{"channel":"email","messages":[{"body_text":"Hello"}]}`, 201, `"status":"open"`},
		{"create_customer posts the params", "create", "create_customer", map[string]any{"email": "cy@example.com", "name": "Cy"},
			"POST", "/api/customers", nil, `{"email":"cy@example.com","name":"Cy"}`, 201, `"email":"cy@example.com"`},
		{"update_ticket PUTs without ticket_id in the body", "update", "update_ticket", map[string]any{"ticket_id": 101.0, "status": "closed"},
			"PUT", "/api/tickets/101", nil, `{"status":"closed"}`, 202, `"status":"closed"`},
		{"update_customer PUTs without customer_id in the body", "update", "update_customer", map[string]any{"customer_id": 8.0, "name": "Bo C."},
			"PUT", "/api/customers/8", nil, `{"name":"Bo C."}`, 202, `"name":"Bo C."`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := apistub.NewGorgias(t)
			a, _ := mustBuild(t, apistub.GorgiasExample(g))
			out, e := invoke(t, a, tt.method, tt.op, tt.params)
			if e != nil {
				t.Fatal(e)
			}
			reqs := g.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != tt.wantVerb || r.Path != tt.wantPath {
				t.Errorf("request = %s %s, want %s %s", r.Method, r.Path, tt.wantVerb, tt.wantPath)
			}
			if tt.wantQuery != nil && r.Query.Encode() != tt.wantQuery.Encode() {
				t.Errorf("query = %s, want %s", r.Query.Encode(), tt.wantQuery.Encode())
			}
			wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte(apistub.GorgiasEmail+":"+apistub.GorgiasAPIKey))
			if r.Header.Get("Authorization") != wantAuth || r.Header.Get("Accept") != "application/json" {
				t.Errorf("headers = %v", r.Header)
			}
			if tt.wantBody != "" && (asJSON(t, r.JSON()) != tt.wantBody || r.Header.Get("Content-Type") != "application/json") {
				t.Errorf("body = %s (%s), want %s", r.Body, r.Header.Get("Content-Type"), tt.wantBody)
			}
			if tt.wantBody == "" && r.Body != "" {
				t.Errorf("body = %s, want none", r.Body)
			}
			m := out.(map[string]any)
			if m["status"] != tt.wantStatus || !strings.Contains(dataOf(t, out), tt.wantData) {
				t.Errorf("reply = %d %s, want %d with %s", m["status"], dataOf(t, out), tt.wantStatus, tt.wantData)
			}
		})
	}
}

func TestGorgiasGetMessagesFollowsCursorsUpToItsLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		seeded    int // messages of ticket 102
		params    map[string]any
		wantPages []string // each request's path?query
		wantCount int
		truncated bool
	}{
		{"a short thread in one page", 3, map[string]any{"ticket_id": 102.0},
			[]string{"/api/tickets/102/messages?limit=30"}, 3, false},
		{"the default limit is 30", 31, map[string]any{"ticket_id": 102.0},
			[]string{"/api/tickets/102/messages?limit=30"}, 30, true},
		{"exactly the limit is not truncated", 30, map[string]any{"ticket_id": 102.0},
			[]string{"/api/tickets/102/messages?limit=30"}, 30, false},
		{"pages of 100 are followed by cursor", 250, map[string]any{"ticket_id": 102.0, "limit": 150.0, "order_by": "created_datetime:asc"},
			[]string{"/api/tickets/102/messages?limit=100&order_by=created_datetime%3Aasc", "/api/tickets/102/messages?cursor=MTAw&limit=100&order_by=created_datetime%3Aasc"}, 150, true},
		{"a last page with more than the limit leaves is truncated", 200, map[string]any{"ticket_id": 102.0, "limit": 150.0},
			[]string{"/api/tickets/102/messages?limit=100", "/api/tickets/102/messages?cursor=MTAw&limit=100"}, 150, true},
		{"the limit is capped at 200", 250, map[string]any{"ticket_id": 102.0, "limit": 1000.0},
			[]string{"/api/tickets/102/messages?limit=100", "/api/tickets/102/messages?cursor=MTAw&limit=100"}, 200, true},
		{"200 of 200 is complete", 200, map[string]any{"ticket_id": 102.0, "limit": 200.0},
			[]string{"/api/tickets/102/messages?limit=100", "/api/tickets/102/messages?cursor=MTAw&limit=100"}, 200, false},
		{"without ticket_id: the account's messages", 0, map[string]any{"limit": 2.0},
			[]string{"/api/messages?limit=2"}, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := apistub.NewGorgias(t)
			g.SeedMessages(102, tt.seeded)
			a, _ := mustBuild(t, apistub.GorgiasExample(g))
			out, e := invoke(t, a, "fetch", "get_messages", tt.params)
			if e != nil {
				t.Fatal(e)
			}
			var pages []string
			for _, r := range g.Requests() {
				pages = append(pages, r.Path+"?"+r.Query.Encode())
			}
			if strings.Join(pages, "\n") != strings.Join(tt.wantPages, "\n") {
				t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(pages, "\n"), strings.Join(tt.wantPages, "\n"))
			}
			data := out.(map[string]any)["data"].(map[string]any)
			msgs := data["messages"].([]any)
			if len(msgs) != tt.wantCount || data["truncated"] != tt.truncated || len(data) != 2 {
				t.Errorf("%d messages, truncated %v (%d keys), want %d, %v", len(msgs), data["truncated"], len(data), tt.wantCount, tt.truncated)
			}
			if tt.params["ticket_id"] != nil {
				for _, m := range msgs {
					if m.(map[string]any)["ticket_id"] != 102.0 {
						t.Fatalf("message of another ticket: %v", m)
					}
				}
			}
		})
	}
}

func TestGorgiasRefusesBadParamsBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, op string
		params           map[string]any
		wantMsg          string
	}{
		{"a ticket_id as text", "fetch", "get_ticket", map[string]any{"ticket_id": "101"}, "'ticket_id' must be a whole number"},
		{"a ticket_id of zero", "fetch", "get_ticket", map[string]any{"ticket_id": 0.0}, "'ticket_id' must be a positive whole number"},
		{"a fractional customer_id", "fetch", "get_customer", map[string]any{"customer_id": 7.5}, "'customer_id' must be a whole number"},
		{"get_ticket without ticket_id", "fetch", "get_ticket", map[string]any{}, "'ticket_id' is required"},
		{"a misspelt param", "fetch", "get_ticket", map[string]any{"ticket_id": 1.0, "tikcet": 2.0}, "param 'tikcet' is not a param of get_ticket (it takes: ticket_id)"},
		{"a list filter on list_tickets", "fetch", "list_tickets", map[string]any{"status": []any{"open", "closed"}}, "param 'status' must be a string, number or boolean"},
		{"an object filter on list_customers", "fetch", "list_customers", map[string]any{"email": map[string]any{"in": "x"}}, "param 'email' must be a string, number or boolean"},
		{"a limit of zero", "fetch", "get_messages", map[string]any{"limit": 0.0}, "'limit' must be a positive whole number"},
		{"an order_by that is not text", "fetch", "get_messages", map[string]any{"order_by": 1.0}, "'order_by' must be a string"},
		{"create_message without its ticket", "create", "create_message", map[string]any{"body_text": "x"}, "'ticket_id' is required"},
		{"update_customer without its customer", "update", "update_customer", map[string]any{"name": "x"}, "'customer_id' is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := apistub.NewGorgias(t)
			a, _ := mustBuild(t, apistub.GorgiasExample(g))
			_, e := invoke(t, a, tt.method, tt.op, tt.params)
			wantErr{errcode.AdapterValidationFailed, errcode.ActionProvideInput, false, nil}.check(t, e)
			if e != nil && !strings.Contains(e.Message, tt.wantMsg) {
				t.Errorf("message %q, want %q", e.Message, tt.wantMsg)
			}
			if n := len(g.Requests()); n != 0 {
				t.Errorf("%d requests sent, want none", n)
			}
		})
	}
}

func TestGorgiasConstructionConfigIsChecked(t *testing.T) {
	t.Parallel()
	auth := map[string]any{"type": "basic", "token": "${secret:T}"}
	secrets := map[string]string{"T": "bot@acme.example:key"}
	tests := []struct {
		name    string
		config  map[string]any
		secrets map[string]string
		wantErr string // "" builds
	}{
		{"a domain alone", map[string]any{"domain": "acme", "auth": auth}, secrets, ""},
		{"neither domain nor base_url", map[string]any{"auth": auth}, secrets, "config.domain is required"},
		{"a domain that is a path", map[string]any{"domain": "evil.example/api?x=", "auth": auth}, secrets, "config.domain 'evil.example/api?x=' must be the account's subdomain"},
		{"no auth", map[string]any{"domain": "acme"}, secrets, "config.auth is required"},
		{"a bearer auth", map[string]any{"domain": "acme", "auth": map[string]any{"type": "bearer", "token": "x:y"}}, secrets, "config.auth.type must be 'basic'"},
		{"a token without the email", map[string]any{"domain": "acme", "auth": map[string]any{"type": "basic", "token": "justakey"}}, secrets, "config.auth.token must be 'email:api_key'"},
		{"an unset secret", map[string]any{"domain": "acme", "auth": auth}, nil, "T"},
		{"an unknown auth key", map[string]any{"domain": "acme", "auth": map[string]any{"type": "basic", "token": "a:b", "header_name": "X"}}, secrets, "config.auth: unknown key 'header_name'"},
		{"an unknown key", map[string]any{"domain": "acme", "auth": auth, "api_key": "x"}, secrets, "config: unknown key 'api_key' (known: auth, base_url, domain)"},
		{"a base_url that is not http", map[string]any{"domain": "acme", "auth": auth, "base_url": "ftp://x"}, secrets, "config.base_url 'ftp://x' must be an http:// or https:// URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := fromManifest(t, "gorgias", tt.config, tt.secrets)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			case err != nil && !strings.Contains(err.Error(), "constructing adapters.svc (use: gorgias) failed") && tt.name != "an unset secret":
				t.Errorf("error %q does not name the entry", err)
			}
		})
	}
}

func TestGorgiasFollowsRedirectsOnReadsOnly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, op string
		params           map[string]any
		sent             int
		fails            bool
	}{
		{"a read follows it", "fetch", "get_ticket", map[string]any{"ticket_id": 101.0}, 2, false},
		{"a create is refused", "create", "create_customer", map[string]any{"email": "x@example.com"}, 1, true},
		{"an update is refused", "update", "update_ticket", map[string]any{"ticket_id": 101.0, "status": "closed"}, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := apistub.NewGorgias(t)
			a, _ := mustBuild(t, apistub.GorgiasExample(g))
			g.Fail(apistub.Failure{Status: 301, Location: "/api/tickets/101", Times: 1})
			_, e := invoke(t, a, tt.method, tt.op, tt.params)
			if n := len(g.Requests()); n != tt.sent {
				t.Errorf("%d requests, want %d", n, tt.sent)
			}
			if !tt.fails {
				if e != nil {
					t.Fatal(e)
				}
				return
			}
			wantErr{errcode.ServiceUnexpectedRedirect, errcode.ActionStop, false, nil}.check(t, e)
		})
	}
}
