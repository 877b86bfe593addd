package adapters

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/runner"
)

// NameNotion is the catalog name of the Notion adapter.
const NameNotion = "notion"

// NotionVersion is the Notion API version the adapter speaks (spec §13.3).
const NotionVersion = "2026-03-11"

// notionMaxChildren is Notion's bound on the blocks of one request.
const notionMaxChildren = 100

// notion is the catalog's `notion` adapter: pages, blocks, data sources
// and search with one integration token.
type notion struct {
	api *api
	ops ops
}

// newNotion builds the adapter from a manifest entry's config: api_key
// (an integration token), base_url (default Notion's v1 API).
func newNotion(name string, config map[string]any, opts Options) (runner.Adapter, error) {
	s, err := readSettings(config, "api_key", "base_url")
	if err != nil {
		return nil, err
	}
	key, err := s.text("api_key", true, "")
	if err != nil {
		return nil, err
	}
	base, err := s.baseURL("https://api.notion.com/v1")
	if err != nil {
		return nil, err
	}
	header := http.Header{"Authorization": {"Bearer " + key}, "Notion-Version": {NotionVersion}}
	// Notion's 429 goes to a person (spec §13.4): its Retry-After is not
	// reliable enough to wait on unattended.
	a, err := newAPI(name, base, header, opts, rules{actions: map[errcode.Code]errcode.AgentAction{
		errcode.ServiceRateLimited: errcode.ActionWaitForHuman,
	}})
	if err != nil {
		return nil, err
	}
	n := &notion{api: a}
	n.ops = ops{
		"fetch":  {"get_page": n.getPage, "list_block_children": n.listBlockChildren, "query_data_source": n.queryDataSource, "search": n.search},
		"create": {"create_page": n.createPage, "append_block_children": n.appendBlockChildren},
		"update": {"update_page": n.updatePage},
		"delete": {"delete_block": n.deleteBlock},
	}
	return n, nil
}

func (n *notion) Call(ctx context.Context, call runner.AdapterCall) (any, error) {
	return n.ops.dispatch(ctx, n.api.name, errcode.AdapterOpUnsupported, call)
}

// send makes one request and checks the answer has what the operation
// returns: an id (a page or block) or a results array (a list).
func (n *notion) send(ctx context.Context, call runner.AdapterCall, r request, want string) (any, error) {
	var out map[string]any
	resp, err := n.api.call(ctx, call.Config, r, &out)
	if err != nil {
		return nil, notionError(err)
	}
	switch want {
	case "id":
		if id, _ := out["id"].(string); id == "" {
			return nil, n.api.shapeInvalid(r, resp, "the answer has no id")
		}
	case "results":
		if _, ok := out["results"].([]any); !ok {
			return nil, n.api.shapeInvalid(r, resp, "the answer has no results array")
		}
	}
	return reply(resp.status, out), nil
}

// notionError adds Notion's code and message ({"object": "error", "code",
// "message"}) to a refusal; a 503 (Notion is briefly unavailable, often
// for one workspace) waits for a person rather than being reported.
func notionError(err error) error {
	err = serviceMessage(err, func(body map[string]any) (string, string) {
		code, _ := body["code"].(string)
		message, _ := body["message"].(string)
		return code, message
	})
	if we := asWorkflowError(err); we != nil && we.Code == errcode.ServiceHTTP5xx && we.Details["status"] == http.StatusServiceUnavailable {
		we.AgentAction = errcode.ActionWaitForHuman
	}
	return err
}

// notionID is a required id param as a path segment.
func notionID(p args, key string) (string, error) {
	v, err := p.text(key, true)
	return url.PathEscape(v), err
}

// notionPaging is start_cursor and page_size as query params (GET lists).
func notionPaging(p args) (url.Values, error) {
	q := url.Values{}
	cursor, err := p.text("start_cursor", false)
	if err != nil {
		return nil, err
	}
	if cursor != "" {
		q.Set("start_cursor", cursor)
	}
	size, has, err := p.integer("page_size", false)
	if err != nil {
		return nil, err
	}
	if has {
		if size < 1 || size > 100 {
			return nil, invalid("param 'page_size' must be between 1 and 100")
		}
		q.Set("page_size", strconv.FormatInt(size, 10))
	}
	return q, nil
}

