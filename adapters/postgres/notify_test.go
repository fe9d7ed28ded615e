package postgres

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
)

// setupNotify opens a migrated schema and returns a queue whose listener
// reports each LISTEN, plus a producer queue on its own pool.
func setupNotify(t *testing.T) (q, producer *Queue, listening chan uint32) {
	t.Helper()
	dsn, _ := pgtest.Schema(t)
	open := func() *DB {
		db, err := Open(t.Context(), dsn)
		require.NoError(t, err)
		t.Cleanup(db.Close)
		return db
	}
	db := open()
	require.NoError(t, db.MigrateUp(t.Context()))
	q = NewQueue(db, ports.SystemClock)
	listening = make(chan uint32, 4)
	q.notify.onListen = listening
	t.Cleanup(q.Close)
	producer = NewQueue(open(), ports.SystemClock)
	return q, producer, listening
}

// awaitPID waits for the listener to report a LISTEN.
func awaitPID(t *testing.T, listening <-chan uint32) uint32 {
	t.Helper()
	select {
	case pid := <-listening:
		return pid
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not LISTEN")
		return 0
	}
}

// awaitWake waits for a wake-up on ch.
func awaitWake(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("no wake-up after %s", what)
	}
}

// drain empties ch.
func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func TestNotifyDeliversOtherConnectionsEnqueue(t *testing.T) {
	t.Parallel()
	q, producer, listening := setupNotify(t)
	wake := q.WorkNotify()
	awaitPID(t, listening)
	awaitWake(t, wake, "connecting") // the wake-up that covers the time nobody listened
	drain(wake)
	require.NoError(t, producer.WorkEnqueue(t.Context(), ports.EnqueueParams{Key: ports.WorkKey{Kind: "n", ScopeType: "t", ScopeID: "1"}}))
	awaitWake(t, wake, "an enqueue committed by another pool")
}

// TestNotifyReconnects: when the listening session is killed, the listener
// wakes its subscribers (they poll meanwhile), listens again on a new
// session, and delivers notifications from there on.
func TestNotifyReconnects(t *testing.T) {
	t.Parallel()
	q, producer, listening := setupNotify(t)
	wake := q.WorkNotify()
	first := awaitPID(t, listening)
	drain(wake)
	var killed bool
	require.NoError(t, producer.db.pool.QueryRow(t.Context(), "SELECT pg_terminate_backend($1)", int32(first)).Scan(&killed))
	require.True(t, killed)
	awaitWake(t, wake, "the listening session died")
	second := awaitPID(t, listening)
	require.NotEqual(t, first, second, "a new session listens")
	drain(wake)
	require.NoError(t, producer.WorkEnqueue(t.Context(), ports.EnqueueParams{Key: ports.WorkKey{Kind: "n", ScopeType: "t", ScopeID: "2"}}))
	awaitWake(t, wake, "an enqueue after the reconnect")
}

// TestNotifyWakesWhileDisconnected: with no server to listen on, every
// subscriber is woken at each retry, so workers fall back to polling.
func TestNotifyWakesWhileDisconnected(t *testing.T) {
	t.Parallel()
	cfg, err := pgx.ParseConfig("postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	require.NoError(t, err)
	n := newNotifier(cfg, notifyChannel)
	n.backoffMin, n.backoffMax = 5*time.Millisecond, 20*time.Millisecond
	t.Cleanup(n.close)
	a, b := n.subscribe(), n.subscribe()
	for range 3 {
		awaitWake(t, a, "a failed connect (first subscriber)")
		awaitWake(t, b, "a failed connect (second subscriber)")
	}
	require.Equal(t, 1, cap(a), "wake-ups never pile up beyond one")

	// Closed, it stops (close waits for the goroutine), and a later
	// subscription is not registered for wake-ups.
	n.close()
	late := n.subscribe()
	require.NotNil(t, late)
	n.mu.Lock()
	defer n.mu.Unlock()
	require.Len(t, n.subs, 2, "a closed notifier takes no subscribers")
}

// TestNotifyCloseWithoutSubscribers: closing a queue that never listened
// returns at once.
func TestNotifyCloseWithoutSubscribers(t *testing.T) {
	t.Parallel()
	n := newNotifier(&pgx.ConnConfig{}, notifyChannel)
	done := make(chan struct{})
	go func() { n.close(); n.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("close blocked")
	}
}
