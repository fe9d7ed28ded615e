package porttest

import (
	"fmt"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
)

// enqueueWorkspace enqueues n items of kind alpha in workspace ws, named
// ws-0000 on, each an event older than the next, starting at first.
func (f *queueFixture) enqueueWorkspace(ws string, n int, first time.Time) {
	f.t.Helper()
	ps := make([]ports.EnqueueParams, n)
	for i := range ps {
		ps[i] = ports.EnqueueParams{Key: wk(fmt.Sprintf("%s-%04d", ws, i)), Workspace: ws, EventTime: first.Add(time.Duration(i) * time.Millisecond)}
	}
	f.enqueue(ps...)
}

// leasedBy counts leases by the workspace of their item.
func (f *queueFixture) leasedBy(ls []ports.Lease) map[string]int {
	f.t.Helper()
	n := map[string]int{}
	for _, l := range ls {
		n[f.get(l.Key).Workspace]++
	}
	return n
}

// queueLeaseFair: a workspace with a huge backlog of older items does not
// take a lease's whole limit while another workspace has due items; each
// gets its fair share, and the rest goes in lease order once only one
// workspace has due items left.
func queueLeaseFair(f *queueFixture) {
	t := f.t
	old := f.now().Add(-time.Hour)
	f.enqueueWorkspace("big", 1000, old)
	f.enqueueWorkspace("small", 10, f.now().Add(-time.Minute))
	require.Equal(t, "small", f.get(wk("small-0003")).Workspace)

	require.Equal(t, map[string]int{"big": 10, "small": 10}, f.leasedBy(f.lease(20)), "a lease of 20 over two workspaces takes 10 of each")
	// Only big has due items now: the whole limit goes to it.
	require.Equal(t, map[string]int{"big": 20}, f.leasedBy(f.lease(20)))

	// Three workspaces, a limit that does not divide: at most ceil(7/3) = 3
	// each, the rest in lease order from whoever still has items.
	f.enqueueWorkspace("tiny", 1, f.now())
	f.enqueueWorkspace("small", 2, f.now()) // small-0000..1 again: coalesced while leased
	f.enqueueWorkspace("third", 5, f.now())
	got := f.leasedBy(f.lease(7))
	require.Equal(t, 7, got["big"]+got["tiny"]+got["third"])
	require.Equal(t, 1, got["tiny"])
	require.LessOrEqual(t, got["big"], 3)
	require.LessOrEqual(t, got["third"], 3)

	// The shared workspace (none named) is a workspace like any other.
	f.enqueueKeys(wk("shared"))
	require.Contains(t, f.leasedBy(f.lease(2)), "")
}
