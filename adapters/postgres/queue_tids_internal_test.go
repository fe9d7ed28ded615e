package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
)

// TestQueueAckByTupleId: the leases of a Queue leave their rows' tuple ids
// in its cache and their plain acks use them; a tuple id that names
// another leased row (a stale hint) neither deletes that row nor loses the
// ack, which falls back to the key; a renewed lease's hint is dropped.
func TestQueueAckByTupleId(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _ := openSchemaDB(t)
	require.NoError(t, db.MigrateUp(ctx))
	q := NewQueue(db, ports.SystemClock)
	t.Cleanup(q.Close)

	key := func(id string) ports.WorkKey { return ports.WorkKey{Kind: "k", ScopeType: "t", ScopeID: id} }
	require.NoError(t, q.WorkEnqueue(ctx, ports.EnqueueParams{Key: key("a")}, ports.EnqueueParams{Key: key("b")},
		ports.EnqueueParams{Key: key("c")}))
	ls, err := q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{"k"}, Limit: 3, Duration: time.Minute, Owner: "w"})
	require.NoError(t, err)
	require.Len(t, ls, 3)
	require.Equal(t, 3, q.tids.size(), "each lease leaves its row's tuple id")
	a, b, c := ls[0], ls[1], ls[2]
	require.Equal(t, []ports.WorkKey{key("a"), key("b"), key("c")}, []ports.WorkKey{a.Key, b.Key, c.Key})

	// a's hint now names b's row: acking a must not delete b.
	tidB, ok := q.tids.take(b.Ref())
	require.True(t, ok)
	q.tids.put(b.Token, b.Key, tidB)
	q.tids.put(a.Token, a.Key, tidB)
	res, err := q.WorkAck(ctx, ports.AckParams{Lease: a.Ref()})
	require.NoError(t, err)
	require.NoError(t, res[0], "a stale hint falls back to the key")
	_, err = q.WorkGet(ctx, a.Key)
	require.ErrorIs(t, err, ports.ErrNotFound, "a is deleted")
	it, err := q.WorkGet(ctx, b.Key)
	require.NoError(t, err)
	require.Equal(t, ports.WorkLeased, it.State, "b, whose tuple id a's hint named, is untouched")

	// A hint is used only for the lease's own key: a ref naming another
	// key with b's token, its hint in the cache, is lost, and b stays
	// leased.
	tidB, ok = q.tids.take(b.Ref())
	require.True(t, ok)
	q.tids.put(b.Token, b.Key, tidB)
	done, err := q.ackDelete(ctx, []ports.AckParams{{Lease: ports.LeaseRef{Key: key("zzz"), Token: b.Token}}}, false)
	require.NoError(t, err)
	require.False(t, done[0], "another key with b's token")
	it, err = q.WorkGet(ctx, b.Key)
	require.NoError(t, err)
	require.Equal(t, ports.WorkLeased, it.State)
	// ...while b's own plain ack by its hint deletes b: the statement by
	// tuple id did it (ackDelete runs no fallback).
	q.tids.put(b.Token, b.Key, tidB)
	done, err = q.ackDelete(ctx, []ports.AckParams{{Lease: b.Ref()}}, false)
	require.NoError(t, err)
	require.True(t, done[0], "b acked by its tuple id")
	_, err = q.WorkGet(ctx, b.Key)
	require.ErrorIs(t, err, ports.ErrNotFound)

	// A renewed lease moved its row: its hint is dropped, its ack still works.
	hb, err := q.WorkHeartbeat(ctx, time.Minute, c.Ref())
	require.NoError(t, err)
	require.NoError(t, hb[0])
	_, ok = q.tids.take(c.Ref())
	require.False(t, ok, "a heartbeat drops the lease's hint")
	res, err = q.WorkAck(ctx, ports.AckParams{Lease: c.Ref()})
	require.NoError(t, err)
	require.NoError(t, res[0])
	_, err = q.WorkGet(context.Background(), c.Key)
	require.ErrorIs(t, err, ports.ErrNotFound, "c is deleted")
	require.Zero(t, q.tids.size(), "every ack ends its hint")

	// A full cache starts over rather than grow.
	for i := range maxTids + 1 {
		q.tids.put(int64(i), b.Key, tidB)
	}
	require.Equal(t, 1, q.tids.size())
}
