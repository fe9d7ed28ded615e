package postgres

import (
	"context"
	"fmt"

	"github.com/reconcilerhq/reconciler/ports"
)

var _ ports.JobTaker = (*ReleaseStore)(nil)

// jobsChannel is the LISTEN/NOTIFY channel on which JobCreate publishes a
// pending job once it is committed (see publisher); the payload is its
// agent id.
const jobsChannel = "reconciler_jobs"

// sqlJobTakeable locks the oldest takeable job of an agent (?0) at ?1,
// skipping jobs another transaction holds: release.Job.Takeable over the
// stored document.
const sqlJobTakeable = `SELECT ` + jobColumns + ` FROM release_jobs j
WHERE j.job_agent_id = ?0 AND j.active
	AND ((j.doc->'take') IS NULL AND j.status = 'pending'
		OR (j.doc->'take'->>'hand_out')::int < (j.doc->'take'->>'max_hand_outs')::int
			AND (j.doc->>'lease_until')::timestamptz <= ?1)
ORDER BY j.created_at, j.id
LIMIT 1
FOR UPDATE SKIP LOCKED`

// JobTake hands out the oldest takeable job of p.AgentID: the row is
// locked with SKIP LOCKED (so concurrent takers pass each other) and
// written by compare-and-swap in the same transaction.
func (s *ReleaseStore) JobTake(ctx context.Context, p ports.JobTakeParams) (ports.JobRow, error) {
	op := "take a job of agent " + p.AgentID
	if err := ports.ValidateJobTake(p); err != nil {
		return ports.JobRow{}, fmt.Errorf("%s: %w", op, err)
	}
	var out ports.JobRow
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		now := s.now()
		rows, err := s.queryJobs(ctx, sqlJobTakeable, p.AgentID, now)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return fmt.Errorf("none to take: %w", ports.ErrNotFound)
		}
		out = rows[0]
		next := out.Taken(now, p.Settings, p.Taker)
		v, err := s.JobUpdate(ctx, next, out.Version)
		if err != nil {
			return err
		}
		out.Job, _, err = relJob(next)
		out.Version, out.UpdatedAt = v, now
		return err
	})
	if err != nil {
		return ports.JobRow{}, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

// JobTakeNotify returns a channel woken by the jobs channel's
// notifications (and whenever its listener reconnects), until ctx ends.
func (s *ReleaseStore) JobTakeNotify(ctx context.Context) <-chan struct{} {
	return s.takers.subscribeUntil(ctx)
}

// Close stops the take listener, if JobTakeNotify started one, and closes
// the Catalog's try-lock connections. It is idempotent.
func (s *ReleaseStore) Close() {
	s.takers.close()
	s.Catalog.Close()
}