// notionFilterProperties is filter_properties as repeated query params.
func notionFilterProperties(p args) (url.Values, error) {
	props, err := p.texts("filter_properties", false)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	for _, v := range props {
		q.Add("filter_properties", v)
	}
	return q, nil
}

func (n *notion) getPage(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	if err := p.only("get_page", "page_id", "filter_properties"); err != nil {
		return nil, err
	}
	page, err := notionID(p, "page_id")
	if err != nil {
		return nil, err
	}
	q, err := notionFilterProperties(p)
	if err != nil {
		return nil, err
	}
	return n.send(ctx, call, request{method: http.MethodGet, path: "/pages/" + page, query: q}, "id")
}

func (n *notion) listBlockChildren(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	if err := p.only("list_block_children", "block_id", "start_cursor", "page_size"); err != nil {
		return nil, err
	}
	block, err := notionID(p, "block_id")
	if err != nil {
		return nil, err
	}
	q, err := notionPaging(p)
	if err != nil {
		return nil, err
	}
	return n.send(ctx, call, request{method: http.MethodGet, path: "/blocks/" + block + "/children", query: q}, "results")
}

// notionPagingBody checks start_cursor and page_size and copies them with keys
// into a POST body.
func notionPagingBody(p args, keys ...string) (map[string]any, error) {
	if _, err := notionPaging(p); err != nil {
		return nil, err
	}
	return copyParams(p, append(keys, "start_cursor", "page_size")...), nil
}

func (n *notion) queryDataSource(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	if err := p.only("query_data_source", "data_source_id", "filter", "sorts", "start_cursor", "page_size", "filter_properties", "in_trash"); err != nil {
		return nil, err
	}
	source, err := notionID(p, "data_source_id")
	if err != nil {
		return nil, err
	}
	if _, err := p.object("filter", false); err != nil {
		return nil, err
	}
	if _, err := listParam(p, "sorts", false); err != nil {
		return nil, err
	}
	if _, _, err := boolParam(p, "in_trash"); err != nil {
		return nil, err
	}
	q, err := notionFilterProperties(p)
	if err != nil {
		return nil, err
	}
	body, err := notionPagingBody(p, "filter", "sorts", "in_trash")
	if err != nil {
		return nil, err
	}
	return n.send(ctx, call, request{method: http.MethodPost, path: "/data_sources/" + source + "/query", query: q, body: body}, "results")
}

func (n *notion) search(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	if err := p.only("search", "query", "filter", "sort", "start_cursor", "page_size"); err != nil {
		return nil, err
	}
	if _, err := p.text("query", false); err != nil {
		return nil, err
	}
	filter, err := p.object("filter", false)
	if err != nil {
		return nil, err
	}
	if filter != nil {
		v := filter["value"]
		if filter["property"] != "object" || len(filter) != 2 || (v != "page" && v != "database" && v != "data_source") {
			return nil, invalid("param 'filter' must be {property: object, value: page|database|data_source}")
		}
	}
	if _, err := p.object("sort", false); err != nil {
		return nil, err
	}
	body, err := notionPagingBody(p, "query", "filter", "sort")
	if err != nil {
		return nil, err
	}
	return n.send(ctx, call, request{method: http.MethodPost, path: "/search", body: body}, "results")
}

// notionParent is create_page's parent in Notion's typed form.
func notionParent(p args) (map[string]any, error) {
	raw, err := p.object("parent", true)
	if err != nil {
		return nil, err
	}
	if len(raw) == 1 {
		for _, key := range []string{"page_id", "data_source_id"} {
			if v, _ := raw[key].(string); v != "" {
				return map[string]any{"type": key, key: v}, nil
			}
		}
		if raw["workspace"] == true {
			return map[string]any{"type": "workspace", "workspace": true}, nil
		}
	}
	return nil, invalid("param 'parent' must be one of {page_id: <id>}, {data_source_id: <id>}, {workspace: true}")
}

