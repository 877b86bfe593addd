package adapters

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/pkg/runner"
)

// NameAirtable is the catalog name of the Airtable adapter.
const NameAirtable = "airtable"

// Airtable's limits the adapter keeps (spec §13.3).
const (
	airtableDefaultPages = 3
	airtableMaxPages     = 10
	airtableDefaultBytes = 100_000
	airtableMaxBytes     = 1_000_000
	// airtableMaxDeletes is Airtable's own bound on records[] per DELETE;
	// the adapter does not split a larger list (a partial delete would
	// leave the step half done).
	airtableMaxDeletes = 10
	// airtableRetryAfter: Airtable's 429 names no wait; its documentation
	// asks for 30 seconds.
	airtableRetryAfter = 30 * time.Second
)

var airtableBaseID = regexp.MustCompile(`^app[a-zA-Z0-9]{14}$`)

// airtable is the catalog's `airtable` adapter: record operations on the
// one base of its construction (one manifest entry per base).
type airtable struct {
	api    *api
	baseID string
	ops    ops
}

// newAirtable builds the adapter from a manifest entry's config: api_key
// (a personal access token), base_id, base_url (default Airtable's v0 API).
func newAirtable(name string, config map[string]any, opts Options) (runner.Adapter, error) {
	s, err := readSettings(config, "api_key", "base_id", "base_url")
	if err != nil {
		return nil, err
	}
	key, err := s.text("api_key", true, "")
	if err != nil {
		return nil, err
	}
	baseID, err := s.text("base_id", true, "")
	if err != nil {
		return nil, err
	}
	if !airtableBaseID.MatchString(baseID) {
		return nil, fmt.Errorf("config.base_id '%s' is not an Airtable base id (app followed by 14 letters or digits)", baseID)
	}
	base, err := s.baseURL("https://api.airtable.com/v0")
	if err != nil {
		return nil, err
	}
	a, err := newAPI(name, base, http.Header{"Authorization": {"Bearer " + key}}, opts, rules{defaultRetryAfter: airtableRetryAfter})
	if err != nil {
		return nil, err
	}
	at := &airtable{api: a, baseID: baseID}
	at.ops = ops{
		"fetch":  {"get_record": at.getRecord, "list_records": at.listRecords, "search_records": at.searchRecords},
		"create": {"create_record": at.createRecord},
		"update": {"upsert_record": at.upsertRecord, "update_record": at.updateRecord},
		"delete": {"delete_records": at.deleteRecords},
	}
	return at, nil
}

func (at *airtable) Call(ctx context.Context, call runner.AdapterCall) (any, error) {
	return at.ops.dispatch(ctx, at.api.name, errcode.AdapterOpUnsupported, call)
}

// path is /{base_id}/{table}[/{record_id}], each segment escaped.
func (at *airtable) path(table string, record ...string) string {
	p := "/" + at.baseID + "/" + url.PathEscape(table)
	for _, r := range record {
		p += "/" + url.PathEscape(r)
	}
	return p
}

// send makes one request and checks the answer has what the operation
// returns: an id (a record) or a records array (a list).
func (at *airtable) send(ctx context.Context, call runner.AdapterCall, r request, want string) (answer, map[string]any, error) {
	var out map[string]any
	resp, err := at.api.call(ctx, call.Config, r, &out)
	if err != nil {
		return answer{}, nil, serviceMessage(err, airtableError)
	}
	switch want {
	case "id":
		if id, _ := out["id"].(string); id == "" {
			return answer{}, nil, at.api.shapeInvalid(r, resp, "the answer has no record id")
		}
	case "records":
		if _, ok := out["records"].([]any); !ok {
			return answer{}, nil, at.api.shapeInvalid(r, resp, "the answer has no records array")
		}
	}
	return resp, out, nil
}

// airtableError reads Airtable's error body: {"error": {"type", "message"}}
// or {"error": "NOT_FOUND"}.
func airtableError(body map[string]any) (kind, message string) {
	switch e := body["error"].(type) {
	case string:
		return e, ""
	case map[string]any:
		kind, _ = e["type"].(string)
		message, _ = e["message"].(string)
	}
	return kind, message
}

func (at *airtable) getRecord(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	if err := p.only("get_record", "table", "record_id"); err != nil {
		return nil, err
	}
	table, err := p.text("table", true)
	if err != nil {
		return nil, err
	}
	id, err := p.text("record_id", true)
	if err != nil {
		return nil, err
	}
	resp, out, err := at.send(ctx, call, request{method: http.MethodGet, path: at.path(table, id)}, "id")
	if err != nil {
		return nil, err
	}
	return reply(resp.status, out), nil
}

