package adapters_test

import (
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/realm-go/realm/pkg/errcode"
	"github.com/realm-go/realm/services/adapter-runner/adapters"
	"github.com/realm-go/realm/services/adapter-runner/apistub"
)

// notionWorld is what notionSetup seeded.
type notionWorld struct {
	tasks, page, block string
}

// notionSetup is a stub workspace (a Tasks data source with one page
// holding one block) and the notion adapter of a manifest entry pointing
// at it.
func notionSetup(t *testing.T) (*apistub.Notion, entry, notionWorld) {
	t.Helper()
	stub := apistub.NewNotion(t)
	w := notionWorld{tasks: stub.AddDataSource("Tasks")}
	w.page = stub.AddPage(map[string]any{"type": "data_source_id", "data_source_id": w.tasks}, map[string]any{
		"Name": map[string]any{"type": "title", "title": []any{map[string]any{"type": "text", "text": map[string]any{"content": "Ship v2"}}}},
	})
	w.block = stub.AddBlock(w.page, "paragraph", map[string]any{"rich_text": []any{}})
	return stub, buildEntry(t, notionEntry(stub)), w
}

func notionEntry(stub *apistub.Notion) apistub.Example {
	return apistub.Example{Adapter: "notion", Env: map[string]string{"NOTION_KEY": stub.Key},
		Config: map[string]any{"api_key": "${secret:NOTION_KEY}", "base_url": stub.URL()}}
}

