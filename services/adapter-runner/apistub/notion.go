package apistub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Notion stands in for Notion's REST API (v1, Notion-Version 2026-03-11):
// pages, blocks and their children, data sources, search, cursor paging,
// x-notion-request-id on every answer and Notion's error bodies
// ({"object": "error", "status", "code", "message"}). A data source query
// evaluates filters of the form {property, <type>: {equals: v}} (others
// answer 400 validation_error) and does not apply sorts.
type Notion struct {
	stub
	// Key is the integration token the stub accepts; Version the
	// Notion-Version it requires.
	Key, Version string

	pages    map[string]map[string]any
	blocks   map[string]map[string]any
	children map[string][]string // parent id → block ids, in order
	sources  map[string]string   // data source id → title
	order    []string            // pages and data sources, in creation order (search)
	next     int
}

// notionTime is every created_time and last_edited_time: stable answers.
const notionTime = "2026-03-01T12:00:00.000Z"

// NewNotion starts a stub with an empty workspace; t.Cleanup closes it.
func NewNotion(t testing.TB) *Notion {
	n := &Notion{Key: "ntn_stub_secret", Version: "2026-03-11", pages: map[string]map[string]any{},
		blocks: map[string]map[string]any{}, children: map[string][]string{}, sources: map[string]string{}}
	n.start(t, n.serve)
	return n
}

// URL is the adapter's base_url: the API's /v1.
func (n *Notion) URL() string { return n.url("/v1") }

func (n *Notion) newID() string {
	n.next++
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", n.next)
}

// AddDataSource makes a data source titled title and returns its id.
func (n *Notion) AddDataSource(title string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	id := n.newID()
	n.sources[id] = title
	n.order = append(n.order, id)
	return id
}

// AddPage makes a page under parent (typed, as Notion writes it: {type:
// page_id, page_id: …}) with properties, and returns its id.
func (n *Notion) AddPage(parent, properties map[string]any) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addPageLocked(parent, properties)["id"].(string)
}

// AddBlock appends a block of type with content under parent and returns
// its id.
func (n *Notion) AddBlock(parent, kind string, content map[string]any) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	b := n.newBlockLocked(parent, map[string]any{"type": kind, kind: content})
	n.children[parent] = append(n.children[parent], b["id"].(string))
	return b["id"].(string)
}

// Page is a page's current object (nil when there is none).
func (n *Notion) Page(id string) map[string]any {
	n.mu.Lock()
	defer n.mu.Unlock()
	return notionClone(n.pages[id])
}

// Children are a block's (or page's) child blocks, in order.
func (n *Notion) Children(parent string) []map[string]any {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []map[string]any
	for _, id := range n.children[parent] {
		out = append(out, notionClone(n.blocks[id]))
	}
	return out
}

func notionClone(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

func (n *Notion) addPageLocked(parent, properties map[string]any) map[string]any {
	id := n.newID()
	if properties == nil {
		properties = map[string]any{}
	}
	p := map[string]any{"object": "page", "id": id, "created_time": notionTime, "last_edited_time": notionTime,
		"in_trash": false, "is_locked": false, "parent": parent, "properties": properties, "icon": nil, "cover": nil,
		"url": "https://www.notion.so/" + strings.ReplaceAll(id, "-", "")}
	n.pages[id] = p
	n.order = append(n.order, id)
	return p
}

func (n *Notion) newBlockLocked(parent string, b map[string]any) map[string]any {
	out := notionClone(b)
	out["object"], out["id"], out["created_time"], out["last_edited_time"] = "block", n.newID(), notionTime, notionTime
	out["has_children"], out["in_trash"] = false, false
	ptype := "block_id"
	if _, isPage := n.pages[parent]; isPage {
		ptype = "page_id"
	}
	out["parent"] = map[string]any{"type": ptype, ptype: parent}
	n.blocks[out["id"].(string)] = out
	if pb := n.blocks[parent]; pb != nil {
		pb["has_children"] = true
	}
	return out
}

// Notion's refusals.
var (
	NotionRateLimited = Fault{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "1"},
		Body: `{"object":"error","status":429,"code":"rate_limited","message":"You have been rate limited. Please try again in a few minutes."}`}
	NotionUnavailable = Fault{Status: http.StatusServiceUnavailable,
		Body: `{"object":"error","status":503,"code":"service_unavailable","message":"Notion is unavailable, please try again later."}`}
	NotionConflict = Fault{Status: http.StatusConflict,
		Body: `{"object":"error","status":409,"code":"conflict_error","message":"Conflict occurred while saving. Please try again."}`}
)

