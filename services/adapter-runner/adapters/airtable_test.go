package adapters_test

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/services/adapter-runner/apistub"
)

// airtableSetup is a stub base with a Tickets table and the airtable
// adapter of a manifest entry pointing at it.
func airtableSetup(t *testing.T) (*apistub.Airtable, entry, []string) {
	t.Helper()
	stub := apistub.NewAirtable(t)
	ids := []string{
		stub.Add("Tickets", map[string]any{"Subject": "Refund for A-17", "Status": "Open", "Priority": 2.0}),
		stub.Add("Tickets", map[string]any{"Subject": `Quote "urgent" \ now`, "Status": "Open", "Priority": 1.0}),
		stub.Add("Tickets", map[string]any{"Subject": "Login fails", "Status": "Closed", "Priority": 3.0}),
	}
	return stub, buildEntry(t, airtableEntry(stub)), ids
}

func airtableEntry(stub *apistub.Airtable) apistub.Example {
	return apistub.Example{Adapter: "airtable", Env: map[string]string{"AT_KEY": stub.Key},
		Config: map[string]any{"api_key": "${secret:AT_KEY}", "base_id": stub.BaseID, "base_url": stub.URL()}}
}

func TestAirtableOperationsSendAirtablesRequestsAndAnswerItsRecords(t *testing.T) {
	t.Parallel()
	rec := func(id string, fields map[string]any) map[string]any {
		return map[string]any{"id": id, "createdTime": "2026-03-01T12:00:00.000Z", "fields": fields}
	}
	tests := []struct {
		name, method, op string
		params           func(ids []string) map[string]any
		wantVerb         string
		wantPath         string // below /v0/appStubBase000001
		wantQuery        url.Values
		wantBody         any
		wantData         func(ids []string) any
	}{
		{"get_record", "fetch", "get_record",
			func(ids []string) map[string]any { return map[string]any{"table": "Tickets", "record_id": ids[0]} },
			"GET", "/Tickets/rec00000000000001", url.Values{}, nil,
			func(ids []string) any {
				return rec(ids[0], map[string]any{"Subject": "Refund for A-17", "Status": "Open", "Priority": 2.0})
			}},
		{"list_records with every query param", "fetch", "list_records",
			func([]string) map[string]any {
				return map[string]any{"table": "Tickets", "filter_by_formula": "{Status} = 'Open'", "view": "Grid view", "max_records": 5.0,
					"fields": []any{"Subject", "Priority"}, "sort": []any{map[string]any{"field": "Priority", "direction": "desc"}}}
			},
			"GET", "/Tickets", url.Values{"filterByFormula": {"{Status} = 'Open'"}, "view": {"Grid view"}, "maxRecords": {"5"},
				"fields[]": {"Subject", "Priority"}, "sort[0][field]": {"Priority"}, "sort[0][direction]": {"desc"}}, nil,
			func(ids []string) any {
				return map[string]any{"records": []any{
					rec(ids[0], map[string]any{"Subject": "Refund for A-17", "Priority": 2.0}),
					rec(ids[1], map[string]any{"Subject": `Quote "urgent" \ now`, "Priority": 1.0}),
				}}
			}},
		{"search_records over two fields", "fetch", "search_records",
			func([]string) map[string]any {
				return map[string]any{"table": "Tickets", "search_term": "Login", "fields": []any{"Subject", "Status"}, "max_records": 10.0}
			},
			"GET", "/Tickets", url.Values{"filterByFormula": {`OR(FIND("Login", {Subject}),FIND("Login", {Status}))`}, "maxRecords": {"10"}}, nil,
			func(ids []string) any {
				return map[string]any{"records": []any{rec(ids[2], map[string]any{"Subject": "Login fails", "Status": "Closed", "Priority": 3.0})}}
			}},
		{"create_record", "create", "create_record",
			func([]string) map[string]any {
				return map[string]any{"table": "Tickets", "fields": map[string]any{"Subject": "New"}, "typecast": true}
			},
			"POST", "/Tickets", url.Values{}, map[string]any{"fields": map[string]any{"Subject": "New"}, "typecast": true},
			func([]string) any { return rec("rec00000000000004", map[string]any{"Subject": "New"}) }},
		{"upsert_record updating the match", "update", "upsert_record",
			func([]string) map[string]any {
				return map[string]any{"table": "Tickets", "fields": map[string]any{"Subject": "Login fails", "Status": "Open"}, "fields_to_merge_on": []any{"Subject"}}
			},
			"PATCH", "/Tickets", url.Values{},
			map[string]any{"records": []any{map[string]any{"fields": map[string]any{"Subject": "Login fails", "Status": "Open"}}},
				"performUpsert": map[string]any{"fieldsToMergeOn": []any{"Subject"}}},
			func(ids []string) any {
				return map[string]any{"records": []any{rec(ids[2], map[string]any{"Subject": "Login fails", "Status": "Open", "Priority": 3.0})},
					"createdRecords": []any{}, "updatedRecords": []any{ids[2]}}
			}},
		{"update_record writes only the fields given", "update", "update_record",
			func(ids []string) map[string]any {
				return map[string]any{"table": "Tickets", "record_id": ids[0], "fields": map[string]any{"Status": "Closed"}}
			},
			"PATCH", "/Tickets/rec00000000000001", url.Values{}, map[string]any{"fields": map[string]any{"Status": "Closed"}},
			func(ids []string) any {
				return rec(ids[0], map[string]any{"Subject": "Refund for A-17", "Status": "Closed", "Priority": 2.0})
			}},
		{"delete_records", "delete", "delete_records",
			func(ids []string) map[string]any {
				return map[string]any{"table": "Tickets", "record_ids": []any{ids[0], ids[2]}}
			},
			"DELETE", "/Tickets", url.Values{"records[]": {"rec00000000000001", "rec00000000000003"}}, nil,
			func(ids []string) any {
				return map[string]any{"records": []any{map[string]any{"id": ids[0], "deleted": true}, map[string]any{"id": ids[2], "deleted": true}}}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stub, at, ids := airtableSetup(t)
			got, err := at.do(t, tt.method, tt.op, tt.params(ids))
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]any{"status": 200.0, "data": asJSONMap(t, tt.wantData(ids))}; !reflect.DeepEqual(got, want) {
				t.Errorf("answer =\n%s\nwant\n%s", asJSON(t, got), asJSON(t, want))
			}
			reqs := stub.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != tt.wantVerb || r.Path != "/v0/appStubBase000001"+tt.wantPath || !reflect.DeepEqual(r.Query, tt.wantQuery) {
				t.Errorf("request = %s %s ?%v, want %s %s ?%v", r.Method, r.Path, r.Query, tt.wantVerb, tt.wantPath, tt.wantQuery)
			}
			if r.Header.Get("Authorization") != "Bearer "+stub.Key || r.Header.Get("Accept") != "application/json" {
				t.Errorf("headers = %v", r.Header)
			}
			if b := bodyOf(t, r); !reflect.DeepEqual(b, asJSONMap(t, tt.wantBody)) {
				t.Errorf("body = %s, want %s", r.Body, asJSON(t, tt.wantBody))
			} else if b != nil && r.Header.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type = %q", r.Header.Get("Content-Type"))
			}
			// An answer without what the operation returns is refused.
			stub.Answer(apistub.Fault{Status: 200, Body: `{}`})
			_, err = at.do(t, tt.method, tt.op, tt.params(ids))
			if d := sameErr(err, wantErr{code: errcode.ServiceResponseInvalid, action: errcode.ActionReportToUser}); d != "" {
				t.Errorf("an empty answer: %s", d)
			}
		})
	}
}