// notionBlocks checks a list of blocks: at most 100, each an object with a type.
func notionBlocks(p args, key string, required bool) ([]any, error) {
	l, err := listParam(p, key, required)
	if err != nil || l == nil {
		return l, err
	}
	if required && len(l) == 0 {
		return nil, invalid("param '%s' must not be empty", key)
	}
	if len(l) > notionMaxChildren {
		return nil, invalid("param '%s' has %d blocks; Notion takes at most %d per request", key, len(l), notionMaxChildren)
	}
	for i, b := range l {
		m, _ := b.(map[string]any)
		if t, _ := m["type"].(string); t == "" {
			return nil, invalid("param '%s'[%d] must be a block object with a type", key, i)
		}
	}
	return l, nil
}

func (n *notion) createPage(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	if err := p.only("create_page", "parent", "properties", "children", "markdown", "icon", "cover"); err != nil {
		return nil, err
	}
	par, err := notionParent(p)
	if err != nil {
		return nil, err
	}
	if _, err := notionBlocks(p, "children", false); err != nil {
		return nil, err
	}
	if _, err := p.text("markdown", false); err != nil {
		return nil, err
	}
	if p["children"] != nil && p["markdown"] != nil {
		return nil, invalid("params 'children' and 'markdown' exclude each other: give the page's content one way")
	}
	for _, k := range []string{"properties", "icon", "cover"} {
		if _, err := p.object(k, false); err != nil {
			return nil, err
		}
	}
	body := copyParams(p, "properties", "children", "markdown", "icon", "cover")
	body["parent"] = par
	// once: a create sent again after a network failure may make the page
	// twice.
	return n.send(ctx, call, request{method: http.MethodPost, path: "/pages", body: body, once: true}, "id")
}

func (n *notion) appendBlockChildren(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	if err := p.only("append_block_children", "block_id", "children", "position"); err != nil {
		return nil, err
	}
	block, err := notionID(p, "block_id")
	if err != nil {
		return nil, err
	}
	if _, err := notionBlocks(p, "children", true); err != nil {
		return nil, err
	}
	pos, err := p.object("position", false)
	if err != nil {
		return nil, err
	}
	if pos != nil {
		after, _ := pos["after_block"].(map[string]any)
		afterID, _ := after["id"].(string)
		switch t := pos["type"]; {
		case (t == "start" || t == "end") && len(pos) == 1:
		case t == "after_block" && len(pos) == 2 && afterID != "":
		default:
			return nil, invalid("param 'position' must be {type: start}, {type: end} or {type: after_block, after_block: {id: <block id>}}")
		}
	}
	body := copyParams(p, "children", "position")
	// once: appended again after a network failure, the blocks may appear
	// twice.
	return n.send(ctx, call, request{method: http.MethodPatch, path: "/blocks/" + block + "/children", body: body, once: true}, "results")
}

func (n *notion) updatePage(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	if _, has := p["archived"]; has {
		return nil, invalid("param 'archived' is deprecated in the Notion API: use 'in_trash' (true moves the page to the trash, false restores it)")
	}
	if err := p.only("update_page", "page_id", "properties", "icon", "cover", "in_trash", "is_locked"); err != nil {
		return nil, err
	}
	page, err := notionID(p, "page_id")
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"properties", "icon", "cover"} {
		if _, err := p.object(k, false); err != nil {
			return nil, err
		}
	}
	for _, k := range []string{"in_trash", "is_locked"} {
		if _, _, err := boolParam(p, k); err != nil {
			return nil, err
		}
	}
	body := copyParams(p, "properties", "icon", "cover", "in_trash", "is_locked")
	return n.send(ctx, call, request{method: http.MethodPatch, path: "/pages/" + page, body: body}, "id")
}

func (n *notion) deleteBlock(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	if err := p.only("delete_block", "block_id"); err != nil {
		return nil, err
	}
	block, err := notionID(p, "block_id")
	if err != nil {
		return nil, err
	}
	return n.send(ctx, call, request{method: http.MethodDelete, path: "/blocks/" + block}, "id")
}