// airtableQuery is list_records' query: filterByFormula, view, maxRecords,
// fields[], offset and sort[i][field]/sort[i][direction] as Airtable reads
// them.
func airtableQuery(p args) (url.Values, error) {
	q := url.Values{}
	for param, name := range map[string]string{"filter_by_formula": "filterByFormula", "view": "view", "offset": "offset"} {
		v, err := p.text(param, false)
		if err != nil {
			return nil, err
		}
		if v != "" {
			q.Set(name, v)
		}
	}
	if n, has, err := p.integer("max_records", false); err != nil {
		return nil, err
	} else if has {
		if n < 1 {
			return nil, invalid("param 'max_records' must be at least 1")
		}
		q.Set("maxRecords", strconv.FormatInt(n, 10))
	}
	fields, err := p.texts("fields", false)
	if err != nil {
		return nil, err
	}
	for _, f := range fields {
		q.Add("fields[]", f)
	}
	sorts, err := listParam(p, "sort", false)
	if err != nil {
		return nil, err
	}
	for i, s := range sorts {
		// A malformed entry is refused, not skipped: the records would
		// come back in another order than the step asks for.
		e, _ := s.(map[string]any)
		field, _ := e["field"].(string)
		dir, hasDir := e["direction"]
		if field == "" || len(e) > 2 || (len(e) == 2 && !hasDir) || (hasDir && dir != "asc" && dir != "desc") {
			return nil, invalid("param 'sort'[%d] must be {field: <name>, direction?: asc|desc}", i)
		}
		q.Set(fmt.Sprintf("sort[%d][field]", i), field)
		if hasDir {
			q.Set(fmt.Sprintf("sort[%d][direction]", i), dir.(string))
		}
	}
	return q, nil
}

func (at *airtable) listRecords(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	if err := p.only("list_records", "table", "filter_by_formula", "view", "max_records", "fields", "offset", "sort",
		"fetch_all", "max_pages", "max_bytes"); err != nil {
		return nil, err
	}
	table, err := p.text("table", true)
	if err != nil {
		return nil, err
	}
	q, err := airtableQuery(p)
	if err != nil {
		return nil, err
	}
	all, _, err := boolParam(p, "fetch_all")
	if err != nil {
		return nil, err
	}
	pages, err := airtableCap(p, "max_pages", airtableDefaultPages, airtableMaxPages, all)
	if err != nil {
		return nil, err
	}
	limit, err := airtableCap(p, "max_bytes", airtableDefaultBytes, airtableMaxBytes, all)
	if err != nil {
		return nil, err
	}
	r := request{method: http.MethodGet, path: at.path(table), query: q}
	if !all {
		resp, out, err := at.send(ctx, call, r, "records")
		if err != nil {
			return nil, err
		}
		return reply(resp.status, out), nil
	}
	return at.fetchAll(ctx, call, r, pages, limit)
}

// airtableCap reads max_pages or max_bytes: def when absent, lowered to ceiling
// when above it (spec §13.3), refused below 1 or without fetch_all.
func airtableCap(p args, key string, def, ceiling int64, fetchAll bool) (int64, error) {
	n, has, err := p.integer(key, false)
	switch {
	case err != nil:
		return 0, err
	case !has:
		return def, nil
	case !fetchAll:
		return 0, invalid("param '%s' is read only with fetch_all: true", key)
	case n < 1:
		return 0, invalid("param '%s' must be at least 1", key)
	}
	return min(n, ceiling), nil
}

// fetchAll follows Airtable's offset until the last page or a cap: the
// page that crosses a cap is kept, and the answer says which cap stopped
// it and the offset to go on from.
func (at *airtable) fetchAll(ctx context.Context, call runner.AdapterCall, r request, maxPages, maxBytes int64) (any, error) {
	var records []any
	status := http.StatusOK
	for pages := int64(1); ; pages++ {
		resp, out, err := at.send(ctx, call, r, "records")
		if err != nil {
			return nil, err
		}
		status = resp.status
		records = append(records, out["records"].([]any)...)
		next, _ := out["offset"].(string)
		reason := ""
		switch {
		case next == "":
		case pages >= maxPages:
			reason = "page_limit"
		case jsonSize(records) > maxBytes:
			reason = "byte_limit"
		}
		if next == "" || reason != "" {
			data := map[string]any{"records": records, "truncated": reason != ""}
			if reason != "" {
				data["truncation_reason"], data["offset"] = reason, next
			}
			return reply(status, data), nil
		}
		q := url.Values{}
		for k, v := range r.query {
			q[k] = v
		}
		q.Set("offset", next)
		r.query = q
	}
}

// jsonSize is the length of v's JSON, HTML characters unescaped (the size
// the records take in the step's output).
func jsonSize(v any) int64 {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return int64(b.Len() - 1) // Encode adds a newline
}

// airtableSearch is FIND("term", {field}) for one field, OR(…) of them for
// several; " and \ in the term are escaped so the term cannot end the
// string and write formula of its own.
func airtableSearch(term string, fields []string) string {
	escaped := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(term)
	finds := make([]string, len(fields))
	for i, f := range fields {
		finds[i] = `FIND("` + escaped + `", {` + f + `})`
	}
	if len(finds) == 1 {
		return finds[0]
	}
	return "OR(" + strings.Join(finds, ",") + ")"
}