func TestAirtableTableAndRecordIdsAreEscapedInThePath(t *testing.T) {
	t.Parallel()
	stub := apistub.NewAirtable(t)
	id := stub.Add("Open tickets/2026", map[string]any{"Subject": "x"})
	at := buildEntry(t, airtableEntry(stub))
	if _, err := at.do(t, "fetch", "get_record", map[string]any{"table": "Open tickets/2026", "record_id": id}); err != nil {
		t.Fatal(err)
	}
	r := stub.Requests()[0]
	if want := "/v0/appStubBase000001/Open%20tickets%2F2026/" + id; r.RawPath != want {
		t.Errorf("path = %s, want %s", r.RawPath, want)
	}
}

func TestAirtableFetchAllFollowsTheOffsetUntilACapStopsIt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		records     int
		params      map[string]any
		wantRecords int
		wantPages   int
		// wantReason is truncation_reason; "" for a complete answer.
		wantReason string
	}{
		{"the last page ends it, not truncated", 5, map[string]any{"max_pages": 5.0}, 5, 3, ""},
		{"three pages by default", 9, nil, 6, 3, "page_limit"},
		{"max_pages above 10 is lowered to 10", 25, map[string]any{"max_pages": 50.0}, 20, 10, "page_limit"},
		{"max_bytes: the page that crosses it is kept", 9, map[string]any{"max_bytes": 10.0}, 2, 1, "byte_limit"},
		{"max_bytes above 1000000 is lowered to it", 9, map[string]any{"max_bytes": 5e6, "max_pages": 10.0}, 9, 5, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stub := apistub.NewAirtable(t)
			stub.PageSize = 2
			for i := range tt.records {
				stub.Add("Orders", map[string]any{"n": float64(i)})
			}
			at := buildEntry(t, airtableEntry(stub))
			params := map[string]any{"table": "Orders", "fetch_all": true, "fields": []any{"n"}}
			for k, v := range tt.params {
				params[k] = v
			}
			got, err := at.do(t, "fetch", "list_records", params)
			if err != nil {
				t.Fatal(err)
			}
			data := got["data"].(map[string]any)
			if n := len(data["records"].([]any)); n != tt.wantRecords {
				t.Errorf("%d records, want %d", n, tt.wantRecords)
			}
			reqs := stub.Requests()
			if len(reqs) != tt.wantPages {
				t.Errorf("%d pages fetched, want %d", len(reqs), tt.wantPages)
			}
			for i, r := range reqs {
				// Every page repeats the query; the later ones go on from
				// the previous page's offset.
				if !reflect.DeepEqual(r.Query["fields[]"], []string{"n"}) || (i > 0 && r.Query.Get("offset") != fmt.Sprintf("itr%d", 2*i)) {
					t.Errorf("page %d query = %v", i, r.Query)
				}
			}
			want := map[string]any{"truncated": tt.wantReason != ""}
			if tt.wantReason != "" {
				want["truncation_reason"], want["offset"] = tt.wantReason, fmt.Sprintf("itr%d", tt.wantRecords)
			}
			delete(data, "records")
			if !reflect.DeepEqual(data, want) {
				t.Errorf("data = %v, want %v", data, want)
			}
		})
	}
}

