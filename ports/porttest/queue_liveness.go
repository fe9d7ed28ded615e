package porttest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
)

// QueueLiveness is the conformance suite of a ports.Queue judging leases
// by their owners' ports.Liveness rows: "lost" means the owner is gone.
// newPair returns an empty queue reading "now" only from clock and the
// liveness rows it judges owners by; subtests run in parallel.
func QueueLiveness(t *testing.T, newPair func(t *testing.T, clock ports.Clock) (ports.Queue, ports.Liveness)) {
	t.Helper()
	setup := func(t *testing.T) (*queueFixture, ports.Liveness) {
		t.Helper()
		t.Parallel()
		clock := NewFakeClock(queueEpoch)
		q, l := newPair(t, clock)
		return &queueFixture{t: t, ctx: t.Context(), clock: clock, q: q}, l
	}
	t.Run("LiveOwnerKeepsExpiredLease", func(t *testing.T) { queueLiveOwnerKeeps(setup(t)) })
	t.Run("LapsedOwnerReclaimedAtOnce", func(t *testing.T) { queueLapsedOwnerReclaimed(setup(t)) })
	t.Run("ReclaimedSaysTakenOver", func(t *testing.T) { queueReclaimedFlag(setup(t)) })
}

// leaseAs leases up to 10 alpha items as owner.
func (f *queueFixture) leaseAs(owner string) []ports.Lease {
	f.t.Helper()
	ls, err := f.q.WorkLease(f.ctx, ports.LeaseParams{Kinds: []string{kindA}, Limit: 10, Duration: leaseFor, Owner: owner})
	require.NoError(f.t, err)
	return ls
}

// queueLiveOwnerKeeps: an expired lease whose owner's liveness row is
// fresh is neither taken over nor dead-lettered (even at its attempt
// limit), and its holder still renews and completes it.
func queueLiveOwnerKeeps(f *queueFixture, l ports.Liveness) {
	t := f.t
	f.enqueue(ports.EnqueueParams{Key: wk("a"), MaxAttempts: 1})
	f.enqueueKeys(wk("b"))
	held := f.lease(10)
	require.Len(t, held, 2)
	require.NoError(t, l.LivenessBeat(f.ctx, "worker", f.now().Add(3*leaseFor)))
	f.clock.Advance(2 * leaseFor)
	require.Empty(t, f.leaseAs("second"), "the owner is alive: its expired leases are not lost")
	for _, h := range held {
		it := f.get(h.Key)
		require.Equal(t, ports.WorkLeased, it.State, "%s: not dead-lettered", h.Key)
		require.Equal(t, "worker", it.LeaseOwner)
	}
	for i, err := range f.heartbeat(leaseFor, held[0].Ref(), held[1].Ref()) {
		require.NoError(t, err, "the live holder renews its late lease %d", i)
	}
	f.ackOK(ports.AckParams{Lease: held[0].Ref()})
	f.ackOK(ports.AckParams{Lease: held[1].Ref()})
	f.gone(wk("a"))
	f.gone(wk("b"))
}

// queueLapsedOwnerReclaimed: the leases of an owner whose liveness row
// lapsed are taken over well before they run out, and the old holder's
// calls are fenced off.
func queueLapsedOwnerReclaimed(f *queueFixture, l ports.Liveness) {
	t := f.t
	f.enqueueKeys(wk("a"))
	require.NoError(t, l.LivenessBeat(f.ctx, "worker", f.now().Add(leaseFor/8)))
	old := f.leaseOne(wk("a"))
	f.clock.Advance(leaseFor / 3) // the row lapsed; the lease has two thirds left
	require.True(t, f.now().Before(old.ExpiresAt))
	ls := f.leaseAs("second")
	require.Len(t, ls, 1, "a lapsed owner's lease is reclaimed at once")
	require.True(t, ls[0].Reclaimed)
	require.Greater(t, ls[0].Token, old.Token)
	requireLost(t, f.heartbeat(leaseFor, old.Ref())[0], "the lapsed holder cannot renew")
	requireLost(t, f.ack(ports.AckParams{Lease: old.Ref()})[0], "nor complete")
	f.ackOK(ports.AckParams{Lease: ls[0].Ref()})
	f.gone(wk("a"))
}

// queueReclaimedFlag: a fresh lease is not Reclaimed; one taking over an
// expired lease of an owner without a liveness row is.
func queueReclaimedFlag(f *queueFixture, _ ports.Liveness) {
	t := f.t
	f.enqueueKeys(wk("a"))
	first := f.leaseOne(wk("a"))
	require.False(t, first.Reclaimed)
	f.clock.Advance(leaseFor)
	ls := f.leaseAs("second")
	require.Len(t, ls, 1)
	require.True(t, ls[0].Reclaimed, "it took over an expired lease")
}
