package porttest

import (
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
)

func queueRetryReschedules(f *queueFixture) {
	t := f.t
	f.enqueueKeys(wk("a"))
	l := f.leaseOne(wk("a"))
	at := f.now().Add(time.Minute)
	f.retryOK(ports.RetryParams{Lease: l.Ref(), Err: "boom", NotBefore: at})
	it := f.get(wk("a"))
	require.Equal(t, ports.WorkPending, it.State)
	require.Equal(t, "boom", it.LastError)
	require.Equal(t, 1, it.Attempts, "the failed attempt is kept")
	requireTime(t, at, it.NotBefore, "retry not-before")
	require.Empty(t, it.LeaseOwner)
	requireLost(t, f.q.WorkRetry(f.ctx, ports.RetryParams{Lease: l.Ref(), Err: "again"}), "the lease ended with the retry")
	requireLost(t, f.ack(ports.AckParams{Lease: l.Ref()})[0], "the lease ended with the retry")

	f.leaseNone("not before the retry time")
	f.clock.Advance(time.Minute)
	l = f.leaseOne(wk("a"))
	require.Equal(t, 2, l.Attempt)
	require.Equal(t, "boom", f.get(wk("a")).LastError, "the error stays visible while retried")

	// A zero not-before retries at once.
	f.retryOK(ports.RetryParams{Lease: l.Ref(), Err: "boom again"})
	requireTime(t, f.now(), f.get(wk("a")).NotBefore, "zero not-before means now")
	require.Equal(t, 3, f.leaseOne(wk("a")).Attempt)
}

func queueRetryExhausts(f *queueFixture) {
	t := f.t
	f.enqueue(ports.EnqueueParams{Key: wk("a"), MaxAttempts: 3})
	var l ports.Lease
	for attempt := 1; attempt <= 3; attempt++ {
		require.Equal(t, ports.WorkPending, f.get(wk("a")).State, "attempt %d", attempt)
		l = f.leaseOne(wk("a"))
		require.Equal(t, attempt, l.Attempt)
		f.retryOK(ports.RetryParams{Lease: l.Ref(), Err: "boom"})
	}
	it := f.get(wk("a"))
	require.Equal(t, ports.WorkDead, it.State, "three failed attempts of three")
	require.Equal(t, 3, it.Attempts)
	require.Equal(t, "boom", it.LastError)
	require.Empty(t, it.LeaseOwner)
	f.leaseNone("a dead item is not leased")
	f.clock.Advance(24 * time.Hour)
	f.leaseNone("not even much later")
	require.Equal(t, []ports.WorkKey{wk("a")}, f.deadKeys("", 0))
	require.Equal(t, 1, f.stats()[ports.WorkDead])
	requireLost(t, f.q.WorkRetry(f.ctx, ports.RetryParams{Lease: l.Ref(), Err: "again"}), "a dead item's old lease")
	requireLost(t, f.ack(ports.AckParams{Lease: l.Ref()})[0], "a dead item's old lease")
	require.Equal(t, ports.WorkDead, f.get(wk("a")).State)
}

func queueDefaultMaxAttempts(f *queueFixture) {
	t := f.t
	f.enqueueKeys(wk("a"))
	for attempt := 1; attempt <= ports.DefaultMaxAttempts; attempt++ {
		require.Equal(t, ports.WorkPending, f.get(wk("a")).State, "attempt %d", attempt)
		l := f.leaseOne(wk("a"))
		require.Equal(t, attempt, l.Attempt)
		f.retryOK(ports.RetryParams{Lease: l.Ref(), Err: "boom"})
	}
	require.Equal(t, ports.WorkDead, f.get(wk("a")).State)
}