func TestNotionOperationsSendNotionsRequests(t *testing.T) {
	t.Parallel()
	para := map[string]any{"type": "paragraph", "paragraph": map[string]any{"rich_text": []any{}}}
	tests := []struct {
		name, method, op string
		params           func(w notionWorld) map[string]any
		wantVerb         string
		wantPath         func(w notionWorld) string // below /v1
		wantQuery        url.Values
		wantBody         func(w notionWorld) any
		// check looks at the answer's data.
		check func(t *testing.T, w notionWorld, stub *apistub.Notion, data map[string]any)
	}{
		{"get_page", "fetch", "get_page",
			func(w notionWorld) map[string]any {
				return map[string]any{"page_id": w.page, "filter_properties": []any{"Name"}}
			},
			"GET", func(w notionWorld) string { return "/pages/" + w.page }, url.Values{"filter_properties": {"Name"}}, nil,
			func(t *testing.T, w notionWorld, stub *apistub.Notion, data map[string]any) {
				if data["id"] != w.page || data["object"] != "page" {
					t.Errorf("data = %v", data)
				}
			}},
		{"list_block_children", "fetch", "list_block_children",
			func(w notionWorld) map[string]any {
				return map[string]any{"block_id": w.page, "page_size": 10.0}
			},
			"GET", func(w notionWorld) string { return "/blocks/" + w.page + "/children" }, url.Values{"page_size": {"10"}}, nil,
			func(t *testing.T, w notionWorld, stub *apistub.Notion, data map[string]any) {
				if r := data["results"].([]any); len(r) != 1 || r[0].(map[string]any)["id"] != w.block || data["has_more"] != false {
					t.Errorf("data = %v", data)
				}
			}},
		{"query_data_source", "fetch", "query_data_source",
			func(w notionWorld) map[string]any {
				return map[string]any{"data_source_id": w.tasks, "filter": map[string]any{"property": "Name", "title": map[string]any{"equals": "Ship v2"}},
					"sorts": []any{map[string]any{"property": "Name", "direction": "ascending"}}, "page_size": 5.0, "filter_properties": []any{"Name"}}
			},
			"POST", func(w notionWorld) string { return "/data_sources/" + w.tasks + "/query" }, url.Values{"filter_properties": {"Name"}},
			func(w notionWorld) any {
				return map[string]any{"filter": map[string]any{"property": "Name", "title": map[string]any{"equals": "Ship v2"}},
					"sorts": []any{map[string]any{"property": "Name", "direction": "ascending"}}, "page_size": 5.0}
			},
			func(t *testing.T, w notionWorld, stub *apistub.Notion, data map[string]any) {
				if r := data["results"].([]any); len(r) != 1 || r[0].(map[string]any)["id"] != w.page {
					t.Errorf("data = %v", data)
				}
			}},
		{"search", "fetch", "search",
			func(notionWorld) map[string]any {
				return map[string]any{"query": "ship", "filter": map[string]any{"property": "object", "value": "page"}, "sort": map[string]any{"direction": "descending", "timestamp": "last_edited_time"}}
			},
			"POST", func(notionWorld) string { return "/search" }, url.Values{},
			func(notionWorld) any {
				return map[string]any{"query": "ship", "filter": map[string]any{"property": "object", "value": "page"}, "sort": map[string]any{"direction": "descending", "timestamp": "last_edited_time"}}
			},
			func(t *testing.T, w notionWorld, stub *apistub.Notion, data map[string]any) {
				if r := data["results"].([]any); len(r) != 1 || r[0].(map[string]any)["id"] != w.page {
					t.Errorf("data = %v", data)
				}
			}},
		{"create_page in a data source, parent typed", "create", "create_page",
			func(w notionWorld) map[string]any {
				return map[string]any{"parent": map[string]any{"data_source_id": w.tasks}, "markdown": "# Plan\nstep one",
					"properties": map[string]any{"Name": map[string]any{"title": []any{map[string]any{"text": map[string]any{"content": "Plan"}}}}}}
			},
			"POST", func(notionWorld) string { return "/pages" }, url.Values{},
			func(w notionWorld) any {
				return map[string]any{"parent": map[string]any{"type": "data_source_id", "data_source_id": w.tasks}, "markdown": "# Plan\nstep one",
					"properties": map[string]any{"Name": map[string]any{"title": []any{map[string]any{"text": map[string]any{"content": "Plan"}}}}}}
			},
			func(t *testing.T, w notionWorld, stub *apistub.Notion, data map[string]any) {
				id, _ := data["id"].(string)
				if stub.Page(id) == nil || len(stub.Children(id)) != 2 {
					t.Errorf("page %v not made with its two blocks", data)
				}
			}},
		{"append_block_children at the start", "create", "append_block_children",
			func(w notionWorld) map[string]any {
				return map[string]any{"block_id": w.page, "children": []any{para}, "position": map[string]any{"type": "start"}}
			},
			"PATCH", func(w notionWorld) string { return "/blocks/" + w.page + "/children" }, url.Values{},
			func(notionWorld) any {
				return map[string]any{"children": []any{para}, "position": map[string]any{"type": "start"}}
			},
			func(t *testing.T, w notionWorld, stub *apistub.Notion, data map[string]any) {
				kids := stub.Children(w.page)
				if r := data["results"].([]any); len(r) != 1 || len(kids) != 2 || kids[0]["id"] != r[0].(map[string]any)["id"] {
					t.Errorf("data = %v, children %v", data, kids)
				}
			}},
		{"update_page to the trash", "update", "update_page",
			func(w notionWorld) map[string]any {
				return map[string]any{"page_id": w.page, "in_trash": true, "icon": map[string]any{"type": "emoji", "emoji": "🚀"}}
			},
			"PATCH", func(w notionWorld) string { return "/pages/" + w.page }, url.Values{},
			func(notionWorld) any {
				return map[string]any{"in_trash": true, "icon": map[string]any{"type": "emoji", "emoji": "🚀"}}
			},
			func(t *testing.T, w notionWorld, stub *apistub.Notion, data map[string]any) {
				if data["in_trash"] != true || stub.Page(w.page)["in_trash"] != true {
					t.Errorf("data = %v", data)
				}
			}},
		{"delete_block", "delete", "delete_block",
			func(w notionWorld) map[string]any { return map[string]any{"block_id": w.block} },
			"DELETE", func(w notionWorld) string { return "/blocks/" + w.block }, url.Values{}, nil,
			func(t *testing.T, w notionWorld, stub *apistub.Notion, data map[string]any) {
				if data["id"] != w.block || data["in_trash"] != true || len(stub.Children(w.page)) != 1 {
					t.Errorf("data = %v", data)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stub, n, w := notionSetup(t)
			got, err := n.do(t, tt.method, tt.op, tt.params(w))
			if err != nil {
				t.Fatal(err)
			}
			if got["status"] != 200.0 {
				t.Errorf("status = %v", got["status"])
			}
			tt.check(t, w, stub, got["data"].(map[string]any))
			r := stub.Requests()[0]
			if len(stub.Requests()) != 1 || r.Method != tt.wantVerb || r.Path != "/v1"+tt.wantPath(w) || !reflect.DeepEqual(r.Query, tt.wantQuery) {
				t.Errorf("request = %s %s ?%v (of %d), want %s %s ?%v", r.Method, r.Path, r.Query, len(stub.Requests()), tt.wantVerb, tt.wantPath(w), tt.wantQuery)
			}
			if r.Header.Get("Authorization") != "Bearer "+stub.Key || r.Header.Get("Notion-Version") != adapters.NotionVersion {
				t.Errorf("headers = %v", r.Header)
			}
			var want any
			if tt.wantBody != nil {
				want = asJSONMap(t, tt.wantBody(w))
			}
			if b := bodyOf(t, r); !reflect.DeepEqual(b, want) {
				t.Errorf("body = %s, want %s", r.Body, asJSON(t, want))
			}
			// An answer without what the operation returns is refused.
			stub.Answer(apistub.Fault{Status: 200, Body: `{}`})
			_, err = n.do(t, tt.method, tt.op, tt.params(w))
			if d := sameErr(err, wantErr{code: errcode.ServiceResponseInvalid, action: errcode.ActionReportToUser}); d != "" {
				t.Errorf("an empty answer: %s", d)
			}
		})
	}
}

func TestNotionRefusesArchivedInFavourOfInTrash(t *testing.T) {
	t.Parallel()
	stub, n, w := notionSetup(t)
	_, err := n.do(t, "update", "update_page", map[string]any{"page_id": w.page, "archived": true})
	if d := sameErr(err, wantErr{code: errcode.AdapterValidationFailed, action: errcode.ActionProvideInput}); d != "" {
		t.Fatal(d)
	}
	if !strings.Contains(err.Error(), "use 'in_trash'") {
		t.Errorf("message %q does not point to in_trash", err.Error())
	}
	if len(stub.Requests()) != 0 {
		t.Error("a request was sent")
	}
}

func TestNotionCreatesAreNotRetriedAfterANetworkFailure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, op string
		params           func(w notionWorld) map[string]any
		retryable        bool
	}{
		{"create_page", "create", "create_page", func(w notionWorld) map[string]any {
			return map[string]any{"parent": map[string]any{"page_id": w.page}}
		}, false},
		{"append_block_children", "create", "append_block_children", func(w notionWorld) map[string]any {
			return map[string]any{"block_id": w.page, "children": []any{map[string]any{"type": "divider", "divider": map[string]any{}}}}
		}, false},
		{"get_page may be sent again", "fetch", "get_page", func(w notionWorld) map[string]any { return map[string]any{"page_id": w.page} }, true},
		{"update_page may be sent again", "update", "update_page", func(w notionWorld) map[string]any {
			return map[string]any{"page_id": w.page, "in_trash": false}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stub, n, w := notionSetup(t)
			stub.Close()
			_, err := n.do(t, tt.method, tt.op, tt.params(w))
			if d := sameErr(err, wantErr{code: errcode.NetworkUnreachable, action: errcode.ActionWaitForHuman, retryable: tt.retryable}); d != "" {
				t.Error(d)
			}
		})
	}
}

