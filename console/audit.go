package console

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/reconcilerhq/reconciler/ports"
)

// heldWriter holds a change's answer back (headers go to the response as
// they are set, sent with the status): it goes out only once the change
// and its audit entry committed.
type heldWriter struct {
	http.ResponseWriter
	code int
	body bytes.Buffer
}

func (w *heldWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *heldWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.body.Write(b)
}

// status is the answered status (200 when the handler wrote nothing).
func (w *heldWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// send writes the held answer to w.
func (h *heldWriter) send(w http.ResponseWriter) {
	w.WriteHeader(h.status())
	_, _ = w.Write(h.body.Bytes())
}

// errChangeRefused rolls back the transaction of a change its handler
// refused.
var errChangeRefused = errors.New("change refused")

// audited runs the change h and records it, as the API's audit middleware
// records its writes: who (the session's token name), from where, the
// route, and the object its path names. With Options.Tx the change and
// its entry are one transaction: a refused change (4xx, 5xx) rolls back,
// and a failed append or commit leaves neither and answers 500.
func (s *Server) audited(w http.ResponseWriter, r *http.Request, actor string, h http.HandlerFunc) {
	held := &heldWriter{ResponseWriter: w}
	if s.o.Tx == nil || s.o.Audit == nil {
		h(held, r)
		held.send(w)
		s.auditAction(r, actor, held.status())
		return
	}
	var e ports.AuditEntry
	err := s.o.Tx.InTx(r.Context(), func(ctx context.Context) error {
		h(held, r.WithContext(ctx))
		if held.status() >= 400 {
			return errChangeRefused
		}
		e = s.auditEntry(r, actor, held.status())
		_, err := s.o.Audit.AuditAppend(ctx, e)
		return err
	})
	if err != nil && !errors.Is(err, errChangeRefused) {
		s.o.Logger.ErrorContext(r.Context(), "console.audit_failed", "action", e.Action, "id", e.ID, "error", err)
		s.problem(w, r, http.StatusInternalServerError, "the change was not made: its transaction or audit entry failed")
		return
	}
	held.send(w)
	if err == nil {
		s.logAudit(r, e)
	}
}

// auditAction records a change that succeeded, in a statement of its own
// (a console without Options.Tx).
func (s *Server) auditAction(r *http.Request, actor string, status int) {
	if status >= 400 {
		return
	}
	e := s.auditEntry(r, actor, status)
	if s.o.Audit != nil {
		if _, err := s.o.Audit.AuditAppend(context.WithoutCancel(r.Context()), e); err != nil {
			s.o.Logger.ErrorContext(r.Context(), "console.audit_failed", "action", e.Action, "id", e.ID, "error", err)
		}
	}
	s.logAudit(r, e)
}

// auditEntry is the entry of a change answered with status.
func (s *Server) auditEntry(r *http.Request, actor string, status int) ports.AuditEntry {
	action := strings.TrimPrefix(r.Pattern, "POST ")
	kind, _, _ := strings.Cut(strings.TrimPrefix(action, "/"), "/")
	id := r.PathValue("id")
	if n := r.PathValue("name"); n != "" {
		id = n
	}
	return ports.AuditEntry{At: s.o.Clock.Now(), Actor: actor, Source: r.RemoteAddr, Action: "console " + action,
		Method: r.Method, Path: r.URL.Path, Kind: kind, ID: id, Summary: auditSummary(r), Status: status}
}

// logAudit logs a recorded change as one "audit" line.
func (s *Server) logAudit(r *http.Request, e ports.AuditEntry) {
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