func queueRetryTerminal(f *queueFixture) {
	t := f.t
	f.enqueueKeys(wk("a"))
	l := f.leaseOne(wk("a"))
	f.retryOK(ports.RetryParams{Lease: l.Ref(), Err: "bad input", Terminal: true, NotBefore: f.now().Add(time.Minute)})
	it := f.get(wk("a"))
	require.Equal(t, ports.WorkDead, it.State, "terminal failures skip the remaining attempts")
	require.Equal(t, 1, it.Attempts)
	require.Equal(t, "bad input", it.LastError)
	f.clock.Advance(time.Hour)
	f.leaseNone("dead")
	require.Equal(t, []ports.WorkKey{wk("a")}, f.deadKeys(kindA, 0))
}

func queueRetryRequeued(f *queueFixture) {
	t := f.t
	now := f.now()
	at := func(d time.Duration) time.Time { return now.Add(d) }
	tests := []struct {
		name        string
		maxAttempts int
		enqueueNB   time.Time
		retry       ports.RetryParams
		notBefore   time.Time
		attempts    int
	}{
		{"retry earlier than the enqueue", 0, at(10 * time.Minute), ports.RetryParams{NotBefore: at(2 * time.Minute)}, at(2 * time.Minute), 1},
		{"enqueue earlier than the retry", 0, at(10 * time.Minute), ports.RetryParams{NotBefore: at(30 * time.Minute)}, at(10 * time.Minute), 1},
		{"terminal revives", 0, at(10 * time.Minute), ports.RetryParams{Terminal: true}, at(10 * time.Minute), 0},
		{"exhausted revives", 1, at(10 * time.Minute), ports.RetryParams{NotBefore: at(time.Minute)}, at(10 * time.Minute), 0},
	}
	for _, tt := range tests {
		key := wk(tt.name)
		f.enqueue(ports.EnqueueParams{Key: key, MaxAttempts: tt.maxAttempts})
		l := f.leaseOne(key)
		f.enqueue(ports.EnqueueParams{Key: key, NotBefore: tt.enqueueNB})
		tt.retry.Lease, tt.retry.Err = l.Ref(), "boom"
		f.retryOK(tt.retry)
		it := f.get(key)
		require.Equal(t, ports.WorkPending, it.State, "%s: the enqueue during the lease keeps the item alive", tt.name)
		require.False(t, it.Requeued, tt.name)
		require.Equal(t, "boom", it.LastError, "%s: the failure is recorded", tt.name)
		require.Equal(t, tt.attempts, it.Attempts, "%s: attempts", tt.name)
		requireTime(t, tt.notBefore, it.NotBefore, tt.name+": not-before")
	}
	require.Empty(t, f.deadKeys("", 0))
}

func queueExpiredAtMax(f *queueFixture) {
	t := f.t
	f.enqueue(ports.EnqueueParams{Key: wk("a"), MaxAttempts: 2})
	l := f.leaseOne(wk("a"))
	f.retryOK(ports.RetryParams{Lease: l.Ref(), Err: "boom"})
	l = f.leaseOne(wk("a"))
	require.Equal(t, 2, l.Attempt)
	f.clock.Advance(leaseFor)
	f.leaseNone("an expired lease at the last attempt is not leased again")
	it := f.get(wk("a"))
	require.Equal(t, ports.WorkDead, it.State)
	require.Equal(t, ports.LeaseExpiredError, it.LastError)
	require.Equal(t, 2, it.Attempts)
	require.Equal(t, []ports.WorkKey{wk("a")}, f.deadKeys("", 0))
	requireLost(t, f.ack(ports.AckParams{Lease: l.Ref()})[0], "dead-lettered, the lease is gone")

	// An enqueue during that lease earns a fresh budget instead.
	f.enqueue(ports.EnqueueParams{Key: wk("b"), MaxAttempts: 1})
	l = f.leaseOne(wk("b"))
	f.enqueueKeys(wk("b"))
	f.clock.Advance(leaseFor)
	l2 := f.leaseOne(wk("b"))
	require.Equal(t, 1, l2.Attempt)
	require.Greater(t, l2.Token, l.Token)
	require.Equal(t, ports.LeaseExpiredError, f.get(wk("b")).LastError)
	require.Equal(t, []ports.WorkKey{wk("a")}, f.deadKeys("", 0))
}

