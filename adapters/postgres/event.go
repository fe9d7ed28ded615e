package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/workflow"
)

// The event outbox (ports.Events) is the workflow_events table of
// migration 0011, written by triggers on release_releases and
// release_jobs in the statement that makes the change.

type eventRow struct {
	Seq  int64     `bun:"seq"`
	Type string    `bun:"type"`
	At   time.Time `bun:"at"`
	Doc  []byte    `bun:"doc"`
}

// EventsPending lists up to limit unprocessed events, oldest first.
func (s *ReleaseStore) EventsPending(ctx context.Context, limit int) ([]ports.Event, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("pending events: limit must be positive")
	}
	var rows []eventRow
	if err := s.db.idb(ctx).NewRaw(`SELECT seq, type, at, doc FROM workflow_events ORDER BY seq LIMIT ?`, limit).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("pending events: %w", err)
	}
	out := make([]ports.Event, len(rows))
	for i, r := range rows {
		if err := json.Unmarshal(r.Doc, &out[i]); err != nil {
			return nil, fmt.Errorf("pending events: event %d: %w", r.Seq, err)
		}
		out[i].Seq, out[i].Type, out[i].At = r.Seq, workflow.EventType(r.Type), r.At.UTC()
	}
	return out, nil
}

// EventsDone deletes processed events from the outbox.
func (s *ReleaseStore) EventsDone(ctx context.Context, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	if _, err := s.exec(ctx, `DELETE FROM workflow_events WHERE seq = ANY(?::bigint[])`, pgdialect.Array(seqs)); err != nil {
		return fmt.Errorf("events done: %w", err)
	}
	return nil
}
