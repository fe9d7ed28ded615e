package porttest

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/reconcilerhq/reconciler/ports"
)

// queueProperty drives the queue with random sequences of every operation
// and checks the port's invariants after each step: a live lease is never
// shared, only the newest token acts, nothing is deleted but by an ack with
// nothing pending, an enqueue during a lease is never lost, failures end
// visibly dead, and leasing leaves nothing due behind when it has room.
// Every check gets its own kind, so one queue serves them all.
func queueProperty(f *queueFixture) {
	n := 0
	rapid.Check(f.t, func(rt *rapid.T) {
		n++
		m := &queueModel{
			f:        f,
			kind:     fmt.Sprintf("prop-%d", n),
			latest:   map[ports.WorkKey]int64{},
			ended:    map[int64]bool{},
			expiry:   map[int64]time.Time{},
			enqueues: map[ports.WorkKey]int{},
			covered:  map[int64]int{},
			enqueued: map[ports.WorkKey]bool{},
			acked:    map[ports.WorkKey]bool{},
		}
		for i := range 4 {
			m.keys = append(m.keys, wkOf(m.kind, fmt.Sprint(i)))
		}
		rt.Repeat(map[string]func(*rapid.T){
			"enqueue":   m.enqueue,
			"lease":     m.lease,
			"heartbeat": m.heartbeat,
			"ack":       m.ack,
			"retry":     m.retry,
			"redrive":   m.redrive,
			"advance":   m.advance,
			"":          m.check,
		})
	})
}

// queueModel is what the property remembers about the leases it was given;
// it does not predict the queue, it only states what must hold.
type queueModel struct {
	f      *queueFixture
	kind   string
	keys   []ports.WorkKey
	leases []ports.Lease
	// latest is the newest token handed out per key; ended marks tokens
	// whose ack or retry succeeded; expiry is each token's last known expiry.
	latest map[ports.WorkKey]int64
	ended  map[int64]bool
	expiry map[int64]time.Time
	// enqueues counts enqueues per key; covered is that count when a token
	// was issued, so enqueues > covered means one arrived during the lease.
	enqueues map[ports.WorkKey]int
	covered  map[int64]int
	// enqueued marks keys ever enqueued; acked marks keys whose last event
	// was an ack that deleted them.
	enqueued map[ports.WorkKey]bool
	acked    map[ports.WorkKey]bool
}

// offsets are the not-before and requeue delays the property draws from.
var offsets = []time.Duration{0, 5 * time.Second, 30 * time.Second}

// get returns the item and whether it exists.
func (m *queueModel) get(t *rapid.T, k ports.WorkKey) (ports.WorkItem, bool) {
	it, err := m.f.q.WorkGet(m.f.ctx, k)
	if errors.Is(err, ports.ErrNotFound) {
		return ports.WorkItem{}, false
	}
	require.NoError(t, err)
	return it, true
}

// holds reports whether lease l should still act: its item is leased and
// nobody got a newer token.
func (m *queueModel) holds(t *rapid.T, l ports.Lease) (ports.WorkItem, bool) {
	it, ok := m.get(t, l.Key)
	return it, ok && it.State == ports.WorkLeased && m.latest[l.Key] == l.Token && !m.ended[l.Token]
}

// unchanged requires that a refused call left the item as it was.
func (m *queueModel) unchanged(t *rapid.T, k ports.WorkKey, before ports.WorkItem, existed bool) {
	after, ok := m.get(t, k)
	require.Equal(t, existed, ok)
	if ok {
		require.Equal(t, before.State, after.State, "a refused call changes nothing")
		require.Equal(t, before.Attempts, after.Attempts, "a refused call changes nothing")
		require.True(t, before.LeaseExpiresAt.Equal(after.LeaseExpiresAt), "a refused call changes nothing")
	}
}

func (m *queueModel) enqueue(t *rapid.T) {
	k := rapid.SampledFrom(m.keys).Draw(t, "key")
	p := ports.EnqueueParams{
		Key:         k,
		Priority:    rapid.IntRange(0, 3).Draw(t, "priority"),
		MaxAttempts: rapid.IntRange(0, 3).Draw(t, "max_attempts"),
	}
	if d := rapid.SampledFrom(offsets).Draw(t, "not_before"); d > 0 {
		p.NotBefore = m.f.now().Add(d)
	}
	before, existed := m.get(t, k)
	require.NoError(t, m.f.q.WorkEnqueue(m.f.ctx, p))
	m.enqueues[k]++
	m.enqueued[k] = true
	m.acked[k] = false
	after, ok := m.get(t, k)
	require.True(t, ok, "an enqueued item exists")
	require.Equal(t, max(before.Priority, p.Priority), after.Priority, "highest priority wins")
	switch {
	case !existed || before.State == ports.WorkDead:
		require.Equal(t, ports.WorkPending, after.State, "new or revived")
		require.Zero(t, after.Attempts)
	case before.State == ports.WorkLeased:
		require.Equal(t, ports.WorkLeased, after.State, "the lease is not disturbed")
		require.True(t, after.Requeued)
		require.True(t, before.LeaseExpiresAt.Equal(after.LeaseExpiresAt))
	default:
		require.Equal(t, ports.WorkPending, after.State)
		require.Equal(t, before.Attempts, after.Attempts)
		require.False(t, after.NotBefore.After(before.NotBefore), "earliest not-before wins")
	}
}

