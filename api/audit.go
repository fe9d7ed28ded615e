package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/ports"
)

// auditNoteKey is the context key of the note a write's handler adds to
// its audit entry.
type auditNoteKey struct{}

// auditNote is what a handler says of its write, for the audit entry.
type auditNote struct{ summary string }

// noteAudit sets the summary of the write's audit entry: what it changed,
// in words (the version and environment an approval is for, what a PUT
// created or changed).
func noteAudit(ctx context.Context, summary string) {
	if n, ok := ctx.Value(auditNoteKey{}).(*auditNote); ok {
		n.summary = summary
	}
}

// unaudited are the writes too frequent to record one by one: a pull
// agent's heartbeats (its take and report are recorded).
var unaudited = map[string]bool{"heartbeatJob": true}

// auditWrites is the middleware that records every write (any method but
// GET and HEAD) that succeeded: who (the token's name, local:USER offline),
// from where, the operation, the object its path names, what the handler
// noted, and the status. The entry goes to Options.Audit and is logged as
// one "audit" line.
//
// The entry is written in the write's own transaction: the handler runs
// inside Options.Tx with its answer held back, the entry is appended in
// the same transaction, and the answer goes out only once both committed.
// A refused write (4xx, 5xx) rolls everything back; a failed append or
// commit leaves neither and answers 500. A long poll or a stream cannot
// hold a transaction open: its entry is appended after it, on its own.
func (s *Server) auditWrites(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	if op.Method == http.MethodGet || op.Method == http.MethodHead || unaudited[op.OperationID] {
		next(ctx)
		return
	}
	if u := ctx.URL(); u.Query().Get("dry_run") == "true" {
		next(ctx) // a dry run writes nothing
		return
	}
	note := &auditNote{}
	ctx = huma.WithValue(ctx, auditNoteKey{}, note)
	lp, _ := op.Metadata[metaLongPoll].(bool)
	stream, _ := op.Metadata[metaStream].(bool)
	if s.o.Audit == nil || s.o.Tx == nil || lp || stream {
		next(ctx)
		e, ok := s.auditEntry(ctx, note)
		if ok && s.o.Audit != nil {
			if _, err := s.o.Audit.AuditAppend(context.WithoutCancel(ctx.Context()), e); err != nil {
				s.o.Logger.ErrorContext(ctx.Context(), "api.audit_failed", "action", e.Action, "id", e.ID, "error", err)
			}
		}
		s.logAudit(ctx, e, ok)
		return
	}
	held := &heldAnswer{humaContext: ctx}
	var e ports.AuditEntry
	var ok bool
	err := s.o.Tx.InTx(ctx.Context(), func(txCtx context.Context) error {
		held.humaContext = huma.WithContext(ctx, txCtx)
		next(held)
		if e, ok = s.auditEntry(held, note); !ok {
			return errWriteRefused
		}
		_, err := s.o.Audit.AuditAppend(txCtx, e)
		return err
	})
	if err != nil && !errors.Is(err, errWriteRefused) {
		s.o.Logger.ErrorContext(ctx.Context(), "api.audit_failed", "action", e.Action, "id", e.ID, "error", err)
		_ = huma.WriteErr(s.api, ctx, http.StatusInternalServerError, "the write was not made: its transaction or audit entry failed")
		return
	}
	held.send(ctx)
	s.logAudit(ctx, e, ok)
}

// errWriteRefused rolls back the transaction of a write its handler
// refused.
var errWriteRefused = errors.New("write refused")