func TestAirtableSearchEscapesTheTermSoItStaysAString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, term  string
		wantFormula string
		wantHits    int
	}{
		{"quotes and backslashes", `"urgent" \ now`, `FIND("\"urgent\" \\ now", {Subject})`, 1},
		{"a term that tries to close the string and match everything", `") , OR({Status} = "Open"`,
			`FIND("\") , OR({Status} = \"Open\"", {Subject})`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stub, at, _ := airtableSetup(t)
			got, err := at.do(t, "fetch", "search_records", map[string]any{"table": "Tickets", "search_term": tt.term, "fields": []any{"Subject"}})
			if err != nil {
				t.Fatal(err)
			}
			if f := stub.Requests()[0].Query.Get("filterByFormula"); f != tt.wantFormula {
				t.Errorf("formula = %s, want %s", f, tt.wantFormula)
			}
			if n := len(got["data"].(map[string]any)["records"].([]any)); n != tt.wantHits {
				t.Errorf("%d records found, want %d", n, tt.wantHits)
			}
		})
	}
}

func TestAirtableBadParamsAreRefusedBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	eleven := make([]any, 11)
	for i := range eleven {
		eleven[i] = fmt.Sprintf("rec%014d", i)
	}
	tests := []struct {
		name, method, op string
		params           map[string]any
		wantIn           string
	}{
		{"no table", "fetch", "get_record", map[string]any{"record_id": "rec1"}, "'table' is required"},
		{"a misspelt param", "fetch", "list_records", map[string]any{"table": "T", "filterByFormula": "x"}, "'filterByFormula' is not a param of list_records"},
		{"a sort entry without field", "fetch", "list_records", map[string]any{"table": "T", "sort": []any{map[string]any{"direction": "desc"}}}, "'sort'[0]"},
		{"a sort direction other than asc/desc", "fetch", "list_records", map[string]any{"table": "T", "sort": []any{map[string]any{"field": "a", "direction": "down"}}}, "'sort'[0]"},
		{"max_pages without fetch_all", "fetch", "list_records", map[string]any{"table": "T", "max_pages": 2.0}, "only with fetch_all"},
		{"max_bytes below 1", "fetch", "list_records", map[string]any{"table": "T", "fetch_all": true, "max_bytes": 0.0}, "at least 1"},
		{"search without fields", "fetch", "search_records", map[string]any{"table": "T", "search_term": "x"}, "'fields' is required"},
		{"search with no fields", "fetch", "search_records", map[string]any{"table": "T", "search_term": "x", "fields": []any{}}, "non-empty list"},
		{"a field that would leave its braces", "fetch", "search_records", map[string]any{"table": "T", "search_term": "x", "fields": []any{"a}) , TRUE() , ({b"}}, "must not contain"},
		{"fields that are not an object", "create", "create_record", map[string]any{"table": "T", "fields": []any{"a"}}, "'fields' must be an object"},
		{"typecast that is not a boolean", "create", "create_record", map[string]any{"table": "T", "fields": map[string]any{}, "typecast": "yes"}, "true or false"},
		{"upsert without merge fields", "update", "upsert_record", map[string]any{"table": "T", "fields": map[string]any{"a": 1.0}, "fields_to_merge_on": []any{}}, "non-empty list"},
		{"no record ids", "delete", "delete_records", map[string]any{"table": "T", "record_ids": []any{}}, "non-empty list"},
		{"eleven record ids", "delete", "delete_records", map[string]any{"table": "T", "record_ids": eleven}, "at most 10"},
		{"an empty record id", "delete", "delete_records", map[string]any{"table": "T", "record_ids": []any{"rec1", ""}}, "'record_ids'[1] must not be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stub, at, _ := airtableSetup(t)
			_, err := at.do(t, tt.method, tt.op, tt.params)
			refusedUnsent(t, err, tt.wantIn, len(stub.Requests()))
		})
	}
}

