package adapters

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/runner"
)

// NameGorgias is the catalog name of the Gorgias helpdesk adapter.
const NameGorgias = "gorgias"

// get_messages bounds (spec §13.3): limit default 30, at most 200; a page
// of the API holds at most 100.
const (
	gorgiasMessagesDefault = 30
	gorgiasMessagesCap     = 200
	gorgiasPageSize        = 100
)

// gorgiasDomain is an account's subdomain (acme for acme.gorgias.com).
var gorgiasDomain = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$`)

// gorgias speaks the Gorgias REST API (https://<domain>.gorgias.com/api)
// with HTTP Basic credentials "email:api_key". Results are the API's
// bodies, except get_messages (pages merged) and the list operations
// (has_more added).
type gorgias struct {
	name string
	api  *api
	ops  ops
}

func newGorgias(name string, config map[string]any, opts Options) (runner.Adapter, error) {
	s, err := readSettings(config, "auth", "base_url", "domain")
	if err != nil {
		return nil, err
	}
	domain, err := s.text("domain", false, "")
	if err != nil {
		return nil, err
	}
	def := ""
	switch {
	case domain != "" && !gorgiasDomain.MatchString(domain):
		return nil, fmt.Errorf("config.domain '%s' must be the account's subdomain (acme for acme.gorgias.com)", domain)
	case domain != "":
		def = "https://" + domain + ".gorgias.com/api"
	case s["base_url"] == nil:
		return nil, fmt.Errorf("config.domain is required: the account's subdomain (acme for acme.gorgias.com)")
	}
	base, err := s.baseURL(def)
	if err != nil {
		return nil, err
	}
	token, err := gorgiasToken(s)
	if err != nil {
		return nil, err
	}
	header := http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(token))}}
	a, err := newAPI(name, base, header, opts, rules{
		defaultRetryAfter: commerceRetryAfter,
		// A missing ticket or customer is not an input to ask for again.
		notFound: errcode.ServiceHTTP4xx, notFoundAction: errcode.ActionStop,
	})
	if err != nil {
		return nil, err
	}
	g := &gorgias{name: name, api: a}
	g.ops = ops{
		"fetch": {
			"get_ticket":     g.getOne("ticket_id", "tickets"),
			"get_customer":   g.getOne("customer_id", "customers"),
			"get_messages":   g.getMessages,
			"list_tickets":   g.list("list_tickets", "tickets"),
			"list_customers": g.list("list_customers", "customers"),
		},
		"create": {
			"create_message":  g.write(http.MethodPost, "ticket_id", "tickets", "messages"),
			"create_ticket":   g.write(http.MethodPost, "", "tickets", ""),
			"create_customer": g.write(http.MethodPost, "", "customers", ""),
		},
		"update": {
			"update_ticket":   g.write(http.MethodPut, "ticket_id", "tickets", ""),
			"update_customer": g.write(http.MethodPut, "customer_id", "customers", ""),
		},
	}
	return g, nil
}

// gorgiasToken reads config.auth: {type: basic, token: "email:api_key"}.
func gorgiasToken(s settings) (string, error) {
	auth, err := s.object("auth", true)
	if err != nil {
		return "", err
	}
	for _, k := range sortedKeys(auth) {
		if k != "type" && k != "token" {
			return "", fmt.Errorf("config.auth: unknown key '%s' (known: type, token)", k)
		}
	}
	if kind, _ := auth["type"].(string); kind != "basic" {
		return "", fmt.Errorf("config.auth.type must be 'basic' (Gorgias takes HTTP Basic credentials)")
	}
	token, _ := auth["token"].(string)
	email, key, ok := strings.Cut(token, ":")
	if !ok || strings.TrimSpace(email) == "" || strings.TrimSpace(key) == "" {
		return "", fmt.Errorf("config.auth.token must be 'email:api_key' (is its secret set?)")
	}
	return token, nil
}

func (g *gorgias) Call(ctx context.Context, call runner.AdapterCall) (any, error) {
	return g.ops.dispatch(ctx, g.name, errcode.AdapterOpUnsupported, call)
}

// get answers GET path?query with the API's body.
func (g *gorgias) get(ctx context.Context, call runner.AdapterCall, path string, query url.Values) (answer, any, error) {
	var body any
	resp, err := g.api.call(ctx, call.Config, request{method: http.MethodGet, path: path, query: query}, &body)
	return resp, body, err
}

// getOne is GET /<collection>/<id param>.
func (g *gorgias) getOne(idKey, collection string) op {
	return func(ctx context.Context, call runner.AdapterCall) (any, error) {
		p := args(call.Params)
		if err := p.only(call.Operation, idKey); err != nil {
			return nil, err
		}
		id, err := p.positive(idKey)
		if err != nil {
			return nil, err
		}
		resp, body, err := g.get(ctx, call, collection+"/"+strconv.FormatInt(id, 10), nil)
		if err != nil {
			return nil, err
		}
		return reply(resp.status, body), nil
	}
}

// list is one page of GET /<collection>?<params>: the params are the
// query, so each must be a scalar (a list or object would be a filter the
// API cannot take, and dropping it would widen the result). The body gets
// has_more: whether meta.next_cursor names a next page (passed back as
// the param cursor).
func (g *gorgias) list(op, collection string) op {
	return func(ctx context.Context, call runner.AdapterCall) (any, error) {
		q := url.Values{}
		for _, k := range sortedKeys(call.Params) {
			switch v := call.Params[k].(type) {
			case nil:
			case string, bool, float64, int, int64:
				s, _ := queryValue(v)
				q.Set(k, s)
			default:
				return nil, invalid("param '%s' must be a string, number or boolean: %s sends its params as the query string", k, op)
			}
		}
		resp, body, err := g.get(ctx, call, collection, q)
		if err != nil {
			return nil, err
		}
		if m, ok := body.(map[string]any); ok {
			meta, _ := m["meta"].(map[string]any)
			next, _ := meta["next_cursor"].(string)
			m["has_more"] = next != ""
		}
		return reply(resp.status, body), nil
	}
}

// write sends the params as the JSON body of method /<collection>[/<id>][/<sub>];
// idKey, when set, is taken out of the body into the path.
func (g *gorgias) write(method, idKey, collection, sub string) op {
	return func(ctx context.Context, call runner.AdapterCall) (any, error) {
		p := args(call.Params)
		body := map[string]any{}
		for k, v := range p {
			if k != idKey {
				body[k] = v
			}
		}
		path := collection
		if idKey != "" {
			id, err := p.positive(idKey)
			if err != nil {
				return nil, err
			}
			path += "/" + strconv.FormatInt(id, 10)
		}
		if sub != "" {
			path += "/" + sub
		}
		var out any
		resp, err := g.api.call(ctx, call.Config, request{method: method, path: path, body: body}, &out)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = map[string]any{}
		}
		return reply(resp.status, out), nil
	}
}

// gorgiasPage is one page of a Gorgias list.
type gorgiasPage struct {
	Data *[]any `json:"data"`
	Meta struct {
		NextCursor string `json:"next_cursor"`
	} `json:"meta"`
}

// getMessages follows the message pages of one ticket (ticket_id) or of
// the account until limit messages: {messages, truncated}, truncated when
// the API had more than were kept.
func (g *gorgias) getMessages(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	if err := p.only(call.Operation, "ticket_id", "limit", "order_by"); err != nil {
		return nil, err
	}
	// The per-ticket path, not /messages?ticket_id=: Gorgias answers the
	// filter inconsistently (the original adapter's finding).
	path := "messages"
	if _, has := p["ticket_id"]; has {
		id, err := p.positive("ticket_id")
		if err != nil {
			return nil, err
		}
		path = "tickets/" + strconv.FormatInt(id, 10) + "/messages"
	}
	limit := int64(gorgiasMessagesDefault)
	if _, has := p["limit"]; has {
		n, err := p.positive("limit")
		if err != nil {
			return nil, err
		}
		limit = min(n, gorgiasMessagesCap)
	}
	orderBy, err := p.text("order_by", false)
	if err != nil {
		return nil, err
	}
	q := url.Values{"limit": {strconv.FormatInt(min(limit, gorgiasPageSize), 10)}}
	if orderBy != "" {
		q.Set("order_by", orderBy)
	}
	messages, truncated := []any{}, false
	// Each page adds a message or ends the walk, so it ends within limit
	// pages.
	for {
		var page gorgiasPage
		resp, err := g.api.call(ctx, call.Config, request{method: http.MethodGet, path: path, query: q}, &page)
		if err != nil {
			return nil, err
		}
		if page.Data == nil {
			u, _ := g.api.url(request{path: path})
			return nil, fail(errcode.ServiceResponseInvalid, resp.details(http.MethodGet, u), "GET %s answered without a 'data' list of messages", redact(u))
		}
		for _, m := range *page.Data {
			if int64(len(messages)) < limit {
				messages = append(messages, m)
			} else {
				truncated = true
			}
		}
		next := page.Meta.NextCursor
		if int64(len(messages)) >= limit {
			truncated = truncated || next != ""
			break
		}
		if next == "" || len(*page.Data) == 0 {
			break
		}
		q.Set("cursor", next)
	}
	return reply(http.StatusOK, map[string]any{"messages": messages, "truncated": truncated}), nil
}
