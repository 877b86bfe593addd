// Package web is the console's HTTP side: server-rendered pages of runs and
// open gates, the acts a person may take on them, and server-sent events
// that tell an open page when what it shows has changed. Every page and act
// is one or a few engine-svc gRPC calls, each with its own deadline.
package web

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/status"

	"github.com/realm-go/realm/console-svc/identity"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Options are what the console serves from.
type Options struct {
	Engine realmv1.EngineServiceClient
	// Identity says who each request comes from.
	Identity identity.Source
	// Poll is how often an open page's event stream asks the engine whether
	// what it shows has changed (default 2s).
	Poll time.Duration
	// StreamLimit ends an event stream after this long (default 5m); the
	// browser reconnects, so no connection lives for ever.
	StreamLimit time.Duration
	// CallTimeout bounds each engine call (default 10s).
	CallTimeout time.Duration
	// PageSize is the runs list's page (default 50).
	PageSize int32
	Log      *slog.Logger
	// Vouch asks the engine to record a signed-in person's name as
	// verified (responded_by_verified): set when the console reaches the
	// engine with its own certificate, which the engine checks.
	Vouch bool
}

// Server is the console.
type Server struct {
	o    Options
	tmpl map[string]*template.Template
	// streams counts the event streams open now: each polls the engine,
	// so a leak would show here (and in /metrics).
	streams atomic.Int64
}

// Streams is how many event streams are open.
func (s *Server) Streams() int64 { return s.streams.Load() }

// New builds the console.
func New(o Options) (*Server, error) {
	if o.Engine == nil || o.Identity == nil {
		return nil, errors.New("web: Engine and Identity are required")
	}
	if o.Poll <= 0 {
		o.Poll = 2 * time.Second
	}
	if o.StreamLimit <= 0 {
		o.StreamLimit = 5 * time.Minute
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 10 * time.Second
	}
	if o.PageSize <= 0 {
		o.PageSize = 50
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{o: o, tmpl: map[string]*template.Template{}}
	for _, page := range []string{"runs", "run", "gates", "refused"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/gate.html", "templates/"+page+".html")
		if err != nil {
			return nil, err
		}
		s.tmpl[page] = t
	}
	return s, nil
}

// Handler is every route, behind the identity check, the cross-origin
// check on unsafe methods (CSRF) and the security headers.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	assets, _ := fs.Sub(assetFS, "assets")
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.Handle("GET /{$}", http.RedirectHandler("/runs", http.StatusSeeOther))
	mux.Handle("GET /runs", s.person(s.runs))
	mux.Handle("GET /runs/{run}", s.person(s.run))
	mux.Handle("POST /runs/{run}/advance", s.person(s.advance))
	mux.Handle("POST /runs/{run}/abandon", s.person(s.abandon))
	mux.Handle("GET /gates", s.person(s.gates))
	mux.Handle("POST /runs/{run}/gates/{gate}", s.person(s.answer))
	mux.Handle("GET /events", s.person(s.events))
	// A sign-in with routes of its own (OIDC's login and callback).
	if r, ok := s.o.Identity.(interface{ Register(*http.ServeMux) }); ok {
		r.Register(mux)
	}
	// A browser's cross-site POST carries Sec-Fetch-Site or an Origin of
	// another site: refused, so another page cannot answer a gate in the
	// signed-in person's name.
	cop := http.NewCrossOriginProtection()
	return headers(cop.Handler(mux))
}

// headers sets a strict Content-Security-Policy: the console's own script
// and style only, no inline code, no frames.
func headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		next.ServeHTTP(w, r)
	})
}

type personHandler func(w http.ResponseWriter, r *http.Request, p identity.Person)

// person identifies the request before the page runs.
func (s *Server) person(h personHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.o.Identity.Identify(r)
		if err != nil {
			var ref *identity.Refusal
			if !errors.As(err, &ref) {
				ref = &identity.Refusal{Status: http.StatusForbidden, Msg: err.Error()}
			}
			if ref.Login != "" && r.Method == http.MethodGet && r.URL.Path != "/events" {
				http.Redirect(w, r, ref.Login, http.StatusSeeOther)
				return
			}
			s.render(w, ref.Status, "refused", page{Title: "Refused", Error: ref.Msg})
			return
		}
		h(w, r, p)
	})
}

// page is what every template gets.
type page struct {
	Title  string
	Person identity.Person
	Mode   string
	// Events is the query of this page's event stream, empty for none.
	Events string
	Error  string
	Notice string
	// SignOut shows the sign-out button (a sign-in the console keeps).
	SignOut bool
	Data    any
}

func (s *Server) render(w http.ResponseWriter, code int, name string, p page) {
	if p.Mode == "" {
		p.Mode = s.o.Identity.Mode()
	}
	_, p.SignOut = s.o.Identity.(interface{ Register(*http.ServeMux) })
	p.SignOut = p.SignOut && p.Person.Name != ""
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if err := s.tmpl[name].Execute(w, p); err != nil {
		s.o.Log.Error("console: render "+name, "error", err)
	}
}

func (s *Server) call(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.o.CallTimeout)
}

// grpcMessage is an engine error's own sentence.
func grpcMessage(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Message()
	}
	return err.Error()
}

// caller names the console on the record; the person is responded_by.
func caller() *realmv1.Caller {
	return &realmv1.Caller{By: "console-svc", BySource: "stated"}
}