func (m *queueModel) lease(t *rapid.T) {
	limit := rapid.IntRange(1, 3).Draw(t, "limit")
	d := rapid.SampledFrom([]time.Duration{10 * time.Second, 30 * time.Second}).Draw(t, "duration")
	now := m.f.now()
	before := map[ports.WorkKey]ports.WorkItem{}
	for _, k := range m.keys {
		if it, ok := m.get(t, k); ok {
			before[k] = it
		}
	}
	ls, err := m.f.q.WorkLease(m.f.ctx, ports.LeaseParams{Kinds: []string{m.kind}, Limit: limit, Duration: d, Owner: "prop"})
	require.NoError(t, err)
	require.LessOrEqual(t, len(ls), limit)
	got := map[ports.WorkKey]bool{}
	for _, l := range ls {
		require.False(t, got[l.Key], "%s leased twice in one call", l.Key)
		got[l.Key] = true
		b, ok := before[l.Key]
		require.True(t, ok, "%s did not exist", l.Key)
		due := (b.State == ports.WorkPending && !b.NotBefore.After(now)) ||
			(b.State == ports.WorkLeased && !b.LeaseExpiresAt.After(now))
		require.True(t, due, "%s leased while not due: %+v", l.Key, b)
		if prev, had := m.latest[l.Key]; had {
			require.True(t, m.ended[prev] || !m.expiry[prev].After(now), "%s leased while token %d was live", l.Key, prev)
			require.Greater(t, l.Token, prev, "tokens only grow")
		}
		require.True(t, now.Add(d).Equal(l.ExpiresAt))
		it, _ := m.get(t, l.Key)
		require.Equal(t, ports.WorkLeased, it.State)
		require.Equal(t, l.Attempt, it.Attempts)
		require.LessOrEqual(t, l.Attempt, it.MaxAttempts)
		require.True(t, l.ExpiresAt.Equal(it.LeaseExpiresAt))
		m.latest[l.Key] = l.Token
		m.expiry[l.Token] = l.ExpiresAt
		m.covered[l.Token] = m.enqueues[l.Key]
		m.leases = append(m.leases, l)
	}
	if len(ls) < limit {
		// With room to spare, nothing due may be left behind.
		for _, k := range m.keys {
			it, ok := m.get(t, k)
			if !ok {
				continue
			}
			switch it.State {
			case ports.WorkPending:
				require.True(t, it.NotBefore.After(now), "%s left pending and due", k)
			case ports.WorkLeased:
				require.True(t, it.LeaseExpiresAt.After(now), "%s left with an expired lease", k)
			}
		}
	}
}

// pick draws one of the leases handed out so far.
func (m *queueModel) pick(t *rapid.T) ports.Lease {
	if len(m.leases) == 0 {
		t.Skip("no lease yet")
	}
	return rapid.SampledFrom(m.leases).Draw(t, "lease")
}

func (m *queueModel) heartbeat(t *rapid.T) {
	l := m.pick(t)
	d := rapid.SampledFrom([]time.Duration{time.Second, 30 * time.Second}).Draw(t, "duration")
	before, live := m.holds(t, l)
	res, err := m.f.q.WorkHeartbeat(m.f.ctx, d, l.Ref())
	require.NoError(t, err)
	require.Len(t, res, 1)
	if !live {
		require.ErrorIs(t, res[0], ports.ErrLeaseLost)
		m.unchanged(t, l.Key, before, before.Key == l.Key)
		return
	}
	require.NoError(t, res[0])
	exp := m.f.now().Add(d)
	m.expiry[l.Token] = exp
	it, _ := m.get(t, l.Key)
	require.True(t, exp.Equal(it.LeaseExpiresAt))
}

