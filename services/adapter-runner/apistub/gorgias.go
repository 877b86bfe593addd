package apistub

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Gorgias credentials the stub accepts (HTTP Basic "email:api_key").
const (
	GorgiasEmail  = "bot@acme.example"
	GorgiasAPIKey = "gorgias-key-1"
)

// Gorgias stands in for the Gorgias REST API under /api: tickets, their
// messages and customers, cursor-paged lists ({data, meta: {next_cursor,
// prev_cursor}}), 201 on create, 202 on update, and its error bodies.
// Seeded with ticket 101 (3 messages) and 102 (none), customers 7 and 8.
type Gorgias struct {
	stub
	mu        sync.Mutex
	tickets   []map[string]any
	messages  []map[string]any
	customers []map[string]any
	nextID    int
}

// NewGorgias starts the stub; t's cleanup stops it.
func NewGorgias(t testing.TB) *Gorgias {
	g := &Gorgias{nextID: 1000}
	g.errBody = func(status int) any {
		return map[string]any{"error": map[string]any{"msg": http.StatusText(status)}}
	}
	g.customers = []map[string]any{
		{"id": 7.0, "email": "ana@example.com", "name": "Ana Lima", "firstname": "Ana", "lastname": "Lima", "channels": []any{map[string]any{"type": "email", "address": "ana@example.com"}}, "created_datetime": "2026-02-01T09:00:00+00:00"},
		{"id": 8.0, "email": "bo@example.com", "name": "Bo Chen", "firstname": "Bo", "lastname": "Chen", "channels": []any{}, "created_datetime": "2026-02-03T10:00:00+00:00"},
	}
	g.tickets = []map[string]any{
		{"id": 101.0, "uri": "/api/tickets/101/", "status": "open", "channel": "email", "via": "email", "subject": "Where is my order #1030?", "customer": map[string]any{"id": 7.0, "email": "ana@example.com"}, "tags": []any{}, "created_datetime": "2026-03-01T08:00:00+00:00"},
		{"id": 102.0, "uri": "/api/tickets/102/", "status": "closed", "channel": "chat", "via": "chat", "subject": "Thanks!", "customer": map[string]any{"id": 8.0, "email": "bo@example.com"}, "tags": []any{}, "created_datetime": "2026-03-02T08:00:00+00:00"},
	}
	g.SeedMessages(101, 3)
	g.start(t, g.route)
	return g
}

// URL is the API's base URL (a config's base_url).
func (g *Gorgias) URL() string { return g.srv.URL + "/api" }

// Token is the auth.token the stub accepts.
func (g *Gorgias) Token() string { return GorgiasEmail + ":" + GorgiasAPIKey }

// SeedMessages adds n messages to ticket id.
func (g *Gorgias) SeedMessages(id, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for range n {
		g.nextID++
		g.messages = append(g.messages, map[string]any{
			"id": float64(g.nextID), "ticket_id": float64(id), "uri": fmt.Sprintf("/api/tickets/%d/messages/%d/", id, g.nextID),
			"channel": "email", "via": "email", "public": true, "from_agent": false,
			"body_text": fmt.Sprintf("message %d", g.nextID), "created_datetime": "2026-03-01T08:00:00+00:00",
		})
	}
}

func (g *Gorgias) route(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Basic "+base64.StdEncoding.EncodeToString([]byte(g.Token())) {
		writeJSON(w, http.StatusUnauthorized, g.errBody(http.StatusUnauthorized))
		return
	}
	parts := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, "/api"), "/"), "/")
	g.mu.Lock()
	defer g.mu.Unlock()
	var id float64
	if len(parts) > 1 {
		n, err := strconv.Atoi(parts[1])
		if err != nil {
			writeJSON(w, http.StatusNotFound, g.errBody(http.StatusNotFound))
			return
		}
		id = float64(n)
	}
	route := r.Method + " " + parts[0]
	if len(parts) > 1 {
		route += "/{id}"
	}
	if len(parts) > 2 {
		route += "/" + parts[2]
	}
	switch route {
	case "GET tickets":
		g.page(w, r, g.tickets)
	case "GET customers":
		g.page(w, r, filter(g.customers, "email", r.URL.Query().Get("email")))
	case "GET messages":
		g.page(w, r, g.messages)
	case "GET tickets/{id}", "GET customers/{id}":
		if it := find(g.collection(parts[0]), id); it != nil {
			writeJSON(w, http.StatusOK, it)
			return
		}
		writeJSON(w, http.StatusNotFound, g.errBody(http.StatusNotFound))
	case "GET tickets/{id}/messages":
		if find(g.tickets, id) == nil {
			writeJSON(w, http.StatusNotFound, g.errBody(http.StatusNotFound))
			return
		}
		g.page(w, r, filter(g.messages, "ticket_id", id))
	case "POST tickets/{id}/messages", "POST tickets", "POST customers":
		g.create(w, r, parts[0], id)
	case "PUT tickets/{id}", "PUT customers/{id}":
		it := find(g.collection(parts[0]), id)
		body, ok := decode(w, r, g.errBody)
		if !ok {
			return
		}
		if it == nil {
			writeJSON(w, http.StatusNotFound, g.errBody(http.StatusNotFound))
			return
		}
		for k, v := range body {
			it[k] = v
		}
		writeJSON(w, http.StatusAccepted, it)
	default:
		writeJSON(w, http.StatusNotFound, g.errBody(http.StatusNotFound))
	}
}