func TestNotionsErrorsAreClassifiedPerSpec(t *testing.T) {
	t.Parallel()
	get := func(w notionWorld) (string, string, map[string]any) {
		return "fetch", "get_page", map[string]any{"page_id": w.page}
	}
	tests := []struct {
		name       string
		setup      func(*apistub.Notion)
		call       func(w notionWorld) (string, string, map[string]any)
		want       wantErr
		wantIn     string
		wantSleeps []time.Duration
	}{
		{"401", func(s *apistub.Notion) { s.Key = "other" }, get,
			wantErr{code: errcode.ServiceAuthFailed, action: errcode.ActionStop}, "API token is invalid", nil},
		{"404", nil, func(notionWorld) (string, string, map[string]any) {
			return "fetch", "get_page", map[string]any{"page_id": "00000000-0000-4000-8000-999999999999"}
		}, wantErr{code: errcode.ServiceNotFound, action: errcode.ActionProvideInput}, "Could not find page", nil},
		{"400 with Notion's message", func(s *apistub.Notion) { s.Version = "2022-06-28" }, get,
			wantErr{code: errcode.ServiceHTTP4xx, action: errcode.ActionStop}, "Notion-Version header failed validation", nil},
		{"409 with Notion's message", func(s *apistub.Notion) { s.Answer(apistub.NotionConflict) }, get,
			wantErr{code: errcode.ServiceHTTP4xx, action: errcode.ActionStop}, "Conflict occurred while saving", nil},
		{"429 with Retry-After: waited, then a person is asked", func(s *apistub.Notion) {
			s.Answer(apistub.NotionRateLimited, apistub.NotionRateLimited, apistub.NotionRateLimited, apistub.NotionRateLimited)
		}, get, wantErr{code: errcode.ServiceRateLimited, action: errcode.ActionWaitForHuman, retryable: true, retryAfter: 1.0}, "429",
			[]time.Duration{time.Second, time.Second, time.Second}},
		{"429 without Retry-After: a person is asked at once", func(s *apistub.Notion) {
			s.Answer(apistub.Fault{Status: 429, Body: `{"object":"error","status":429,"code":"rate_limited","message":"slow down"}`})
		}, get, wantErr{code: errcode.ServiceRateLimited, action: errcode.ActionWaitForHuman, retryable: true}, "429", nil},
		{"503 waits for a person", func(s *apistub.Notion) { s.Answer(apistub.NotionUnavailable) }, get,
			wantErr{code: errcode.ServiceHTTP5xx, action: errcode.ActionWaitForHuman, retryable: true}, "Notion is unavailable", nil},
		{"another 5xx is reported", func(s *apistub.Notion) { s.Answer(apistub.Fault{Status: 500}) }, get,
			wantErr{code: errcode.ServiceHTTP5xx, action: errcode.ActionReportToUser, retryable: true}, "500", nil},
		{"a body that is not JSON", func(s *apistub.Notion) { s.Answer(apistub.Malformed) }, get,
			wantErr{code: errcode.ServiceResponseInvalid, action: errcode.ActionReportToUser}, "not the JSON expected", nil},
		{"a list without results", func(s *apistub.Notion) { s.Answer(apistub.Fault{Status: 200, Body: `{"object":"list"}`}) },
			func(w notionWorld) (string, string, map[string]any) {
				return "fetch", "search", map[string]any{}
			}, wantErr{code: errcode.ServiceResponseInvalid, action: errcode.ActionReportToUser}, "no results array", nil},
		{"the network", func(s *apistub.Notion) { s.Close() }, get,
			wantErr{code: errcode.NetworkUnreachable, action: errcode.ActionWaitForHuman, retryable: true}, "failed", nil},
		{"an unknown operation", nil, func(notionWorld) (string, string, map[string]any) { return "fetch", "get_database", nil },
			wantErr{code: errcode.AdapterOpUnsupported, action: errcode.ActionReportToUser}, "has no fetch operation 'get_database'", nil},
		{"a method without operations of that name", nil, func(w notionWorld) (string, string, map[string]any) {
			return "delete", "delete_page", map[string]any{"page_id": w.page}
		}, wantErr{code: errcode.AdapterOpUnsupported, action: errcode.ActionReportToUser}, "has no delete operation", nil},
		{"a step config key", nil, nil, wantErr{code: errcode.AdapterValidationFailed, action: errcode.ActionProvideInput}, "takes its settings from the deployment manifest", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stub, n, w := notionSetup(t)
			if tt.setup != nil {
				tt.setup(stub)
			}
			var err error
			if tt.call == nil {
				_, err = n.doConfig(t, "fetch", "get_page", map[string]any{"page_id": w.page}, map[string]any{"adapter": "svc", "api_key": "k"})
			} else {
				method, op, params := tt.call(w)
				_, err = n.do(t, method, op, params)
			}
			if d := sameErr(err, tt.want); d != "" {
				t.Error(d)
			} else if !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("message %q does not say %q", err.Error(), tt.wantIn)
			}
			if got := n.clock.recorded(); !slices.Equal(got, tt.wantSleeps) {
				t.Errorf("waits = %v, want %v", got, tt.wantSleeps)
			}
		})
	}
}

func TestNotionBadParamsAreRefusedBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	many := make([]any, 101)
	for i := range many {
		many[i] = map[string]any{"type": "divider", "divider": map[string]any{}}
	}
	tests := []struct {
		name, method, op string
		params           map[string]any
		wantIn           string
	}{
		{"no page_id", "fetch", "get_page", map[string]any{}, "'page_id' is required"},
		{"a misspelt param", "fetch", "list_block_children", map[string]any{"block_id": "b", "cursor": "c"}, "'cursor' is not a param"},
		{"a page_size over 100", "fetch", "list_block_children", map[string]any{"block_id": "b", "page_size": 500.0}, "between 1 and 100"},
		{"a search filter on something else than object", "fetch", "search", map[string]any{"filter": map[string]any{"property": "title", "value": "x"}}, "param 'filter' must be"},
		{"a search filter value Notion lacks", "fetch", "search", map[string]any{"filter": map[string]any{"property": "object", "value": "block"}}, "param 'filter' must be"},
		{"a parent without an id", "create", "create_page", map[string]any{"parent": map[string]any{"page_id": ""}}, "param 'parent' must be"},
		{"a parent of two kinds", "create", "create_page", map[string]any{"parent": map[string]any{"page_id": "a", "workspace": true}}, "param 'parent' must be"},
		{"children and markdown", "create", "create_page", map[string]any{"parent": map[string]any{"workspace": true}, "markdown": "x", "children": []any{}}, "exclude each other"},
		{"101 children", "create", "append_block_children", map[string]any{"block_id": "b", "children": many}, "at most 100"},
		{"no children", "create", "append_block_children", map[string]any{"block_id": "b", "children": []any{}}, "must not be empty"},
		{"a child without a type", "create", "append_block_children", map[string]any{"block_id": "b", "children": []any{map[string]any{"paragraph": map[string]any{}}}}, "'children'[0]"},
		{"an after_block position without its id", "create", "append_block_children",
			map[string]any{"block_id": "b", "children": many[:1], "position": map[string]any{"type": "after_block"}}, "param 'position' must be"},
		{"in_trash that is not a boolean", "update", "update_page", map[string]any{"page_id": "p", "in_trash": "yes"}, "true or false"},
		{"no block_id", "delete", "delete_block", map[string]any{}, "'block_id' is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stub, n, _ := notionSetup(t)
			_, err := n.do(t, tt.method, tt.op, tt.params)
			refusedUnsent(t, err, tt.wantIn, len(stub.Requests()))
		})
	}
}

