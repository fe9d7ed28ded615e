package console

import (
	"context"
	"embed"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/ports"
)

// DefaultRefresh is how often live parts of a page poll the server when
// the event stream fails (they follow the stream, GET /events, otherwise).
const DefaultRefresh = 30 * time.Second

// maxFormBytes caps a form body (413 beyond it): every form is a few ids.
const maxFormBytes = 64 << 10

// maxRows caps every list a page shows; a longer list says it was cut.
const maxRows = 500

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options are the services and stores the console reads and acts through:
// the same ones the API uses.
type Options struct {
	// Chain is the release chain (approvals, force-deploys, explain).
	Chain *chain.Chain
	// Flows is the workflow controller (status, cancel, approve).
	Flows *flow.Controller
	// Catalog is the revisioned catalog (list, propose, approve).
	Catalog *catalog.Service
	// Releases, Workflows and Runs are read for the pages' lists.
	Releases  ports.ReleaseStore
	Workflows ports.WorkflowStore
	Runs      ports.RunStore
	// Queue is read and redriven by the operations page.
	Queue ports.Queue
	// Tokens authenticates the session's token.
	Tokens ports.Tokens
	Clock  ports.Clock
	Logger *slog.Logger
	// Insecure serves without a login: every request acts as
	// InsecurePrincipal ("anonymous" when empty) with every scope, as the
	// API does (loopback listeners only; cmd/reconciler enforces it).
	Insecure          bool
	InsecurePrincipal string
	// Refresh is how often live parts poll when the event stream fails
	// (or is not served); zero means DefaultRefresh.
	Refresh time.Duration
	// Changes is the event stream the live parts follow (GET /events);
	// nil: they poll every Refresh.
	Changes ports.ChangeStream
	// Audit records every change made from the console, as the API records
	// its writes; nil records none (they are still logged as audit lines).
	Audit ports.AuditLog
	// Tx, when set with Audit, runs each change and its audit entry in one
	// transaction: the change is made with its entry or not at all.
	Tx ports.Transactor
	// SecureCookie marks the session cookie Secure even on a plain HTTP
	// request: the console is reached over https through a proxy
	// (serve --public-url https://…). Over TLS it is always Secure.
	SecureCookie bool
	// SessionTTL is how long a console session lasts; zero means
	// DefaultSessionTTL.
	SessionTTL time.Duration
}

// Server is the console: New builds it, Handler serves it.
type Server struct {
	o     Options
	pages map[string]*template.Template
	mux   *http.ServeMux
	// streams holds a slot per open event stream (maxStreams).
	streams chan struct{}
}

// New builds the console over o.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Clock == nil {
		o.Clock = ports.SystemClock
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	s := &Server{o: o, pages: parsePages(), mux: http.NewServeMux(), streams: make(chan struct{}, maxStreams)}
	static, _ := fs.Sub(staticFS, "static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", s.staticHandler(static)))
	s.mux.HandleFunc("GET /login", s.loginPage)
	s.mux.HandleFunc("POST /login", s.login)
	s.mux.HandleFunc("POST /logout", s.logout)
	s.routeTargets()
	s.routeWorkflows()
	s.routeRuns()
	s.routeCatalog()
	s.routeOperations()
	s.routeEvents()
	return s
}

// Handler serves the console; mount it at "/".
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		if msg := api.UndecodableRequest(r); msg != "" {
			s.problem(w, r, http.StatusBadRequest, msg)
			return
		}
		s.mux.ServeHTTP(w, r)
	})
}

// staticHandler serves the embedded script and style sheet, cacheable
// for an hour.
func (s *Server) staticHandler(fsys fs.FS) http.Handler {
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, ".js") && !strings.HasSuffix(r.URL.Path, ".css") {
			s.notFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
}

// view is what every page template gets: the page's own data and the
// session's (who, what it may do, the CSRF token for its forms).
type view struct {
	Title   string
	Nav     string
	Session session
	Refresh int // milliseconds
	Data    any
}

// render writes page name with data, status 200.
func (s *Server) render(w http.ResponseWriter, r *http.Request, name, title, nav string, data any) {
	s.renderStatus(w, r, http.StatusOK, name, title, nav, data)
}

// renderStatus writes page name with data and status.
func (s *Server) renderStatus(w http.ResponseWriter, r *http.Request, status int, name, title, nav string, data any) {
	t, ok := s.pages[name]
	if !ok {
		panic("console: no page " + name)
	}
	v := view{Title: title, Nav: nav, Session: sessionOf(r.Context()), Refresh: int(s.o.Refresh.Milliseconds()), Data: data}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "page", v); err != nil {
		s.o.Logger.ErrorContext(r.Context(), "console.render", "page", name, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, b.String())
}

// fragment writes the named block of page name alone (an htmx swap).
func (s *Server) fragment(w http.ResponseWriter, r *http.Request, name, block string, data any) {
	v := view{Session: sessionOf(r.Context()), Refresh: int(s.o.Refresh.Milliseconds()), Data: data}
	var b strings.Builder
	if err := s.pages[name].ExecuteTemplate(&b, block, v); err != nil {
		s.o.Logger.ErrorContext(r.Context(), "console.render", "page", name, "block", block, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = io.WriteString(w, b.String())
}

// problemView is the error page's data.
type problemView struct {
	Status  int
	Message string
}

// fail renders an error page: the API's status for the error (404, 409,
// 422, ...) with its message, or 500 with nothing but "internal error"
// for a failure that is not the caller's fault (logged).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := api.StatusOf(err)
	if status >= http.StatusInternalServerError {
		s.o.Logger.ErrorContext(r.Context(), "console.error", "path", r.URL.Path, "error", err)
		msg = "internal error"
	}
	s.problem(w, r, status, msg)
}

// problem renders an error page with status and msg.
func (s *Server) problem(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.renderStatus(w, r, status, "problem", http.StatusText(status), "", problemView{Status: status, Message: msg})
}

// notFound is the console's 404 for an unknown path.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.problem(w, r, http.StatusNotFound, "no page "+r.URL.Path)
}

// back redirects (303) to next when it is a path of this console, else to
// fallback: a form's "next" never leads off the site.
func back(w http.ResponseWriter, r *http.Request, fallback string) {
	next := r.PostFormValue("next")
	if !localPath(next) {
		next = fallback
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// localPath reports whether p is an absolute path on this host: it starts
// with one "/" and holds no "\" (browsers read "/\host" as "//host") and
// no control character (browsers drop TAB, CR and LF, so "/<TAB>/host"
// becomes "//host").
func localPath(p string) bool {
	return strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "//") && !strings.Contains(p, `\`) &&
		!strings.ContainsFunc(p, unicode.IsControl)
}

// listAll reads every object of a kind through its pages, at most maxRows;
// cut reports that more exist.
func listAll[T any](ctx context.Context, objs ports.Objects[T], parent string) (items []T, cut bool, err error) {
	p := ports.ListParams{Parent: parent}
	for {
		page, err := objs.List(ctx, p)
		if err != nil {
			return nil, false, err
		}
		for _, it := range page.Items {
			if len(items) == maxRows {
				return items, true, nil
			}
			items = append(items, it.Value)
		}
		if page.Continue == "" {
			return items, false, nil
		}
		p.Continue = page.Continue
	}
}
