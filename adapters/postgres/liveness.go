package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
)

// Liveness is the PostgreSQL ports.Liveness: the process_liveness table of
// migration 0020, one row per process. Beats and ends run on the
// liveness lane (ports.LaneLiveness), reads on the renewal lane, so a beat
// never waits behind passes nor renewals.
type Liveness struct {
	db *DB
}

var _ ports.Liveness = (*Liveness)(nil)

// NewLiveness returns the liveness rows of db.
func NewLiveness(db *DB) *Liveness { return &Liveness{db: db} }

// LivenessBeat records owner alive until until, never moving it back.
func (l *Liveness) LivenessBeat(ctx context.Context, owner string, until time.Time) error {
	if err := ports.ValidateOwner(owner); err != nil {
		return fmt.Errorf("liveness beat: %w", err)
	}
	ctx = ports.WithLane(ctx, ports.LaneLiveness)
	_, err := l.db.hotExec(ctx, `INSERT INTO process_liveness (owner, alive_until) VALUES ($1, $2)
		ON CONFLICT (owner) DO UPDATE SET alive_until = greatest(process_liveness.alive_until, EXCLUDED.alive_until)`,
		owner, pgTime(until))
	if err != nil {
		return fmt.Errorf("liveness beat of %s: %w", owner, err)
	}
	return nil
}

// LivenessGet is until when owner is alive; zero without a row.
func (l *Liveness) LivenessGet(ctx context.Context, owner string) (time.Time, error) {
	ctx = ports.WithLane(ctx, ports.LaneRenewal)
	var until time.Time
	err := scanOne(l.db.hotQuery(ctx, `SELECT alive_until FROM process_liveness WHERE owner = $1`, owner))(&until)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("liveness of %s: %w", owner, err)
	}
	return until.UTC(), nil
}

// LivenessEnd removes owner's row.
func (l *Liveness) LivenessEnd(ctx context.Context, owner string) error {
	ctx = ports.WithLane(ctx, ports.LaneLiveness)
	if _, err := l.db.hotExec(ctx, `DELETE FROM process_liveness WHERE owner = $1`, owner); err != nil {
		return fmt.Errorf("end liveness of %s: %w", owner, err)
	}
	return nil
}