func notionFail(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]any{"object": "error", "status": status, "code": code, "message": message})
}

func (n *Notion) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("x-notion-request-id", "req-"+strconv.Itoa(len(n.Requests())))
	if r.Header.Get("Authorization") != "Bearer "+n.Key {
		notionFail(w, http.StatusUnauthorized, "unauthorized", "API token is invalid.")
		return
	}
	if v := r.Header.Get("Notion-Version"); v != n.Version {
		notionFail(w, http.StatusBadRequest, "missing_version", fmt.Sprintf("Notion-Version header failed validation: Notion-Version header should be %q, instead was %q.", n.Version, v))
		return
	}
	var body map[string]any
	if r.Method == http.MethodPost || r.Method == http.MethodPatch {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			notionFail(w, http.StatusBadRequest, "invalid_json", "Error parsing JSON body.")
			return
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
	route := r.Method + " " + parts[0]
	if len(parts) == 3 {
		route += " _ " + parts[2]
	} else if len(parts) == 2 {
		route += " _"
	}
	switch route {
	case "GET pages _":
		n.getPage(w, r, parts[1])
	case "PATCH pages _":
		n.updatePage(w, parts[1], body)
	case "POST pages":
		n.createPage(w, body)
	case "GET blocks _ children":
		n.listChildren(w, r, parts[1])
	case "PATCH blocks _ children":
		n.appendChildren(w, parts[1], body)
	case "DELETE blocks _":
		n.deleteBlock(w, parts[1])
	case "POST data_sources _ query":
		n.query(w, parts[1], body)
	case "POST search":
		n.search(w, body)
	default:
		notionFail(w, http.StatusBadRequest, "invalid_request_url", "Invalid request URL.")
	}
}

func notionNotFound(w http.ResponseWriter, kind, id string) {
	notionFail(w, http.StatusNotFound, "object_not_found",
		fmt.Sprintf("Could not find %s with ID: %s. Make sure the relevant pages and databases are shared with your integration.", kind, id))
}

func (n *Notion) getPage(w http.ResponseWriter, r *http.Request, id string) {
	p := n.pages[id]
	if p == nil {
		notionNotFound(w, "page", id)
		return
	}
	out := notionClone(p)
	if keep := r.URL.Query()["filter_properties"]; len(keep) > 0 {
		props := map[string]any{}
		for k, v := range out["properties"].(map[string]any) {
			if slices.Contains(keep, k) {
				props[k] = v
			}
		}
		out["properties"] = props
	}
	writeJSON(w, http.StatusOK, out)
}

func (n *Notion) updatePage(w http.ResponseWriter, id string, body map[string]any) {
	p := n.pages[id]
	if p == nil {
		notionNotFound(w, "page", id)
		return
	}
	if props, ok := body["properties"].(map[string]any); ok {
		if p["is_locked"] == true {
			notionFail(w, http.StatusBadRequest, "validation_error", "The page is locked; unlock it to edit its properties.")
			return
		}
		for k, v := range props {
			p["properties"].(map[string]any)[k] = v
		}
	}
	for _, k := range []string{"icon", "cover", "in_trash", "is_locked"} {
		if v, ok := body[k]; ok {
			p[k] = v
		}
	}
	writeJSON(w, http.StatusOK, p)
}

func (n *Notion) createPage(w http.ResponseWriter, body map[string]any) {
	parent, _ := body["parent"].(map[string]any)
	kind, _ := parent["type"].(string)
	switch {
	case kind == "workspace" && parent["workspace"] == true:
	case kind == "page_id" && n.pages[fmt.Sprint(parent["page_id"])] != nil:
	case kind == "data_source_id" && n.sources[fmt.Sprint(parent["data_source_id"])] != "":
	case kind == "page_id" || kind == "data_source_id":
		notionNotFound(w, strings.TrimSuffix(kind, "_id"), fmt.Sprint(parent[kind]))
		return
	default:
		notionFail(w, http.StatusBadRequest, "validation_error", "body failed validation: body.parent should be a typed parent object.")
		return
	}
	props, _ := body["properties"].(map[string]any)
	p := n.addPageLocked(parent, props)
	for _, k := range []string{"icon", "cover"} {
		if v, ok := body[k]; ok {
			p[k] = v
		}
	}
	kids, _ := body["children"].([]any)
	if md, ok := body["markdown"].(string); ok {
		for _, line := range strings.Split(md, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				kids = append(kids, map[string]any{"type": "paragraph", "paragraph": map[string]any{"rich_text": []any{map[string]any{"type": "text", "text": map[string]any{"content": line}}}}})
			}
		}
	}
	id := p["id"].(string)
	for _, k := range kids {
		b, _ := k.(map[string]any)
		n.children[id] = append(n.children[id], n.newBlockLocked(id, b)["id"].(string))
	}
	writeJSON(w, http.StatusOK, p)
}

