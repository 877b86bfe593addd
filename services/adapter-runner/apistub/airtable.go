package apistub

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// AirtableRecord is a record as Airtable's API answers it.
type AirtableRecord struct {
	ID          string         `json:"id"`
	CreatedTime string         `json:"createdTime"`
	Fields      map[string]any `json:"fields"`
}

// Airtable stands in for Airtable's REST API (v0) with one base: records
// in tables, offset paging, fields[], sort[i][…], maxRecords, views, the
// filterByFormula forms FIND("…", {field}), OR(…) and {field} = '…'
// (others answer 422 INVALID_FILTER_BY_FORMULA), upsert by performUpsert,
// and Airtable's error bodies.
type Airtable struct {
	stub
	// Key is the personal access token the stub accepts; BaseID its base.
	Key, BaseID string
	// PageSize is the default page size (Airtable's is 100).
	PageSize int
	// Views are the views every table has.
	Views []string

	tables map[string][]*AirtableRecord
	next   int
}

// airtableCreated is every record's createdTime: answers are stable.
const airtableCreated = "2026-03-01T12:00:00.000Z"

// NewAirtable starts a stub with an empty base; t.Cleanup closes it.
func NewAirtable(t testing.TB) *Airtable {
	a := &Airtable{Key: "patStub.0123456789", BaseID: "appStubBase000001", PageSize: 100, Views: []string{"Grid view"}, tables: map[string][]*AirtableRecord{}}
	a.start(t, a.serve)
	return a
}

// URL is the adapter's base_url: the API's /v0.
func (a *Airtable) URL() string { return a.url("/v0") }

// Add puts a record in table (created when new) and returns its id.
func (a *Airtable) Add(table string, fields map[string]any) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addLocked(table, fields).ID
}

// Records are table's records, in order.
func (a *Airtable) Records(table string) []AirtableRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := []AirtableRecord{}
	for _, r := range a.tables[table] {
		out = append(out, *r)
	}
	return out
}

func (a *Airtable) addLocked(table string, fields map[string]any) *AirtableRecord {
	a.next++
	r := &AirtableRecord{ID: fmt.Sprintf("rec%014d", a.next), CreatedTime: airtableCreated, Fields: fields}
	a.tables[table] = append(a.tables[table], r)
	return r
}

// AirtableRateLimited is Airtable's 429: it names no wait.
var AirtableRateLimited = Fault{Status: http.StatusTooManyRequests,
	Body: `{"errors":[{"error":"RATE_LIMIT_REACHED","message":"Rate limit exceeded. Please try again later"}]}`}

func airtableFail(w http.ResponseWriter, status int, kind, message string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"type": kind, "message": message}})
}

func (a *Airtable) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+a.Key {
		airtableFail(w, http.StatusUnauthorized, "AUTHENTICATION_REQUIRED", "Authentication required")
		return
	}
	// Segments are split before unescaping: a table's name may hold '/'.
	parts := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/v0/"), "/")
	for i, p := range parts {
		parts[i], _ = url.PathUnescape(p)
	}
	if !strings.HasPrefix(r.URL.Path, "/v0/") || parts[0] != a.BaseID || len(parts) < 2 || len(parts) > 3 {
		airtableFail(w, http.StatusNotFound, "NOT_FOUND", "Could not find what you are looking for")
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	table := parts[1]
	if _, ok := a.tables[table]; !ok && r.Method != http.MethodPost {
		airtableFail(w, http.StatusForbidden, "INVALID_PERMISSIONS_OR_MODEL_NOT_FOUND",
			"Invalid permissions, or the requested model was not found. Check that both your user and your token have the required permissions, and that the model names and/or ids are correct.")
		return
	}
	var body map[string]any
	if r.Method == http.MethodPost || r.Method == http.MethodPatch {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			airtableFail(w, http.StatusUnprocessableEntity, "INVALID_REQUEST_UNKNOWN", "Invalid request: parameter validation failed. Check your request data.")
			return
		}
	}
	switch {
	case len(parts) == 3 && r.Method == http.MethodGet:
		if rec := a.find(table, parts[2]); rec != nil {
			writeJSON(w, http.StatusOK, rec)
			return
		}
		airtableFail(w, http.StatusNotFound, "MODEL_ID_NOT_FOUND", "Could not find a record with ID '"+parts[2]+"'")
	case len(parts) == 3 && r.Method == http.MethodPatch:
		a.update(w, table, parts[2], body)
	case len(parts) == 2 && r.Method == http.MethodGet:
		a.list(w, r, table)
	case len(parts) == 2 && r.Method == http.MethodPost:
		fields, ok := body["fields"].(map[string]any)
		if !ok {
			airtableFail(w, http.StatusUnprocessableEntity, "INVALID_REQUEST_MISSING_FIELDS", "Could not find field \"fields\" in the request body")
			return
		}
		writeJSON(w, http.StatusOK, a.addLocked(table, fields))
	case len(parts) == 2 && r.Method == http.MethodPatch:
		a.upsert(w, table, body)
	case len(parts) == 2 && r.Method == http.MethodDelete:
		a.delete(w, table, r.URL.Query()["records[]"])
	default:
		airtableFail(w, http.StatusNotFound, "NOT_FOUND", "Could not find what you are looking for")
	}
}