// auditEntry is the entry of the write ctx answered, and whether it is to
// be recorded: a refused write (4xx, 5xx) and a take that found no job
// are not.
func (s *Server) auditEntry(ctx huma.Context, note *auditNote) (ports.AuditEntry, bool) {
	op := ctx.Operation()
	status := ctx.Status()
	if status == 0 {
		status = http.StatusOK
	}
	if status >= 400 || (op.OperationID == "takeJob" && status == http.StatusNoContent) {
		return ports.AuditEntry{}, false
	}
	p := principal(ctx.Context())
	actor := p.Name
	if actor == "" && p.Signed {
		actor = "signed-report"
	}
	u := ctx.URL()
	e := ports.AuditEntry{At: s.o.Clock.Now(), Actor: actor, Source: ctx.RemoteAddr(), Action: op.OperationID,
		Method: op.Method, Path: u.Path, Kind: auditKind(op), ID: auditID(ctx), Summary: note.summary, Status: status}
	if e.Summary == "" {
		e.Summary = op.Summary
	}
	return e, true
}

// logAudit logs a recorded write as one "audit" line.
func (s *Server) logAudit(ctx huma.Context, e ports.AuditEntry, ok bool) {
	if !ok {
		return
	}
	s.o.Logger.LogAttrs(ctx.Context(), slog.LevelInfo, "audit", slog.String("actor", e.Actor), slog.String("source", e.Source),
		slog.String("action", e.Action), slog.String("kind", e.Kind), slog.String("id", e.ID), slog.String("summary", e.Summary), slog.Int("status", e.Status))
}

// heldAnswer is a huma.Context whose status and body are held back until
// send: the answer of a write goes out only once its transaction
// committed. Headers go to the response as they are set (they are sent
// with the status).
type heldAnswer struct {
	humaContext
	status int
	body   bytes.Buffer
}

// SetStatus holds the status back.
func (h *heldAnswer) SetStatus(code int) { h.status = code }

// Status is the status held back.
func (h *heldAnswer) Status() int { return h.status }

// BodyWriter holds the body back.
func (h *heldAnswer) BodyWriter() io.Writer { return &h.body }

// humaContext is huma.Context under a name that does not hide its
// Context method when embedded.
type humaContext = huma.Context

// send writes the held answer to ctx.
func (h *heldAnswer) send(ctx huma.Context) {
	if h.status != 0 {
		ctx.SetStatus(h.status)
	}
	if h.body.Len() > 0 {
		_, _ = ctx.BodyWriter().Write(h.body.Bytes())
	}
}

// auditKind is the kind of object an operation writes: its first tag
// ("deployments", "versions", "catalog", ...).
func auditKind(op *huma.Operation) string {
	if len(op.Tags) > 0 {
		return op.Tags[0]
	}
	return ""
}

// auditID is the object the request's path names: its name (a catalog
// object's, whose path also holds a revision id), else its id, else its
// key.
func auditID(ctx huma.Context) string {
	for _, p := range []string{"name", "id", "key"} {
		if v := ctx.Param(p); v != "" {
			return v
		}
	}
	return ""
}

// AuditPage is a page of the audit log, newest first; NextCursor continues
// it.
type AuditPage = Page[ports.AuditEntry]

func (s *Server) registerAudit() {
	huma.Register(s.api, s.op("listAudit", http.MethodGet, "/audit", "List the audit log of writes, newest first", ports.ScopeRead, "audit"),
		func(ctx context.Context, in *struct {
			Actor  string `query:"actor" doc:"only this actor's writes (a token's name, local:USER)"`
			Kind   string `query:"kind" doc:"only writes of this kind of object (deployments, versions, catalog, ...)"`
			ID     string `query:"id" doc:"only writes of the object of this id"`
			Cursor int64  `query:"cursor" minimum:"0" doc:"next_cursor of the previous page"`
			Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"most entries returned"`
		}) (*body[AuditPage], error) {
			if s.o.Audit == nil {
				return reply(AuditPage{Items: []ports.AuditEntry{}}), nil
			}
			list, err := s.o.Audit.AuditList(ctx, ports.AuditListParams{Before: in.Cursor, Actor: in.Actor, Kind: in.Kind, ID: in.ID, Limit: in.Limit + 1})
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			page := AuditPage{Items: list}
			if len(list) > in.Limit {
				page.Items = list[:in.Limit]
				page.NextCursor = strconv.FormatInt(page.Items[in.Limit-1].Seq, 10)
			}
			return reply(page), nil
		})
}
