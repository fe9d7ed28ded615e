package porttest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
)

// Queue is the conformance suite of ports.Queue. newQueue is called once per
// subtest with that subtest's fake clock and must return an empty queue that
// reads "now" only from it; subtests run in parallel. Queues that implement
// ports.WorkNotifier also get their wake-ups checked.
func Queue(t *testing.T, newQueue func(t *testing.T, clock ports.Clock) ports.Queue) {
	t.Helper()
	setup := func(t *testing.T) *queueFixture {
		t.Helper()
		t.Parallel()
		clock := NewFakeClock(queueEpoch)
		return &queueFixture{t: t, ctx: t.Context(), clock: clock, q: newQueue(t, clock)}
	}
	// Enqueue and coalescing.
	t.Run("EnqueueCreatesPending", func(t *testing.T) { queueEnqueueCreates(setup(t)) })
	t.Run("EnqueueRejectsInvalid", func(t *testing.T) { queueEnqueueInvalid(setup(t)) })
	t.Run("EnqueueCoalesces", func(t *testing.T) { queueEnqueueCoalesces(setup(t)) })
	t.Run("GetMissingNotFound", func(t *testing.T) { queueGetMissing(setup(t)) })
	// Leasing.
	t.Run("LeaseRejectsInvalid", func(t *testing.T) { queueLeaseInvalid(setup(t)) })
	t.Run("LeaseOnlyDue", func(t *testing.T) { queueLeaseOnlyDue(setup(t)) })
	t.Run("LeaseOrder", func(t *testing.T) { queueLeaseOrder(setup(t)) })
	t.Run("LeaseKinds", func(t *testing.T) { queueLeaseKinds(setup(t)) })
	t.Run("LeaseFairBetweenWorkspaces", func(t *testing.T) { queueLeaseFair(setup(t)) })
	t.Run("LeaseFieldsAndExclusion", func(t *testing.T) { queueLeaseFields(setup(t)) })
	t.Run("LeaseCarriesTraceparent", func(t *testing.T) { queueLeaseTraceparent(setup(t)) })
	t.Run("LeaseCarriesPriority", func(t *testing.T) { queueLeasePriority(setup(t)) })
	t.Run("HeartbeatExtends", func(t *testing.T) { queueHeartbeat(setup(t)) })
	t.Run("ExpiredLeaseReclaimed", func(t *testing.T) { queueExpiredReclaimed(setup(t)) })
	t.Run("ExpiredLeaseHolderMayFinish", func(t *testing.T) { queueExpiredHolderFinishes(setup(t)) })
	t.Run("TokensOnlyGrow", func(t *testing.T) { queueTokensGrow(setup(t)) })
	// Completion.
	t.Run("AckDeletes", func(t *testing.T) { queueAckDeletes(setup(t)) })
	t.Run("AckBatchResults", func(t *testing.T) { queueAckBatch(setup(t)) })
	t.Run("AckRequeueAt", func(t *testing.T) { queueAckRequeueAt(setup(t)) })
	t.Run("EnqueueWhileLeasedRequeues", func(t *testing.T) { queueEnqueueWhileLeased(setup(t)) })
	t.Run("AckRequeuedMerges", func(t *testing.T) { queueAckRequeuedMerges(setup(t)) })
	// Failure and the dead state.
	t.Run("RetryReschedules", func(t *testing.T) { queueRetryReschedules(setup(t)) })
	t.Run("RetryExhaustsToDead", func(t *testing.T) { queueRetryExhausts(setup(t)) })
	t.Run("DefaultMaxAttempts", func(t *testing.T) { queueDefaultMaxAttempts(setup(t)) })
	t.Run("RetryTerminalToDead", func(t *testing.T) { queueRetryTerminal(setup(t)) })
	t.Run("RetryRequeuedStaysPending", func(t *testing.T) { queueRetryRequeued(setup(t)) })
	t.Run("ExpiredAtMaxDeadLetters", func(t *testing.T) { queueExpiredAtMax(setup(t)) })
	t.Run("EnqueueRevivesDead", func(t *testing.T) { queueEnqueueRevivesDead(setup(t)) })
	t.Run("Redrive", func(t *testing.T) { queueRedrive(setup(t)) })
	t.Run("KindStats", func(t *testing.T) { queueKindStats(setup(t)) })
	t.Run("DeadListOrderFilterLimit", func(t *testing.T) { queueDeadList(setup(t)) })
	t.Run("Stats", func(t *testing.T) { queueStats(setup(t)) })
	t.Run("Notify", func(t *testing.T) { queueNotify(setup(t)) })
	// Concurrency and properties.
	t.Run("ConcurrentLeasesAreExclusive", func(t *testing.T) { queueConcurrentExclusive(setup(t)) })
	t.Run("ConcurrentEnqueueWhileLeased", func(t *testing.T) { queueConcurrentEnqueue(setup(t)) })
	t.Run("ConcurrentExpiryIsFenced", func(t *testing.T) { queueConcurrentFencing(setup(t)) })
	t.Run("InvariantsProperty", func(t *testing.T) { queueProperty(setup(t)) })
}

// queueEpoch is where every subtest's clock starts: whole seconds in UTC, so
// every adapter stores it exactly.
var queueEpoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// The kinds the suite uses, and the default lease length.
const (
	kindA    = "alpha"
	kindB    = "beta"
	leaseFor = 30 * time.Second
)

