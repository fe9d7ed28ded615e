package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/reconcilerhq/reconciler/ports"
)

// AuditLog is ports.AuditLog on PostgreSQL: the audit_log table, one row per
// write. An append made with a context carrying a transaction (DB.InTx) is
// part of it.
type AuditLog struct {
	db *DB
}

// NewAuditLog returns the audit log over db.
func NewAuditLog(db *DB) *AuditLog { return &AuditLog{db: db} }

var _ ports.AuditLog = (*AuditLog)(nil)

// AuditAppend stores e with the next sequence number.
func (l *AuditLog) AuditAppend(ctx context.Context, e ports.AuditEntry) (ports.AuditEntry, error) {
	e.At = ports.StoredTime(e.At)
	err := scanOne(l.db.hotQuery(ctx, `INSERT INTO audit_log (at, actor, source, action, method, path, kind, object_id, summary, status)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING seq`,
		e.At, e.Actor, e.Source, e.Action, e.Method, e.Path, e.Kind, e.ID, e.Summary, e.Status))(&e.Seq)
	if err != nil {
		return ports.AuditEntry{}, fmt.Errorf("append audit entry %s %s: %w", e.Action, e.ID, err)
	}
	return e, nil
}

// AuditList returns the entries matching p, newest first.
func (l *AuditLog) AuditList(ctx context.Context, p ports.AuditListParams) ([]ports.AuditEntry, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if p.Before > 0 {
		add("seq < ?", p.Before)
	}
	if p.Actor != "" {
		add("actor = ?", p.Actor)
	}
	if p.Kind != "" {
		add("kind = ?", p.Kind)
	}
	if p.ID != "" {
		add("object_id = ?", p.ID)
	}
	q := `SELECT seq, at, actor, source, action, method, path, kind, object_id, summary, status FROM audit_log`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, ports.AuditLimit(p))
	q += " ORDER BY seq DESC LIMIT $" + strconv.Itoa(len(args))
	rows, err := l.db.hotQuery(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit entries: %w", err)
	}
	defer rows.Close()
	out := []ports.AuditEntry{}
	for rows.Next() {
		var e ports.AuditEntry
		if err := rows.Scan(&e.Seq, &e.At, &e.Actor, &e.Source, &e.Action, &e.Method, &e.Path, &e.Kind, &e.ID, &e.Summary, &e.Status); err != nil {
			return nil, fmt.Errorf("list audit entries: %w", err)
		}
		e.At = ports.StoredTime(e.At)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit entries: %w", err)
	}
	return out, nil
}