func TestNotionEntriesAreCheckedWhenTheManifestIsLoaded(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		config map[string]any
		wantIn string
	}{
		{"no api_key", map[string]any{}, "config.api_key is required"},
		{"a key the adapter does not read", map[string]any{"api_key": "k", "version": "2022-06-28"}, "unknown key 'version'"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, _, err := tryEntry(t, apistub.Example{Adapter: "notion", Config: tt.config}); err == nil || !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("error = %v, want one saying %q", err, tt.wantIn)
			}
		})
	}
}

func TestNotionListsPageWithTheCursorNotionGives(t *testing.T) {
	t.Parallel()
	stub, n, w := notionSetup(t)
	stub.AddBlock(w.page, "divider", map[string]any{})
	third := stub.AddBlock(w.page, "divider", map[string]any{})
	first, err := n.do(t, "fetch", "list_block_children", map[string]any{"block_id": w.page, "page_size": 2.0})
	if err != nil {
		t.Fatal(err)
	}
	d := first["data"].(map[string]any)
	if len(d["results"].([]any)) != 2 || d["has_more"] != true || d["next_cursor"] != third {
		t.Fatalf("first page = %v", d)
	}
	rest, err := n.do(t, "fetch", "list_block_children", map[string]any{"block_id": w.page, "start_cursor": d["next_cursor"]})
	if err != nil {
		t.Fatal(err)
	}
	d = rest["data"].(map[string]any)
	if r := d["results"].([]any); len(r) != 1 || r[0].(map[string]any)["id"] != third || d["has_more"] != false {
		t.Errorf("second page = %v", d)
	}
	if q := stub.Requests()[1].Query; q.Get("start_cursor") != third {
		t.Errorf("second query = %v", q)
	}
}
