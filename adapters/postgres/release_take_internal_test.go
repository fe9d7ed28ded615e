package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestJobTakeNotifyAcrossSessions: a pending job created by another
// process's store (another pool) is announced on the jobs channel only
// once the creating transaction has committed, and wakes a JobTakeNotify
// subscriber; a subscription leaves the listener when its context ends.
// Other tests notify the same channel of the same database, so the
// announcement is told from theirs by its payload, the agent id, unique to
// this test's schema.
func TestJobTakeNotifyAcrossSessions(t *testing.T) {
	t.Parallel()
	dsn, schema := pgtest.Schema(t)
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
	listener, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = listener.Close(context.Background()) })
	_, err = listener.Exec(t.Context(), "LISTEN "+jobsChannel)
	require.NoError(t, err)
	agent := "puller-" + schema
	// announced waits up to d for this test's announcement.
	announced := func(d time.Duration) bool {
		deadline := time.Now().Add(d)
		for {
			wctx, wcancel := context.WithDeadline(t.Context(), deadline)
			n, err := listener.WaitForNotification(wctx)
			wcancel()
			if err != nil {
				return false
			}
			if n.Payload == agent {
				return true
			}
		}
	}

	other := open()
	producer := NewReleaseStore(other, ports.SystemClock)
	t.Cleanup(producer.Close)
	_, err = other.pool.Exec(t.Context(), `INSERT INTO release_releases (id, target_key, version_id, doc, created_at)
		VALUES ('r1', 'd:e:r', 'v', '{}', now())`)
	require.NoError(t, err)
	job := release.Job{ID: "j1", ReleaseID: "r1", TargetKey: "d:e:r", JobAgentID: agent, Status: release.JobPending,
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	drain(wake) // the wake-up of the first LISTEN, and any other test's
	require.NoError(t, other.InTx(t.Context(), func(ctx context.Context) error {
		_, created, err := producer.JobCreate(ctx, ports.JobCreateParams{Job: job, IdempotencyKey: "k1"})
		require.NoError(t, err)
		require.True(t, created)
		// Nothing is sent before the commit: wait as long as the
		// announcement may take after it (below), and more.
		require.False(t, announced(500*time.Millisecond), "the job was announced before its transaction committed")
		return nil
	}))
	require.True(t, announced(5*time.Second), "the job was not announced after its transaction committed")
	awaitWake(t, wake, "a pending job was committed by another process's store")

	cancel()
	require.Eventually(t, func() bool {
		rs.takers.mu.Lock()
		defer rs.takers.mu.Unlock()
		return len(rs.takers.subs) == 0
	}, 5*time.Second, time.Millisecond, "a subscription whose context ended leaves")
}