// exists reports whether id is a page or a block that takes children.
func (n *Notion) exists(id string) bool { return n.pages[id] != nil || n.blocks[id] != nil }

// notionPaged answers Notion's list object over items from start_cursor (an
// item's id) with page_size (default and maximum 100).
func notionPaged(w http.ResponseWriter, items []map[string]any, cursor string, size int, kind string) {
	if size <= 0 || size > 100 {
		size = 100
	}
	start := 0
	if cursor != "" {
		start = slices.IndexFunc(items, func(m map[string]any) bool { return m["id"] == cursor })
		if start < 0 {
			notionFail(w, http.StatusBadRequest, "validation_error", "start_cursor provided is invalid: "+cursor)
			return
		}
	}
	end := min(start+size, len(items))
	out := map[string]any{"object": "list", "results": items[start:end], "has_more": end < len(items), "next_cursor": nil, "type": kind, kind: map[string]any{}}
	if end < len(items) {
		out["next_cursor"] = items[end]["id"]
	}
	writeJSON(w, http.StatusOK, out)
}

func (n *Notion) listChildren(w http.ResponseWriter, r *http.Request, id string) {
	if !n.exists(id) {
		notionNotFound(w, "block", id)
		return
	}
	var items []map[string]any
	for _, c := range n.children[id] {
		if n.blocks[c]["in_trash"] != true {
			items = append(items, n.blocks[c])
		}
	}
	size, _ := strconv.Atoi(r.URL.Query().Get("page_size"))
	notionPaged(w, items, r.URL.Query().Get("start_cursor"), size, "block")
}

func (n *Notion) appendChildren(w http.ResponseWriter, id string, body map[string]any) {
	if !n.exists(id) {
		notionNotFound(w, "block", id)
		return
	}
	kids, _ := body["children"].([]any)
	if len(kids) == 0 || len(kids) > 100 {
		notionFail(w, http.StatusBadRequest, "validation_error", "body failed validation: body.children should have 1 to 100 items.")
		return
	}
	at := len(n.children[id])
	if pos, ok := body["position"].(map[string]any); ok {
		switch pos["type"] {
		case "start":
			at = 0
		case "after_block":
			after, _ := pos["after_block"].(map[string]any)
			i := slices.Index(n.children[id], fmt.Sprint(after["id"]))
			if i < 0 {
				notionNotFound(w, "block", fmt.Sprint(after["id"]))
				return
			}
			at = i + 1
		}
	}
	var made []map[string]any
	var ids []string
	for _, k := range kids {
		b, _ := k.(map[string]any)
		nb := n.newBlockLocked(id, b)
		made, ids = append(made, nb), append(ids, nb["id"].(string))
	}
	n.children[id] = slices.Insert(n.children[id], at, ids...)
	notionPaged(w, made, "", 100, "block")
}

func (n *Notion) deleteBlock(w http.ResponseWriter, id string) {
	b := n.blocks[id]
	if b == nil {
		if p := n.pages[id]; p != nil { // a page is a block too
			p["in_trash"] = true
			writeJSON(w, http.StatusOK, p)
			return
		}
		notionNotFound(w, "block", id)
		return
	}
	b["in_trash"] = true
	writeJSON(w, http.StatusOK, b)
}