func TestAirtablesErrorsAreClassifiedPerSpec(t *testing.T) {
	t.Parallel()
	get := func(ids []string) (string, string, map[string]any) {
		return "fetch", "get_record", map[string]any{"table": "Tickets", "record_id": ids[0]}
	}
	tests := []struct {
		name   string
		setup  func(*apistub.Airtable)
		call   func(ids []string) (string, string, map[string]any)
		want   wantErr
		wantIn string // in the message
		// wantSleeps are the 429 waits (fake clock).
		wantSleeps []time.Duration
		wantSent   int
	}{
		{"401: the token is refused", func(s *apistub.Airtable) { s.Key = "other" }, get,
			wantErr{code: errcode.ServiceAuthFailed, action: errcode.ActionStop}, "Authentication required", nil, 1},
		{"404: no such record", nil, func([]string) (string, string, map[string]any) {
			return "fetch", "get_record", map[string]any{"table": "Tickets", "record_id": "recMissing0000000"}
		}, wantErr{code: errcode.ServiceNotFound, action: errcode.ActionProvideInput}, "Could not find a record", nil, 1},
		{"403: no such table", nil, func([]string) (string, string, map[string]any) {
			return "fetch", "list_records", map[string]any{"table": "Nope"}
		}, wantErr{code: errcode.ServiceHTTP4xx, action: errcode.ActionStop}, "Invalid permissions", nil, 1},
		{"422: Airtable's own message is kept", nil, func([]string) (string, string, map[string]any) {
			return "fetch", "list_records", map[string]any{"table": "Tickets", "filter_by_formula": "NOT(("}
		}, wantErr{code: errcode.ServiceHTTP4xx, action: errcode.ActionStop}, "The formula for filtering records is invalid", nil, 1},
		{"429 without Retry-After: Airtable's 30 s are waited, then sent again", func(s *apistub.Airtable) { s.Answer(apistub.AirtableRateLimited) }, get,
			wantErr{}, "", []time.Duration{30 * time.Second}, 2},
		{"429 with Retry-After, still limited after the last wait", func(s *apistub.Airtable) {
			f := apistub.Fault{Status: 429, Header: map[string]string{"Retry-After": "7"}}
			s.Answer(f, f, f, f)
		}, get, wantErr{code: errcode.ServiceRateLimited, action: errcode.ActionWaitAndProceed, retryable: true, retryAfter: 7.0}, "429", []time.Duration{7 * time.Second, 7 * time.Second, 7 * time.Second}, 4},
		{"5xx", func(s *apistub.Airtable) {
			s.Answer(apistub.Fault{Status: 502, Body: `{"error":{"type":"SERVER_ERROR","message":"Try again"}}`})
		}, get, wantErr{code: errcode.ServiceHTTP5xx, action: errcode.ActionReportToUser, retryable: true}, "Try again", nil, 1},
		{"a body that is not JSON", func(s *apistub.Airtable) { s.Answer(apistub.Malformed) }, get,
			wantErr{code: errcode.ServiceResponseInvalid, action: errcode.ActionReportToUser}, "not the JSON expected", nil, 1},
		{"JSON without the record", func(s *apistub.Airtable) { s.Answer(apistub.Fault{Status: 200, Body: `{"records":[]}`}) }, get,
			wantErr{code: errcode.ServiceResponseInvalid, action: errcode.ActionReportToUser}, "no record id", nil, 1},
		{"a delete answer without deleted: true", func(s *apistub.Airtable) {
			s.Answer(apistub.Fault{Status: 200, Body: `{"records":[{"id":"rec00000000000001"}]}`})
		}, func(ids []string) (string, string, map[string]any) {
			return "delete", "delete_records", map[string]any{"table": "Tickets", "record_ids": []any{ids[0]}}
		}, wantErr{code: errcode.ServiceResponseInvalid, action: errcode.ActionReportToUser}, "deleted: true", nil, 1},
		{"the network", func(s *apistub.Airtable) { s.Close() }, get,
			wantErr{code: errcode.NetworkUnreachable, action: errcode.ActionWaitForHuman, retryable: true}, "failed", nil, 0},
		{"an unknown operation", nil, func([]string) (string, string, map[string]any) { return "fetch", "get_base_schema", nil },
			wantErr{code: errcode.AdapterOpUnsupported, action: errcode.ActionReportToUser}, "has no fetch operation 'get_base_schema'", nil, 0},
		{"an operation under another method", nil, func(ids []string) (string, string, map[string]any) {
			return "update", "delete_records", map[string]any{"table": "Tickets", "record_ids": []any{ids[0]}}
		}, wantErr{code: errcode.AdapterOpUnsupported, action: errcode.ActionReportToUser}, "has no update operation", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stub, at, ids := airtableSetup(t)
			if tt.setup != nil {
				tt.setup(stub)
			}
			method, op, params := tt.call(ids)
			_, err := at.do(t, method, op, params)
			if tt.want.code == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else if d := sameErr(err, tt.want); d != "" {
				t.Error(d)
			} else if !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("message %q does not say %q", err.Error(), tt.wantIn)
			}
			if got := at.clock.recorded(); !slices.Equal(got, tt.wantSleeps) {
				t.Errorf("waits = %v, want %v", got, tt.wantSleeps)
			}
			if tt.wantSent > 0 && len(stub.Requests()) != tt.wantSent {
				t.Errorf("%d requests, want %d", len(stub.Requests()), tt.wantSent)
			}
		})
	}
}

