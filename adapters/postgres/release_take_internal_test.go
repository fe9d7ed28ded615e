package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestJobTakeNotifyAcrossSessions: a pending job created by another
// process's store (another pool) wakes a JobTakeNotify subscriber once its
// listener listens, but only when the creating transaction has committed;
// and a subscription leaves the listener when its context ends.
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

	other := open()
	producer := NewReleaseStore(other, ports.SystemClock)
	t.Cleanup(producer.Close)
	_, err := other.pool.Exec(t.Context(), `INSERT INTO release_releases (id, target_key, version_id, doc, created_at)
		VALUES ('r1', 'd:e:r', 'v', '{}', now())`)
	require.NoError(t, err)
	job := release.Job{ID: "j1", ReleaseID: "r1", TargetKey: "d:e:r", JobAgentID: "puller", Status: release.JobPending,
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	require.NoError(t, other.InTx(t.Context(), func(ctx context.Context) error {
		_, created, err := producer.JobCreate(ctx, ports.JobCreateParams{Job: job, IdempotencyKey: "k1"})
		require.NoError(t, err)
		require.True(t, created)
		// Nothing is sent before the commit: wait as long as a
		// notification takes to arrive after it (below), and more.
		select {
		case <-wake:
			t.Fatal("a wake-up before the job's transaction committed")
		case <-time.After(500 * time.Millisecond):
		}
		return nil
	}))
	awaitWake(t, wake, "a pending job was committed by another process's store")

	cancel()
	require.Eventually(t, func() bool {
		rs.takers.mu.Lock()
		defer rs.takers.mu.Unlock()
		return len(rs.takers.subs) == 0
	}, 5*time.Second, time.Millisecond, "a subscription whose context ended leaves")
}