func (at *airtable) searchRecords(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	if err := p.only("search_records", "table", "search_term", "fields", "view", "max_records"); err != nil {
		return nil, err
	}
	table, err := p.text("table", true)
	if err != nil {
		return nil, err
	}
	term, err := p.text("search_term", true)
	if err != nil {
		return nil, err
	}
	// Named by the workflow: the adapter reads no schema.
	fields, err := nonEmptyTexts(p, "fields", 0)
	if err != nil {
		return nil, err
	}
	for i, f := range fields {
		// A field reference cannot escape its braces.
		if strings.ContainsAny(f, "{}") {
			return nil, invalid("param 'fields'[%d] '%s' must not contain '{' or '}'", i, f)
		}
	}
	q, err := airtableQuery(args{"view": p["view"], "max_records": p["max_records"], "filter_by_formula": airtableSearch(term, fields)})
	if err != nil {
		return nil, err
	}
	resp, out, err := at.send(ctx, call, request{method: http.MethodGet, path: at.path(table), query: q}, "records")
	if err != nil {
		return nil, err
	}
	return reply(resp.status, out), nil
}

// airtableWrite is {fields, typecast?} of a record write.
func airtableWrite(p args) (table string, body map[string]any, err error) {
	if table, err = p.text("table", true); err != nil {
		return "", nil, err
	}
	fields, err := p.object("fields", true)
	if err != nil {
		return "", nil, err
	}
	body = map[string]any{"fields": fields}
	typecast, has, err := boolParam(p, "typecast")
	if err != nil {
		return "", nil, err
	}
	if has {
		body["typecast"] = typecast
	}
	return table, body, nil
}

func (at *airtable) createRecord(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	if err := p.only("create_record", "table", "fields", "typecast"); err != nil {
		return nil, err
	}
	table, body, err := airtableWrite(p)
	if err != nil {
		return nil, err
	}
	resp, out, err := at.send(ctx, call, request{method: http.MethodPost, path: at.path(table), body: body}, "id")
	if err != nil {
		return nil, err
	}
	return reply(resp.status, out), nil
}

// upsertRecord is Airtable's upsert: PATCH on the table with
// performUpsert; a record whose merge fields match is updated, otherwise
// one is created.
func (at *airtable) upsertRecord(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	if err := p.only("upsert_record", "table", "fields", "fields_to_merge_on", "typecast"); err != nil {
		return nil, err
	}
	table, body, err := airtableWrite(p)
	if err != nil {
		return nil, err
	}
	merge, err := nonEmptyTexts(p, "fields_to_merge_on", 0)
	if err != nil {
		return nil, err
	}
	body["records"] = []any{map[string]any{"fields": body["fields"]}}
	delete(body, "fields")
	body["performUpsert"] = map[string]any{"fieldsToMergeOn": merge}
	resp, out, err := at.send(ctx, call, request{method: http.MethodPatch, path: at.path(table), body: body}, "records")
	if err != nil {
		return nil, err
	}
	return reply(resp.status, out), nil
}

// updateRecord writes the fields given and leaves the others (PATCH, not
// PUT).
func (at *airtable) updateRecord(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	if err := p.only("update_record", "table", "record_id", "fields", "typecast"); err != nil {
		return nil, err
	}
	table, body, err := airtableWrite(p)
	if err != nil {
		return nil, err
	}
	id, err := p.text("record_id", true)
	if err != nil {
		return nil, err
	}
	resp, out, err := at.send(ctx, call, request{method: http.MethodPatch, path: at.path(table, id), body: body}, "id")
	if err != nil {
		return nil, err
	}
	return reply(resp.status, out), nil
}

func (at *airtable) deleteRecords(ctx context.Context, call runner.AdapterCall) (any, error) {
	p := args(call.Params)
	if err := p.only("delete_records", "table", "record_ids"); err != nil {
		return nil, err
	}
	table, err := p.text("table", true)
	if err != nil {
		return nil, err
	}
	ids, err := nonEmptyTexts(p, "record_ids", airtableMaxDeletes)
	if err != nil {
		return nil, err
	}
	r := request{method: http.MethodDelete, path: at.path(table), query: url.Values{"records[]": ids}}
	resp, out, err := at.send(ctx, call, r, "records")
	if err != nil {
		return nil, err
	}
	for i, e := range out["records"].([]any) {
		rec, _ := e.(map[string]any)
		if id, _ := rec["id"].(string); id == "" || rec["deleted"] != true {
			return nil, at.api.shapeInvalid(r, resp, "records[%d] is not {id, deleted: true}", i)
		}
	}
	return reply(resp.status, out), nil
}
