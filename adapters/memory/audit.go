package memory

import (
	"context"
	"sync"

	"github.com/reconcilerhq/reconciler/ports"
)

// AuditLog is ports.AuditLog in memory.
type AuditLog struct {
	mu      sync.Mutex
	entries []ports.AuditEntry
}

// NewAuditLog returns an empty audit log.
func NewAuditLog() *AuditLog { return &AuditLog{} }

var _ ports.AuditLog = (*AuditLog)(nil)

// AuditAppend stores e with the next sequence number. Made with a context
// carrying a transaction (Transactor.InTx), the entry is part of it: it is
// stored when the transaction commits, numbered then (the entry returned
// has Seq 0), and never when it rolls back.
func (l *AuditLog) AuditAppend(ctx context.Context, e ports.AuditEntry) (ports.AuditEntry, error) {
	e.At = ports.StoredTime(e.At)
	if onCommit(ctx, func() { l.append(e) }) {
		return e, nil
	}
	return l.append(e), nil
}

// append stores e with the next sequence number.
func (l *AuditLog) append(e ports.AuditEntry) ports.AuditEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.Seq = int64(len(l.entries)) + 1
	l.entries = append(l.entries, e)
	return e
}

// AuditList returns the entries matching p, newest first.
func (l *AuditLog) AuditList(_ context.Context, p ports.AuditListParams) ([]ports.AuditEntry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	limit := ports.AuditLimit(p)
	out := []ports.AuditEntry{}
	for i := len(l.entries) - 1; i >= 0 && len(out) < limit; i-- {
		e := l.entries[i]
		if (p.Before > 0 && e.Seq >= p.Before) || (p.Actor != "" && e.Actor != p.Actor) ||
			(p.Kind != "" && e.Kind != p.Kind) || (p.ID != "" && e.ID != p.ID) {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}