func queueEnqueueRevivesDead(f *queueFixture) {
	t := f.t
	f.enqueue(ports.EnqueueParams{Key: wk("a"), Priority: 1, EventTime: f.now().Add(-time.Hour)})
	l := f.leaseOne(wk("a"))
	f.retryOK(ports.RetryParams{Lease: l.Ref(), Err: "bad", Terminal: true})
	require.Equal(t, ports.WorkDead, f.get(wk("a")).State)

	nb := f.now().Add(time.Minute)
	f.enqueue(ports.EnqueueParams{Key: wk("a"), Priority: 3, NotBefore: nb})
	it := f.get(wk("a"))
	require.Equal(t, ports.WorkPending, it.State, "a new event revives a dead item")
	require.Zero(t, it.Attempts, "with a fresh budget")
	requireTime(t, nb, it.NotBefore, "at the new enqueue's not-before")
	require.Equal(t, 3, it.Priority)
	requireTime(t, f.now(), it.EventTime, "the new event time")
	require.Equal(t, "bad", it.LastError, "the last error stays for the record")
	require.Empty(t, f.deadKeys("", 0))
	require.Equal(t, map[ports.WorkState]int{ports.WorkPending: 1, ports.WorkLeased: 0, ports.WorkDead: 0}, f.stats())
	f.leaseNone("not before the new not-before")
	f.clock.Advance(time.Minute)
	require.Equal(t, 1, f.leaseOne(wk("a")).Attempt)
}

func queueRedrive(f *queueFixture) {
	t := f.t
	b := wkOf(kindB, "b")
	f.enqueue(ports.EnqueueParams{Key: wk("a"), MaxAttempts: 1}, ports.EnqueueParams{Key: b})
	l := f.leaseOne(wk("a"))
	f.retryOK(ports.RetryParams{Lease: l.Ref(), Err: "boom", NotBefore: f.now().Add(time.Hour)})
	require.Equal(t, ports.WorkDead, f.get(wk("a")).State)

	require.ErrorIs(t, f.q.WorkRedrive(f.ctx, wk("missing")), ports.ErrNotFound)
	require.ErrorIs(t, f.q.WorkRedrive(f.ctx, b), ports.ErrConflict, "a pending item is not dead")
	require.Equal(t, ports.WorkPending, f.get(b).State)

	f.clock.Advance(time.Minute)
	require.NoError(t, f.q.WorkRedrive(f.ctx, wk("a")))
	it := f.get(wk("a"))
	require.Equal(t, ports.WorkPending, it.State)
	require.Zero(t, it.Attempts)
	requireTime(t, f.now(), it.NotBefore, "a redriven item is due now")
	require.Empty(t, f.deadKeys("", 0))
	require.ErrorIs(t, f.q.WorkRedrive(f.ctx, wk("a")), ports.ErrConflict, "redriving twice")

	ls := f.lease(10, kindA, kindB)
	require.Len(t, ls, 2)
	for _, l := range ls {
		require.Equal(t, 1, l.Attempt)
	}
	require.ErrorIs(t, f.q.WorkRedrive(f.ctx, wk("a")), ports.ErrConflict, "a leased item is not dead")
}