// notionPlain is a property's value as text: title and rich_text as their
// plain text, select and status as their name, numbers and checkboxes as
// written.
func notionPlain(prop any) string {
	m, _ := prop.(map[string]any)
	for _, k := range []string{"title", "rich_text"} {
		if parts, ok := m[k].([]any); ok {
			var b strings.Builder
			for _, p := range parts {
				pm, _ := p.(map[string]any)
				text, _ := pm["text"].(map[string]any)
				b.WriteString(fmt.Sprint(text["content"]))
			}
			return b.String()
		}
	}
	for _, k := range []string{"select", "status"} {
		if s, ok := m[k].(map[string]any); ok {
			return fmt.Sprint(s["name"])
		}
	}
	for _, k := range []string{"number", "checkbox"} {
		if v, ok := m[k]; ok {
			return fmt.Sprint(v)
		}
	}
	return ""
}

func (n *Notion) query(w http.ResponseWriter, id string, body map[string]any) {
	if n.sources[id] == "" {
		notionNotFound(w, "data_source", id)
		return
	}
	match := func(map[string]any) bool { return true }
	if f, ok := body["filter"].(map[string]any); ok {
		prop, _ := f["property"].(string)
		var want any
		for k, v := range f {
			if cond, ok := v.(map[string]any); ok && k != "property" {
				want = cond["equals"]
			}
		}
		if prop == "" || want == nil || len(f) != 2 {
			notionFail(w, http.StatusBadRequest, "validation_error", "body failed validation: the stub evaluates filters of the form {property, <type>: {equals: value}} only.")
			return
		}
		match = func(p map[string]any) bool {
			return notionPlain(p["properties"].(map[string]any)[prop]) == fmt.Sprint(want)
		}
	}
	trash := body["in_trash"] == true
	var items []map[string]any
	for _, pid := range n.order {
		p := n.pages[pid]
		if p == nil {
			continue
		}
		parent, _ := p["parent"].(map[string]any)
		if parent["data_source_id"] == id && (p["in_trash"] == true) == trash && match(p) {
			items = append(items, p)
		}
	}
	size, _ := body["page_size"].(float64)
	cursor, _ := body["start_cursor"].(string)
	notionPaged(w, items, cursor, int(size), "page_or_data_source")
}

func (n *Notion) search(w http.ResponseWriter, body map[string]any) {
	query, _ := body["query"].(string)
	want := ""
	if f, ok := body["filter"].(map[string]any); ok {
		want = fmt.Sprint(f["value"])
	}
	var items []map[string]any
	for _, id := range n.order {
		var item map[string]any
		title := ""
		if p := n.pages[id]; p != nil {
			if p["in_trash"] == true {
				continue
			}
			item = p
			for _, v := range p["properties"].(map[string]any) {
				if m, _ := v.(map[string]any); m["title"] != nil {
					title = notionPlain(v)
				}
			}
		} else {
			title = n.sources[id]
			item = map[string]any{"object": "data_source", "id": id, "title": []any{map[string]any{"type": "text", "text": map[string]any{"content": title}, "plain_text": title}}}
		}
		if (want == "" || item["object"] == want) && strings.Contains(strings.ToLower(title), strings.ToLower(query)) {
			items = append(items, item)
		}
	}
	size, _ := body["page_size"].(float64)
	cursor, _ := body["start_cursor"].(string)
	notionPaged(w, items, cursor, int(size), "page_or_data_source")
}

// NotionExample seeds s with a Tasks data source of two pages and is
// query_data_source of the tasks in progress, as a `notion` manifest entry
// pointing at s runs it.
func NotionExample(s *Notion) Example {
	tasks := s.AddDataSource("Tasks")
	task := func(name, status string) string {
		return s.AddPage(map[string]any{"type": "data_source_id", "data_source_id": tasks}, map[string]any{
			"Name":   map[string]any{"type": "title", "title": []any{map[string]any{"type": "text", "text": map[string]any{"content": name}}}},
			"Status": map[string]any{"type": "status", "status": map[string]any{"name": status}},
		})
	}
	doing := task("Ship v2", "In Progress")
	task("Write docs", "Done")
	return Example{
		Adapter:   "notion",
		Config:    map[string]any{"api_key": "${secret:NOTION_API_KEY}", "base_url": s.URL()},
		Env:       map[string]string{"NOTION_API_KEY": s.Key},
		Method:    "fetch",
		Operation: "query_data_source",
		Params: map[string]any{"data_source_id": tasks,
			"filter": map[string]any{"property": "Status", "status": map[string]any{"equals": "In Progress"}}},
		Output: map[string]any{"object": "list", "results": []any{s.Page(doing)}, "has_more": false, "next_cursor": nil,
			"type": "page_or_data_source", "page_or_data_source": map[string]any{}},
	}
}