func TestAirtableEntriesAreCheckedWhenTheManifestIsLoaded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		config  map[string]any
		secrets map[string]string
		wantIn  string
	}{
		{"no api_key", map[string]any{"base_id": "appStubBase000001"}, nil, "config.api_key is required"},
		{"an unset secret", map[string]any{"api_key": "${secret:AT_KEY}", "base_id": "appStubBase000001"}, nil, "AT_KEY"},
		{"a base_id that is not one", map[string]any{"api_key": "k", "base_id": "Tickets"}, nil, "not an Airtable base id"},
		{"a key the adapter does not read", map[string]any{"api_key": "k", "base_id": "appStubBase000001", "table": "T"}, nil, "unknown key 'table'"},
		{"a base_url that is not http", map[string]any{"api_key": "k", "base_id": "appStubBase000001", "base_url": "ftp://x"}, nil, "must be an http"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := tryEntry(t, apistub.Example{Adapter: "airtable", Config: tt.config, Env: tt.secrets})
			if err == nil || !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("error = %v, want one saying %q", err, tt.wantIn)
			}
		})
	}
}

func TestAirtablesErrorTypeIsInTheDetails(t *testing.T) {
	t.Parallel()
	_, at, _ := airtableSetup(t)
	_, err := at.do(t, "fetch", "list_records", map[string]any{"table": "Tickets", "view": "Kanban"})
	if d := sameErr(err, wantErr{code: errcode.ServiceHTTP4xx, action: errcode.ActionStop}); d != "" {
		t.Fatal(d)
	}
	if got := asWorkflowErr(t, err).Details["error_type"]; got != "VIEW_NAME_NOT_FOUND" {
		t.Errorf("details.error_type = %v, want VIEW_NAME_NOT_FOUND", got)
	}
}