// queueFixture is one subtest's queue, clock and context.
type queueFixture struct {
	t     *testing.T
	ctx   context.Context
	clock *FakeClock
	q     ports.Queue
}

// wk is a key of kind alpha.
func wk(id string) ports.WorkKey { return wkOf(kindA, id) }

// wkOf is a key of the given kind.
func wkOf(kind, id string) ports.WorkKey {
	return ports.WorkKey{Kind: kind, ScopeType: "target", ScopeID: id}
}

// now is the fixture clock's time.
func (f *queueFixture) now() time.Time { return f.clock.Now() }

// enqueue enqueues and requires success.
func (f *queueFixture) enqueue(ps ...ports.EnqueueParams) {
	f.t.Helper()
	require.NoError(f.t, f.q.WorkEnqueue(f.ctx, ps...))
}

// enqueueKeys enqueues each key with default params.
func (f *queueFixture) enqueueKeys(keys ...ports.WorkKey) {
	f.t.Helper()
	ps := make([]ports.EnqueueParams, len(keys))
	for i, k := range keys {
		ps[i] = ports.EnqueueParams{Key: k}
	}
	f.enqueue(ps...)
}

// lease claims up to n items of kinds (alpha when none) for leaseFor.
func (f *queueFixture) lease(n int, kinds ...string) []ports.Lease {
	f.t.Helper()
	if len(kinds) == 0 {
		kinds = []string{kindA}
	}
	ls, err := f.q.WorkLease(f.ctx, ports.LeaseParams{Kinds: kinds, Limit: n, Duration: leaseFor, Owner: "worker"})
	require.NoError(f.t, err)
	return ls
}

// leaseOne claims exactly one alpha item and requires it to be key.
func (f *queueFixture) leaseOne(key ports.WorkKey) ports.Lease {
	f.t.Helper()
	ls := f.lease(10)
	require.Len(f.t, ls, 1, "want exactly %s leased", key)
	require.Equal(f.t, key, ls[0].Key)
	return ls[0]
}

// leaseNone requires that nothing of kind alpha can be leased.
func (f *queueFixture) leaseNone(why string) {
	f.t.Helper()
	require.Empty(f.t, f.lease(10), why)
}

// get returns the stored item.
func (f *queueFixture) get(key ports.WorkKey) ports.WorkItem {
	f.t.Helper()
	it, err := f.q.WorkGet(f.ctx, key)
	require.NoError(f.t, err, "get %s", key)
	require.Equal(f.t, key, it.Key)
	return it
}

// gone requires the item not to exist.
func (f *queueFixture) gone(key ports.WorkKey) {
	f.t.Helper()
	_, err := f.q.WorkGet(f.ctx, key)
	require.ErrorIs(f.t, err, ports.ErrNotFound, "%s should be gone", key)
}

// ack acks and returns the per-item results.
func (f *queueFixture) ack(acks ...ports.AckParams) []error {
	f.t.Helper()
	res, err := f.q.WorkAck(f.ctx, acks...)
	require.NoError(f.t, err)
	require.Len(f.t, res, len(acks), "one result per ack")
	return res
}

// ackOK acks one lease and requires success.
func (f *queueFixture) ackOK(a ports.AckParams) {
	f.t.Helper()
	require.NoError(f.t, f.ack(a)[0], "ack %s", a.Lease.Key)
}

// heartbeat renews refs for d and returns the per-ref results.
func (f *queueFixture) heartbeat(d time.Duration, refs ...ports.LeaseRef) []error {
	f.t.Helper()
	res, err := f.q.WorkHeartbeat(f.ctx, d, refs...)
	require.NoError(f.t, err)
	require.Len(f.t, res, len(refs), "one result per ref")
	return res
}

// retryOK retries and requires success.
func (f *queueFixture) retryOK(p ports.RetryParams) {
	f.t.Helper()
	require.NoError(f.t, f.q.WorkRetry(f.ctx, p), "retry %s", p.Lease.Key)
}

// deadKeys lists the dead keys of kind ("" for all) in the order returned.
func (f *queueFixture) deadKeys(kind string, limit int) []ports.WorkKey {
	f.t.Helper()
	items, err := f.q.WorkDeadList(f.ctx, ports.DeadListParams{Kind: kind, Limit: limit})
	require.NoError(f.t, err)
	keys := make([]ports.WorkKey, len(items))
	for i, it := range items {
		require.Equal(f.t, ports.WorkDead, it.State, "dead list holds only dead items")
		keys[i] = it.Key
	}
	return keys
}

// stats returns the counts by state.
func (f *queueFixture) stats() map[ports.WorkState]int {
	f.t.Helper()
	s, err := f.q.WorkStats(f.ctx)
	require.NoError(f.t, err)
	return s
}

// requireLost requires err to be ErrLeaseLost.
func requireLost(t require.TestingT, err error, what string) {
	require.ErrorIs(t, err, ports.ErrLeaseLost, what)
}

// requireTime requires two instants to be equal, whatever their location.
func requireTime(t require.TestingT, want, got time.Time, what string) {
	require.True(t, want.Equal(got), "%s: want %s, got %s", what, want, got)
}