func queueDeadList(f *queueFixture) {
	t := f.t
	now := f.now()
	keys := []ports.WorkKey{wkOf(kindA, "new"), wkOf(kindB, "mid"), wkOf(kindA, "old"), wkOf(kindA, "tie-b"), wkOf(kindA, "tie-a")}
	ages := []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	for i, k := range keys {
		f.enqueue(ports.EnqueueParams{Key: k, EventTime: now.Add(-ages[i])})
	}
	f.enqueueKeys(wk("alive"))
	for _, l := range f.lease(10, kindA, kindB) {
		if l.Key == wk("alive") {
			continue
		}
		f.retryOK(ports.RetryParams{Lease: l.Ref(), Err: "dead " + l.Key.ScopeID, Terminal: true})
	}
	items, err := f.q.WorkDeadList(f.ctx, ports.DeadListParams{})
	require.NoError(t, err)
	require.Len(t, items, 5)
	for _, it := range items {
		require.Equal(t, "dead "+it.Key.ScopeID, it.LastError)
	}
	oldestFirst := []ports.WorkKey{wkOf(kindA, "tie-a"), wkOf(kindA, "tie-b"), wkOf(kindA, "old"), wkOf(kindB, "mid"), wkOf(kindA, "new")}
	require.Equal(t, oldestFirst, f.deadKeys("", 0), "oldest event first, ties by key")
	require.Equal(t, oldestFirst[:2], f.deadKeys("", 2))
	require.Equal(t, []ports.WorkKey{wkOf(kindB, "mid")}, f.deadKeys(kindB, 0))
	require.Equal(t, []ports.WorkKey{wkOf(kindA, "tie-a"), wkOf(kindA, "tie-b"), wkOf(kindA, "old"), wkOf(kindA, "new")}, f.deadKeys(kindA, 10))
	require.Empty(t, f.deadKeys("gamma", 0))
}

func queueStats(f *queueFixture) {
	t := f.t
	zero := map[ports.WorkState]int{ports.WorkPending: 0, ports.WorkLeased: 0, ports.WorkDead: 0}
	require.Equal(t, zero, f.stats(), "every state has an entry")
	f.enqueueKeys(wk("a"), wk("b"), wk("c"), wk("d"))
	f.enqueue(ports.EnqueueParams{Key: wk("later"), NotBefore: f.now().Add(time.Hour)})
	require.Equal(t, map[ports.WorkState]int{ports.WorkPending: 5, ports.WorkLeased: 0, ports.WorkDead: 0}, f.stats())
	ls := f.lease(3)
	require.Len(t, ls, 3)
	require.Equal(t, map[ports.WorkState]int{ports.WorkPending: 2, ports.WorkLeased: 3, ports.WorkDead: 0}, f.stats())
	f.retryOK(ports.RetryParams{Lease: ls[0].Ref(), Terminal: true})
	f.ackOK(ports.AckParams{Lease: ls[1].Ref()})
	require.Equal(t, map[ports.WorkState]int{ports.WorkPending: 2, ports.WorkLeased: 1, ports.WorkDead: 1}, f.stats())
	f.ackOK(ports.AckParams{Lease: ls[2].Ref(), RequeueAt: f.now()})
	require.Equal(t, map[ports.WorkState]int{ports.WorkPending: 3, ports.WorkLeased: 0, ports.WorkDead: 1}, f.stats())
}

func queueNotify(f *queueFixture) {
	t := f.t
	n, ok := f.q.(ports.WorkNotifier)
	if !ok {
		t.Skip("the queue does not implement ports.WorkNotifier")
	}
	a, b := n.WorkNotify(), n.WorkNotify()
	drain := func(ch <-chan struct{}) {
		for {
			select {
			case <-ch:
			default:
				return
			}
		}
	}
	await := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("no wake-up after %s", what)
		}
	}
	drain(a)
	drain(b)
	f.enqueueKeys(wk("a"))
	await(a, "an enqueue (first subscriber)")
	await(b, "an enqueue (second subscriber)")

	l := f.leaseOne(wk("a"))
	drain(a)
	f.retryOK(ports.RetryParams{Lease: l.Ref(), Err: "boom"})
	await(a, "a retry due now")

	l = f.leaseOne(wk("a"))
	drain(a)
	f.ackOK(ports.AckParams{Lease: l.Ref(), RequeueAt: f.now()})
	await(a, "an ack requeued now")

	require.Equal(t, 1, cap(a), "wake-ups never pile up beyond one")
	require.Equal(t, 1, cap(b), "wake-ups never pile up beyond one")
}