func (m *queueModel) ack(t *rapid.T) {
	l := m.pick(t)
	a := ports.AckParams{Lease: l.Ref()}
	if rapid.Bool().Draw(t, "requeue") {
		a.RequeueAt = m.f.now().Add(rapid.SampledFrom(offsets).Draw(t, "requeue_at"))
	}
	before, live := m.holds(t, l)
	res, err := m.f.q.WorkAck(m.f.ctx, a)
	require.NoError(t, err)
	require.Len(t, res, 1)
	if !live {
		require.ErrorIs(t, res[0], ports.ErrLeaseLost)
		m.unchanged(t, l.Key, before, before.Key == l.Key)
		return
	}
	require.NoError(t, res[0])
	m.ended[l.Token] = true
	enqueuedDuring := m.enqueues[l.Key] > m.covered[l.Token]
	after, ok := m.get(t, l.Key)
	if !a.RequeueAt.IsZero() || enqueuedDuring {
		require.True(t, ok, "an ack that requeues or follows an enqueue keeps the item")
		require.Equal(t, ports.WorkPending, after.State)
		require.Zero(t, after.Attempts)
		require.Empty(t, after.LastError)
		return
	}
	require.False(t, ok, "an ack with nothing pending deletes the item")
	m.acked[l.Key] = true
}

func (m *queueModel) retry(t *rapid.T) {
	l := m.pick(t)
	p := ports.RetryParams{Lease: l.Ref(), Err: "boom", Terminal: rapid.Bool().Draw(t, "terminal")}
	if d := rapid.SampledFrom(offsets).Draw(t, "not_before"); d > 0 {
		p.NotBefore = m.f.now().Add(d)
	}
	before, live := m.holds(t, l)
	err := m.f.q.WorkRetry(m.f.ctx, p)
	if !live {
		require.ErrorIs(t, err, ports.ErrLeaseLost)
		m.unchanged(t, l.Key, before, before.Key == l.Key)
		return
	}
	require.NoError(t, err)
	m.ended[l.Token] = true
	after, ok := m.get(t, l.Key)
	require.True(t, ok, "a retry never deletes")
	require.Equal(t, "boom", after.LastError)
	exhausted := p.Terminal || before.Attempts >= before.MaxAttempts
	switch {
	case before.Requeued:
		require.Equal(t, ports.WorkPending, after.State, "an enqueue during the lease keeps it alive")
		if exhausted {
			require.Zero(t, after.Attempts, "with a fresh budget")
		} else {
			require.Equal(t, before.Attempts, after.Attempts)
		}
	case exhausted:
		require.Equal(t, ports.WorkDead, after.State)
	default:
		require.Equal(t, ports.WorkPending, after.State)
		require.Equal(t, before.Attempts, after.Attempts)
	}
}

func (m *queueModel) redrive(t *rapid.T) {
	k := rapid.SampledFrom(m.keys).Draw(t, "key")
	before, ok := m.get(t, k)
	err := m.f.q.WorkRedrive(m.f.ctx, k)
	switch {
	case !ok:
		require.ErrorIs(t, err, ports.ErrNotFound)
	case before.State != ports.WorkDead:
		require.ErrorIs(t, err, ports.ErrConflict)
		m.unchanged(t, k, before, true)
	default:
		require.NoError(t, err)
		after, _ := m.get(t, k)
		require.Equal(t, ports.WorkPending, after.State)
		require.Zero(t, after.Attempts)
	}
}

func (m *queueModel) advance(t *rapid.T) {
	m.f.clock.Advance(rapid.SampledFrom([]time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 31 * time.Second}).Draw(t, "advance"))
}

// check states what holds after every step.
func (m *queueModel) check(t *rapid.T) {
	dead, err := m.f.q.WorkDeadList(m.f.ctx, ports.DeadListParams{Kind: m.kind})
	require.NoError(t, err)
	deadKeys := make([]ports.WorkKey, len(dead))
	for i, it := range dead {
		deadKeys[i] = it.Key
	}
	nDead := 0
	for _, k := range m.keys {
		it, ok := m.get(t, k)
		if !ok {
			require.True(t, !m.enqueued[k] || m.acked[k], "%s vanished without an ack", k)
			require.NotContains(t, deadKeys, k)
			continue
		}
		require.LessOrEqual(t, it.Attempts, it.MaxAttempts, "%s", k)
		require.Equal(t, it.State == ports.WorkDead, slices.Contains(deadKeys, k), "%s is listed dead iff it is dead", k)
		switch it.State {
		case ports.WorkDead:
			nDead++
			require.False(t, it.Requeued)
		case ports.WorkLeased:
			tok := m.latest[k]
			require.False(t, it.LeaseExpiresAt.IsZero())
			require.Equal(t, m.enqueues[k] > m.covered[tok], it.Requeued, "%s is requeued iff enqueued during its lease", k)
		case ports.WorkPending:
			require.False(t, it.Requeued)
			require.Empty(t, it.LeaseOwner)
		default:
			require.Failf(t, "unknown state", "%s: %q", k, it.State)
		}
	}
	require.Len(t, dead, nDead)
}