func (g *Gorgias) collection(name string) []map[string]any {
	if name == "customers" {
		return g.customers
	}
	return g.tickets
}

// create answers a POST: a message needs its ticket, a ticket needs
// messages (as Gorgias requires), a customer anything.
func (g *Gorgias) create(w http.ResponseWriter, r *http.Request, collection string, ticket float64) {
	body, ok := decode(w, r, g.errBody)
	if !ok {
		return
	}
	g.nextID++
	body["id"] = float64(g.nextID)
	body["created_datetime"] = "2026-03-05T12:00:00+00:00"
	switch {
	case ticket != 0:
		if find(g.tickets, ticket) == nil {
			writeJSON(w, http.StatusNotFound, g.errBody(http.StatusNotFound))
			return
		}
		body["ticket_id"] = ticket
		g.messages = append(g.messages, body)
	case collection == "tickets":
		if msgs, _ := body["messages"].([]any); len(msgs) == 0 {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"msg": "Validation error", "data": map[string]any{"messages": []any{"Missing data for required field."}}}})
			return
		}
		body["status"] = "open"
		g.tickets = append(g.tickets, body)
	default:
		g.customers = append(g.customers, body)
	}
	writeJSON(w, http.StatusCreated, body)
}

// page is one cursor page of items: limit (default 30, at most 100) from
// the cursor (the next item's index, as Gorgias's cursors are opaque).
func (g *Gorgias) page(w http.ResponseWriter, r *http.Request, items []map[string]any) {
	q := r.URL.Query()
	limit := 30
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"msg": "Validation error", "data": map[string]any{"limit": []any{"Must be between 1 and 100."}}}})
			return
		}
		limit = n
	}
	from := 0
	if c := q.Get("cursor"); c != "" {
		b, _ := base64.RawURLEncoding.DecodeString(c)
		var err error
		if from, err = strconv.Atoi(string(b)); err != nil || from < 0 || from > len(items) {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"msg": "Invalid cursor"}})
			return
		}
	}
	to := min(from+limit, len(items))
	var next any
	if to < len(items) {
		next = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(to)))
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list", "uri": r.URL.RequestURI(), "data": slices.Clone(items[from:to]),
		"meta": map[string]any{"prev_cursor": nil, "next_cursor": next},
	})
}

func find(items []map[string]any, id float64) map[string]any {
	for _, it := range items {
		if it["id"] == id {
			return it
		}
	}
	return nil
}

// filter keeps the items whose key is v; all of them when v is "".
func filter(items []map[string]any, key string, v any) []map[string]any {
	if v == "" {
		return items
	}
	var out []map[string]any
	for _, it := range items {
		if it[key] == v {
			out = append(out, it)
		}
	}
	return out
}

// decode reads a JSON object body, answering 400 when it is not one.
func decode(w http.ResponseWriter, r *http.Request, errBody func(int) any) (map[string]any, bool) {
	var m map[string]any
	if r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&m) != nil || m == nil {
		writeJSON(w, http.StatusBadRequest, errBody(http.StatusBadRequest))
		return nil, false
	}
	return m, true
}

// GorgiasExample reads ticket 101 from g.
func GorgiasExample(g *Gorgias) Example {
	return Example{
		Adapter: "gorgias",
		Config: map[string]any{
			"domain": "acme", "base_url": g.URL(),
			"auth": map[string]any{"type": "basic", "token": "${secret:GORGIAS_TOKEN}"},
		},
		Env:       map[string]string{"GORGIAS_TOKEN": g.Token()},
		Method:    "fetch",
		Operation: "get_ticket",
		Params:    map[string]any{"ticket_id": 101.0},
		Output: map[string]any{
			"id": 101.0, "uri": "/api/tickets/101/", "status": "open", "channel": "email", "via": "email",
			"subject": "Where is my order #1030?", "customer": map[string]any{"id": 7.0, "email": "ana@example.com"},
			"tags": []any{}, "created_datetime": "2026-03-01T08:00:00+00:00",
		},
	}
}
