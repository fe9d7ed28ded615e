package porttest

import (
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
)

// queueKindStats: WorkKindStats counts by kind and state, sorted, and gives
// the pending items' oldest due not-before; items not due yet count but do
// not age, and the counts add up to WorkStats.
func queueKindStats(f *queueFixture) {
	t := f.t
	got, err := f.q.WorkKindStats(f.ctx)
	require.NoError(t, err)
	require.Empty(t, got, "an empty queue has no entries")

	start := f.now()
	f.enqueueKeys(wk("a1"), wk("a2"), wkOf(kindB, "b1"))
	f.clock.Advance(time.Minute)
	f.enqueue(ports.EnqueueParams{Key: wk("a3")}, ports.EnqueueParams{Key: wkOf(kindB, "later"), NotBefore: f.now().Add(time.Hour)})
	ls := f.lease(2, kindA)
	require.Len(t, ls, 2)
	require.Equal(t, []ports.WorkKey{wk("a1"), wk("a2")}, []ports.WorkKey{ls[0].Key, ls[1].Key}, "the due items, oldest first")
	f.retryOK(ports.RetryParams{Lease: ls[0].Ref(), Err: "bad", Terminal: true})
	got, err = f.q.WorkKindStats(f.ctx)
	require.NoError(t, err)
	want := []ports.KindStats{
		{Kind: kindA, State: ports.WorkDead, Count: 1},
		{Kind: kindA, State: ports.WorkLeased, Count: 1},
		{Kind: kindA, State: ports.WorkPending, Count: 1, OldestDue: f.now()},
		{Kind: kindB, State: ports.WorkPending, Count: 2, OldestDue: start},
	}
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].Kind, got[i].Kind, "entry %d", i)
		require.Equal(t, want[i].State, got[i].State, "entry %d", i)
		require.Equal(t, want[i].Count, got[i].Count, "entry %d", i)
		requireTime(t, want[i].OldestDue, got[i].OldestDue, "oldest due of "+want[i].Kind+" "+string(want[i].State))
	}
	total := map[ports.WorkState]int{}
	for _, s := range got {
		total[s.State] += s.Count
	}
	stats := f.stats()
	for state, n := range stats {
		require.Equal(t, n, total[state], "kind stats add up to WorkStats for %s", state)
	}
}
