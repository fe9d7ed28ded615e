package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
)

// TestJobTakeNotifyAcrossSessions: a pending job inserted by another
// session (another process's pool) wakes a JobTakeNotify subscriber once
// its listener listens (migration 0015's trigger), and a subscription
// leaves the listener when its context ends.
func TestJobTakeNotifyAcrossSessions(t *testing.T) {
	t.Parallel()
	dsn, _ := pgtest.Schema(t)
	open := func() *DB {
		db, err := Open(t.Context(), dsn)
		require.NoError(t, err)
		t.Cleanup(db.Close)
		return db
	}
	db := open()
	require.NoError(t, db.MigrateUp(t.Context()))
	rs := NewReleaseStore(db, ports.SystemClock)
	listening := make(chan uint32, 4)
	rs.takers.onListen = listening
	t.Cleanup(rs.Close)
	ctx, cancel := context.WithCancel(t.Context())
	wake := rs.JobTakeNotify(ctx)
	awaitPID(t, listening)
	drain(wake) // the wake-up of the first LISTEN
	producer := open()
	_, err := producer.pool.Exec(t.Context(), `INSERT INTO release_jobs (id, idempotency_key, release_id, target_key, deployment_id,
		environment_id, resource_id, version_id, job_agent_id, status, active, created_at, doc, version, updated_at)
		VALUES ('j1', 'k1', 'r1', 'd:e:r', 'd', 'e', 'r', 'v', 'puller', 'pending', true, now(), '{}', 1, now())`)
	require.NoError(t, err)
	awaitWake(t, wake, "a pending job was inserted by another session")

	cancel()
	require.Eventually(t, func() bool {
		rs.takers.mu.Lock()
		defer rs.takers.mu.Unlock()
		return len(rs.takers.subs) == 0
	}, 5*time.Second, time.Millisecond, "a subscription whose context ended leaves")
}
