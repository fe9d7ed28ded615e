package console

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/reconcilerhq/reconciler/ports"
)

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// status is the answered status (200 when the handler wrote nothing).
func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// auditAction records a change made from the console that succeeded, as
// the API's audit middleware records its writes: who (the session's token
// name), from where, the route, and the object its path names.
func (s *Server) auditAction(r *http.Request, actor string, status int) {
	if status >= 400 {
		return
	}
	action := strings.TrimPrefix(r.Pattern, "POST ")
	kind, _, _ := strings.Cut(strings.TrimPrefix(action, "/"), "/")
	id := r.PathValue("id")
	if n := r.PathValue("name"); n != "" {
		id = n
	}
	e := ports.AuditEntry{At: s.o.Clock.Now(), Actor: actor, Source: r.RemoteAddr, Action: "console " + action,
		Method: r.Method, Path: r.URL.Path, Kind: kind, ID: id, Summary: auditSummary(r), Status: status}
	if s.o.Audit != nil {
		if _, err := s.o.Audit.AuditAppend(context.WithoutCancel(r.Context()), e); err != nil {
			s.o.Logger.ErrorContext(r.Context(), "console.audit_failed", "action", e.Action, "id", e.ID, "error", err)
		}
	}
	s.o.Logger.LogAttrs(r.Context(), slog.LevelInfo, "audit", slog.String("actor", e.Actor), slog.String("source", e.Source),
		slog.String("action", e.Action), slog.String("kind", e.Kind), slog.String("id", e.ID), slog.String("summary", e.Summary), slog.Int("status", e.Status))
}

// auditSummary names what a console change was about: its form's fields
// that say it (the environment of an approval, a force-deploy's scope and
// reason, a task run), never the CSRF token.
func auditSummary(r *http.Request) string {
	var parts []string
	for _, f := range []string{"environment_id", "resource_id", "reason", "kind", "scope_type", "scope_id"} {
		if v := r.PostFormValue(f); v != "" {
			parts = append(parts, f+"="+v)
		}
	}
	if run := r.PathValue("run"); run != "" {
		parts = append(parts, "task run "+run)
	}
	return strings.Join(parts, ", ")
}

// maxHistory is how many audit entries an object page shows.
const maxHistory = 20

// history is the newest audit entries of the object kind/id, for its page;
// none without an audit log or when it cannot be read (the page still
// renders, and the failure is logged).
func (s *Server) history(r *http.Request, kind, id string) []ports.AuditEntry {
	if s.o.Audit == nil {
		return nil
	}
	list, err := s.o.Audit.AuditList(r.Context(), ports.AuditListParams{Kind: kind, ID: id, Limit: maxHistory})
	if err != nil {
		s.o.Logger.ErrorContext(r.Context(), "console.history", "kind", kind, "id", id, "error", err)
		return nil
	}
	return list
}