func (a *Airtable) find(table, id string) *AirtableRecord {
	for _, rec := range a.tables[table] {
		if rec.ID == id {
			return rec
		}
	}
	return nil
}

// update merges fields into the record (PATCH: the others stay).
func (a *Airtable) update(w http.ResponseWriter, table, id string, body map[string]any) {
	fields, ok := body["fields"].(map[string]any)
	if !ok {
		airtableFail(w, http.StatusUnprocessableEntity, "INVALID_REQUEST_MISSING_FIELDS", "Could not find field \"fields\" in the request body")
		return
	}
	rec := a.find(table, id)
	if rec == nil {
		airtableFail(w, http.StatusNotFound, "MODEL_ID_NOT_FOUND", "Could not find a record with ID '"+id+"'")
		return
	}
	for k, v := range fields {
		rec.Fields[k] = v
	}
	writeJSON(w, http.StatusOK, rec)
}

// upsert is PATCH on the table with performUpsert.fieldsToMergeOn: each
// record updates the one whose merge fields are equal, or is created.
func (a *Airtable) upsert(w http.ResponseWriter, table string, body map[string]any) {
	perform, _ := body["performUpsert"].(map[string]any)
	merge, _ := perform["fieldsToMergeOn"].([]any)
	records, _ := body["records"].([]any)
	if len(merge) == 0 || len(records) == 0 || len(records) > 10 {
		airtableFail(w, http.StatusUnprocessableEntity, "INVALID_REQUEST_UNKNOWN", "Invalid request: parameter validation failed. Check your request data.")
		return
	}
	out := map[string]any{"records": []any{}, "createdRecords": []any{}, "updatedRecords": []any{}}
	for _, raw := range records {
		m, _ := raw.(map[string]any)
		fields, _ := m["fields"].(map[string]any)
		for _, f := range merge {
			if _, ok := fields[fmt.Sprint(f)]; !ok {
				airtableFail(w, http.StatusUnprocessableEntity, "INVALID_VALUE_FOR_COLUMN", fmt.Sprintf("Field \"%v\" used for upsert matching has no value", f))
				return
			}
		}
		var hit *AirtableRecord
		for _, rec := range a.tables[table] {
			if !slices.ContainsFunc(merge, func(f any) bool { return fmt.Sprint(rec.Fields[fmt.Sprint(f)]) != fmt.Sprint(fields[fmt.Sprint(f)]) }) {
				hit = rec
				break
			}
		}
		if hit == nil {
			hit = a.addLocked(table, fields)
			out["createdRecords"] = append(out["createdRecords"].([]any), hit.ID)
		} else {
			for k, v := range fields {
				hit.Fields[k] = v
			}
			out["updatedRecords"] = append(out["updatedRecords"].([]any), hit.ID)
		}
		out["records"] = append(out["records"].([]any), hit)
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *Airtable) delete(w http.ResponseWriter, table string, ids []string) {
	if len(ids) == 0 || len(ids) > 10 {
		airtableFail(w, http.StatusUnprocessableEntity, "INVALID_REQUEST_UNKNOWN", "Invalid request: provide between 1 and 10 records[] to delete.")
		return
	}
	for _, id := range ids {
		if a.find(table, id) == nil {
			airtableFail(w, http.StatusNotFound, "MODEL_ID_NOT_FOUND", "Could not find a record with ID '"+id+"'")
			return
		}
	}
	out := []any{}
	for _, id := range ids {
		a.tables[table] = slices.DeleteFunc(a.tables[table], func(r *AirtableRecord) bool { return r.ID == id })
		out = append(out, map[string]any{"id": id, "deleted": true})
	}
	writeJSON(w, http.StatusOK, map[string]any{"records": out})
}

// list answers one page: the table's records filtered, sorted, cut to
// maxRecords, from offset, fields[] only.
func (a *Airtable) list(w http.ResponseWriter, r *http.Request, table string) {
	q := r.URL.Query()
	if v := q.Get("view"); v != "" && !slices.Contains(a.Views, v) {
		airtableFail(w, http.StatusUnprocessableEntity, "VIEW_NAME_NOT_FOUND", fmt.Sprintf("Could not find view %q in table %q", v, table))
		return
	}
	recs := slices.Clone(a.tables[table])
	if f := q.Get("filterByFormula"); f != "" {
		match, err := airtableFormula(f)
		if err != nil {
			airtableFail(w, http.StatusUnprocessableEntity, "INVALID_FILTER_BY_FORMULA", "The formula for filtering records is invalid: "+err.Error())
			return
		}
		recs = slices.DeleteFunc(recs, func(r *AirtableRecord) bool { return !match(r.Fields) })
	}
	for i := 9; i >= 0; i-- { // the last sort key first: a stable sort keeps it within the earlier ones
		field := q.Get(fmt.Sprintf("sort[%d][field]", i))
		if field == "" {
			continue
		}
		desc := q.Get(fmt.Sprintf("sort[%d][direction]", i)) == "desc"
		slices.SortStableFunc(recs, func(x, y *AirtableRecord) int {
			c := cmp.Compare(fmt.Sprint(x.Fields[field]), fmt.Sprint(y.Fields[field]))
			if desc {
				return -c
			}
			return c
		})
	}
	if n, err := strconv.Atoi(q.Get("maxRecords")); err == nil && n < len(recs) {
		recs = recs[:n]
	}
	start := 0
	if off := q.Get("offset"); off != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(off, "itr"))
		if !strings.HasPrefix(off, "itr") || err != nil || n < 0 || n > len(recs) {
			airtableFail(w, http.StatusUnprocessableEntity, "LIST_RECORDS_ITERATOR_NOT_AVAILABLE", "The offset is not valid")
			return
		}
		start = n
	}
	size := a.PageSize
	if n, err := strconv.Atoi(q.Get("pageSize")); err == nil && n > 0 && n < size {
		size = n
	}
	end := min(start+size, len(recs))
	page := []any{}
	for _, rec := range recs[start:end] {
		out := *rec
		if fields := q["fields[]"]; len(fields) > 0 {
			out.Fields = map[string]any{}
			for _, f := range fields {
				if v, ok := rec.Fields[f]; ok {
					out.Fields[f] = v
				}
			}
		}
		page = append(page, out)
	}
	answer := map[string]any{"records": page}
	if end < len(recs) {
		answer["offset"] = fmt.Sprintf("itr%d", end)
	}
	writeJSON(w, http.StatusOK, answer)
}

// AirtableExample seeds s with a Tickets table and is list_records of its
// open tickets' subjects, as an `airtable` manifest entry pointing at s
// runs it.
func AirtableExample(s *Airtable) Example {
	open := s.Add("Tickets", map[string]any{"Subject": "Refund for A-17", "Status": "Open"})
	s.Add("Tickets", map[string]any{"Subject": "Login fails", "Status": "Closed"})
	return Example{
		Adapter:   "airtable",
		Config:    map[string]any{"api_key": "${secret:AIRTABLE_API_KEY}", "base_id": s.BaseID, "base_url": s.URL()},
		Env:       map[string]string{"AIRTABLE_API_KEY": s.Key},
		Method:    "fetch",
		Operation: "list_records",
		Params:    map[string]any{"table": "Tickets", "filter_by_formula": "{Status} = 'Open'", "fields": []any{"Subject"}},
		Output: map[string]any{"records": []any{
			map[string]any{"id": open, "createdTime": airtableCreated, "fields": map[string]any{"Subject": "Refund for A-17"}},
		}},
	}
}
