package porttest

import (
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
)

func queueEnqueueCreates(f *queueFixture) {
	t := f.t
	now := f.now()
	f.enqueueKeys(wk("plain"))
	it := f.get(wk("plain"))
	require.Equal(t, ports.WorkPending, it.State)
	requireTime(t, now, it.NotBefore, "zero not-before means now")
	requireTime(t, now, it.EventTime, "zero event time means now")
	require.Zero(t, it.Priority)
	require.Zero(t, it.Attempts)
	require.Equal(t, ports.DefaultMaxAttempts, it.MaxAttempts)
	require.False(t, it.Requeued)
	require.Empty(t, it.LeaseOwner)
	require.True(t, it.LeaseExpiresAt.IsZero())
	require.Empty(t, it.LastError)

	nb, et := now.Add(time.Minute), now.Add(-time.Hour)
	f.enqueue(ports.EnqueueParams{Key: wk("full"), Priority: 5, NotBefore: nb, EventTime: et, MaxAttempts: 3})
	it = f.get(wk("full"))
	require.Equal(t, ports.WorkPending, it.State)
	require.Equal(t, 5, it.Priority)
	requireTime(t, nb, it.NotBefore, "not-before")
	requireTime(t, et, it.EventTime, "event time")
	require.Equal(t, 3, it.MaxAttempts)
	require.Equal(t, 2, f.stats()[ports.WorkPending])
}

func queueEnqueueInvalid(f *queueFixture) {
	t := f.t
	tests := []struct {
		name  string
		p     ports.EnqueueParams
		field string
	}{
		{"empty kind", ports.EnqueueParams{Key: ports.WorkKey{ScopeType: "target", ScopeID: "x"}}, "kind"},
		{"empty scope type", ports.EnqueueParams{Key: ports.WorkKey{Kind: kindA, ScopeID: "x"}}, "scope_type"},
		{"empty scope id", ports.EnqueueParams{Key: ports.WorkKey{Kind: kindA, ScopeType: "target"}}, "scope_id"},
		{"negative max attempts", ports.EnqueueParams{Key: wk("x"), MaxAttempts: -1}, "max_attempts"},
	}
	for _, tt := range tests {
		// A bad item spoils the whole batch: the good one is not stored.
		err := f.q.WorkEnqueue(f.ctx, ports.EnqueueParams{Key: wk("good")}, tt.p)
		require.ErrorIs(t, err, ports.ErrInvalidWork, tt.name)
		require.Contains(t, err.Error(), tt.field, "%s: the error names the field", tt.name)
		f.gone(wk("good"))
	}
	require.Zero(t, f.stats()[ports.WorkPending])
}

func queueEnqueueCoalesces(f *queueFixture) {
	t := f.t
	now := f.now()
	at := func(d time.Duration) time.Time { return now.Add(d) }
	tests := []struct {
		name          string
		first, second ports.EnqueueParams
		priority      int
		notBefore     time.Time
		eventTime     time.Time
		maxAttempts   int
	}{
		{"earlier not-before wins", ports.EnqueueParams{NotBefore: at(10 * time.Minute)}, ports.EnqueueParams{NotBefore: at(5 * time.Minute)},
			0, at(5 * time.Minute), now, ports.DefaultMaxAttempts},
		{"later not-before loses", ports.EnqueueParams{NotBefore: at(5 * time.Minute)}, ports.EnqueueParams{NotBefore: at(10 * time.Minute)},
			0, at(5 * time.Minute), now, ports.DefaultMaxAttempts},
		{"zero not-before is now and wins", ports.EnqueueParams{NotBefore: at(time.Hour)}, ports.EnqueueParams{},
			0, now, now, ports.DefaultMaxAttempts},
		{"higher priority wins", ports.EnqueueParams{Priority: 1}, ports.EnqueueParams{Priority: 7},
			7, now, now, ports.DefaultMaxAttempts},
		{"lower priority loses", ports.EnqueueParams{Priority: 7}, ports.EnqueueParams{Priority: -2},
			7, now, now, ports.DefaultMaxAttempts},
		{"later event time wins", ports.EnqueueParams{EventTime: at(-time.Hour)}, ports.EnqueueParams{EventTime: at(-time.Minute)},
			0, now, at(-time.Minute), ports.DefaultMaxAttempts},
		{"earlier event time loses", ports.EnqueueParams{EventTime: at(-time.Minute)}, ports.EnqueueParams{EventTime: at(-time.Hour)},
			0, now, at(-time.Minute), ports.DefaultMaxAttempts},
		{"higher max attempts wins", ports.EnqueueParams{MaxAttempts: 3}, ports.EnqueueParams{MaxAttempts: 9},
			0, now, now, 9},
		{"lower max attempts loses", ports.EnqueueParams{MaxAttempts: 9}, ports.EnqueueParams{MaxAttempts: 3},
			0, now, now, 9},
		{"zero max attempts keeps", ports.EnqueueParams{MaxAttempts: 3}, ports.EnqueueParams{},
			0, now, now, 3},
		{"all at once", ports.EnqueueParams{Priority: 2, NotBefore: at(time.Minute), EventTime: at(-2 * time.Minute)},
			ports.EnqueueParams{Priority: 1, NotBefore: at(2 * time.Minute), EventTime: at(-time.Minute)},
			2, at(time.Minute), at(-time.Minute), ports.DefaultMaxAttempts},
	}
	for _, tt := range tests {
		key := wk(tt.name)
		tt.first.Key, tt.second.Key = key, key
		f.enqueue(tt.first)
		f.enqueue(tt.second)
		it := f.get(key)
		require.Equal(t, ports.WorkPending, it.State, tt.name)
		require.Equal(t, tt.priority, it.Priority, "%s: priority", tt.name)
		requireTime(t, tt.notBefore, it.NotBefore, tt.name+": not-before")
		requireTime(t, tt.eventTime, it.EventTime, tt.name+": event time")
		require.Equal(t, tt.maxAttempts, it.MaxAttempts, "%s: max attempts", tt.name)
	}
	require.Equal(t, len(tests), f.stats()[ports.WorkPending], "one item per key")

	// Coalescing inside one batch works the same way.
	key := wk("batch")
	f.enqueue(ports.EnqueueParams{Key: key, Priority: 1}, ports.EnqueueParams{Key: key, Priority: 4}, ports.EnqueueParams{Key: key})
	require.Equal(t, 4, f.get(key).Priority)
	require.Equal(t, len(tests)+1, f.stats()[ports.WorkPending])
}

func queueGetMissing(f *queueFixture) {
	f.gone(wk("nope"))
	f.enqueueKeys(wk("there"))
	f.gone(wkOf(kindB, "there"))
	f.gone(ports.WorkKey{Kind: kindA, ScopeType: "other", ScopeID: "there"})
}

func queueLeaseInvalid(f *queueFixture) {
	t := f.t
	f.enqueueKeys(wk("a"))
	tests := []struct {
		name  string
		p     ports.LeaseParams
		field string
	}{
		{"no kinds", ports.LeaseParams{Limit: 1, Duration: leaseFor}, "kinds"},
		{"empty kind", ports.LeaseParams{Kinds: []string{kindA, ""}, Limit: 1, Duration: leaseFor}, "kinds[1]"},
		{"zero limit", ports.LeaseParams{Kinds: []string{kindA}, Duration: leaseFor}, "limit"},
		{"negative limit", ports.LeaseParams{Kinds: []string{kindA}, Limit: -1, Duration: leaseFor}, "limit"},
		{"zero duration", ports.LeaseParams{Kinds: []string{kindA}, Limit: 1}, "duration"},
	}
	for _, tt := range tests {
		ls, err := f.q.WorkLease(f.ctx, tt.p)
		require.ErrorIs(t, err, ports.ErrInvalidWork, tt.name)
		require.Contains(t, err.Error(), tt.field, "%s: the error names the field", tt.name)
		require.Empty(t, ls, tt.name)
	}
	require.Equal(t, ports.WorkPending, f.get(wk("a")).State, "a refused lease claims nothing")

	l := f.leaseOne(wk("a"))
	_, err := f.q.WorkHeartbeat(f.ctx, 0, l.Ref())
	require.ErrorIs(t, err, ports.ErrInvalidWork)
	require.Contains(t, err.Error(), "duration")
}

func queueLeaseOnlyDue(f *queueFixture) {
	t := f.t
	f.enqueue(ports.EnqueueParams{Key: wk("later"), NotBefore: f.now().Add(time.Minute)})
	f.leaseNone("not due yet")
	f.clock.Advance(time.Minute - time.Microsecond)
	f.leaseNone("one microsecond early")
	f.clock.Advance(time.Microsecond)
	l := f.leaseOne(wk("later"))
	require.Equal(t, 1, l.Attempt)
	require.Equal(t, ports.WorkLeased, f.get(wk("later")).State)
	require.Empty(t, f.lease(10, kindB), "another kind's lease finds nothing")
}

func queueLeaseOrder(f *queueFixture) {
	t := f.t
	now := f.now()
	f.enqueue(
		ports.EnqueueParams{Key: wk("low-old"), Priority: 0, EventTime: now.Add(-10 * time.Minute)},
		ports.EnqueueParams{Key: wk("high-new"), Priority: 5, EventTime: now.Add(-time.Minute)},
		ports.EnqueueParams{Key: wk("high-old"), Priority: 5, EventTime: now.Add(-2 * time.Minute)},
		ports.EnqueueParams{Key: wk("mid"), Priority: 1, EventTime: now},
		ports.EnqueueParams{Key: wk("top-not-due"), Priority: 9, NotBefore: now.Add(time.Second)},
	)
	// Equal priority: the older event first.
	require.Equal(t, wk("high-old"), f.lease(1)[0].Key)
	// A batch claims the best items left...
	batch := f.lease(2)
	require.Len(t, batch, 2)
	require.ElementsMatch(t, []ports.WorkKey{wk("high-new"), wk("mid")}, []ports.WorkKey{batch[0].Key, batch[1].Key})
	// ...and the rest comes after.
	require.Equal(t, wk("low-old"), f.lease(1)[0].Key)
	f.leaseNone("only the not-due item is left")
	f.clock.Advance(time.Second)
	f.leaseOne(wk("top-not-due"))
}

func queueLeaseKinds(f *queueFixture) {
	t := f.t
	f.enqueue(
		ports.EnqueueParams{Key: wkOf(kindA, "a"), Priority: 1},
		ports.EnqueueParams{Key: wkOf(kindB, "b"), Priority: 2},
		ports.EnqueueParams{Key: wkOf("gamma", "g"), Priority: 3},
	)
	ls := f.lease(1, kindA, kindB)
	require.Len(t, ls, 1)
	require.Equal(t, wkOf(kindB, "b"), ls[0].Key, "priority orders across the requested kinds")
	ls = f.lease(5, kindA, kindB, kindA)
	require.Len(t, ls, 1)
	require.Equal(t, wkOf(kindA, "a"), ls[0].Key)
	require.Empty(t, f.lease(5, kindA, kindB))
	require.Equal(t, ports.WorkPending, f.get(wkOf("gamma", "g")).State, "kinds not asked for are untouched")
}

func queueLeaseFields(f *queueFixture) {
	t := f.t
	et := f.now().Add(-time.Hour)
	f.enqueue(ports.EnqueueParams{Key: wk("a"), EventTime: et})
	ls, err := f.q.WorkLease(f.ctx, ports.LeaseParams{Kinds: []string{kindA}, Limit: 5, Duration: time.Minute, Owner: "w-1"})
	require.NoError(t, err)
	require.Len(t, ls, 1)
	l := ls[0]
	require.Equal(t, wk("a"), l.Key)
	require.Equal(t, 1, l.Attempt)
	require.Positive(t, l.Token)
	requireTime(t, f.now().Add(time.Minute), l.ExpiresAt, "expiry")
	requireTime(t, et, l.EventTime, "event time")
	require.Equal(t, l.Key, l.Ref().Key)
	require.Equal(t, l.Token, l.Ref().Token)

	it := f.get(wk("a"))
	require.Equal(t, ports.WorkLeased, it.State)
	require.Equal(t, "w-1", it.LeaseOwner)
	requireTime(t, l.ExpiresAt, it.LeaseExpiresAt, "stored expiry")
	require.Equal(t, 1, it.Attempts)

	f.clock.Advance(time.Minute - time.Microsecond)
	f.leaseNone("a live lease is exclusive")
	require.Equal(t, map[ports.WorkState]int{ports.WorkPending: 0, ports.WorkLeased: 1, ports.WorkDead: 0}, f.stats())
}

// queueLeaseTraceparent: a lease carries the latest non-empty
// Traceparent its item was enqueued with, in a batch or across calls, and
// an untraced enqueue keeps it.
func queueLeaseTraceparent(f *queueFixture) {
	t := f.t
	const (
		tp1 = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		tp2 = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	)
	f.enqueue(ports.EnqueueParams{Key: wk("a"), Traceparent: tp1}, ports.EnqueueParams{Key: wk("b")})
	f.enqueue(ports.EnqueueParams{Key: wk("a")}, ports.EnqueueParams{Key: wk("c"), Traceparent: tp1},
		ports.EnqueueParams{Key: wk("c"), Traceparent: tp2}, ports.EnqueueParams{Key: wk("c")})
	got := map[string]string{}
	for _, l := range f.lease(10) {
		got[l.Key.ScopeID] = l.Traceparent
	}
	require.Equal(t, map[string]string{"a": tp1, "b": "", "c": tp2}, got)

	// An enqueue during the lease replaces the trace the next lease carries.
	f.enqueue(ports.EnqueueParams{Key: wk("a"), Traceparent: tp2})
	f.clock.Advance(leaseFor + time.Second)
	ls := f.lease(10)
	require.NotEmpty(t, ls)
	for _, l := range ls {
		if l.Key == wk("a") {
			require.Equal(t, tp2, l.Traceparent)
		}
	}
}

// queueLeasePriority: a lease carries the highest priority its item was
// enqueued with, in a batch or across calls, and the items come out
// highest first.
func queueLeasePriority(f *queueFixture) {
	t := f.t
	f.enqueue(ports.EnqueueParams{Key: wk("a")}, ports.EnqueueParams{Key: wk("b"), Priority: 2})
	f.enqueue(ports.EnqueueParams{Key: wk("a"), Priority: 1}, ports.EnqueueParams{Key: wk("b")},
		ports.EnqueueParams{Key: wk("c"), Priority: -1})
	ls := f.lease(10)
	var got []string
	prio := map[string]int{}
	for _, l := range ls {
		got = append(got, l.Key.ScopeID)
		prio[l.Key.ScopeID] = l.Priority
	}
	require.Equal(t, []string{"b", "a", "c"}, got, "highest priority first")
	require.Equal(t, map[string]int{"a": 1, "b": 2, "c": -1}, prio)
}

func queueHeartbeat(f *queueFixture) {
	t := f.t
	f.enqueueKeys(wk("a"), wk("b"))
	ls := f.lease(2)
	require.Len(t, ls, 2)
	a, b := ls[0], ls[1]
	f.clock.Advance(20 * time.Second)
	res := f.heartbeat(time.Minute,
		a.Ref(),
		ports.LeaseRef{Key: b.Key, Token: b.Token + 1000},
		ports.LeaseRef{Key: wk("missing"), Token: a.Token})
	require.NoError(t, res[0])
	requireLost(t, res[1], "a wrong token")
	requireLost(t, res[2], "a missing item")
	requireTime(t, f.now().Add(time.Minute), f.get(a.Key).LeaseExpiresAt, "renewed expiry")
	requireTime(t, b.ExpiresAt, f.get(b.Key).LeaseExpiresAt, "a refused heartbeat changes nothing")

	// Past the first expiry: b is free again, a is still held.
	f.clock.Advance(20 * time.Second)
	again := f.lease(10)
	require.Len(t, again, 1)
	require.Equal(t, b.Key, again[0].Key)
	f.ackOK(ports.AckParams{Lease: again[0].Ref()})
	f.clock.Advance(40*time.Second - time.Microsecond)
	f.leaseNone("a is held until its renewed expiry")
	f.clock.Advance(time.Microsecond)
	l := f.leaseOne(a.Key)
	require.Equal(t, 2, l.Attempt)
	requireLost(t, f.heartbeat(time.Minute, a.Ref())[0], "the old holder cannot renew")
}

func queueExpiredReclaimed(f *queueFixture) {
	t := f.t
	f.enqueueKeys(wk("a"))
	old := f.leaseOne(wk("a"))
	f.clock.Advance(leaseFor)
	ls, err := f.q.WorkLease(f.ctx, ports.LeaseParams{Kinds: []string{kindA}, Limit: 1, Duration: leaseFor, Owner: "second"})
	require.NoError(t, err)
	require.Len(t, ls, 1, "an expired lease frees the item")
	l := ls[0]
	require.Equal(t, 2, l.Attempt, "the expired lease counted as an attempt")
	require.Greater(t, l.Token, old.Token)
	it := f.get(wk("a"))
	require.Equal(t, "second", it.LeaseOwner)
	require.Equal(t, 2, it.Attempts)
	require.Equal(t, ports.LeaseExpiredError, it.LastError)

	requireLost(t, f.heartbeat(time.Minute, old.Ref())[0], "stale heartbeat")
	requireLost(t, f.ack(ports.AckParams{Lease: old.Ref()})[0], "stale ack")
	requireLost(t, f.q.WorkRetry(f.ctx, ports.RetryParams{Lease: old.Ref(), Err: "x"}), "stale retry")
	require.Equal(t, ports.WorkLeased, f.get(wk("a")).State, "stale calls change nothing")
	f.ackOK(ports.AckParams{Lease: l.Ref()})
	f.gone(wk("a"))
}

func queueExpiredHolderFinishes(f *queueFixture) {
	t := f.t
	f.enqueueKeys(wk("ack"), wk("retry"), wk("renew"))
	ls := f.lease(3)
	require.Len(t, ls, 3)
	byKey := map[ports.WorkKey]ports.Lease{}
	for _, l := range ls {
		byKey[l.Key] = l
	}
	f.clock.Advance(time.Hour)
	// Nobody leased them again, so their tokens are still current.
	f.ackOK(ports.AckParams{Lease: byKey[wk("ack")].Ref()})
	f.gone(wk("ack"))
	f.retryOK(ports.RetryParams{Lease: byKey[wk("retry")].Ref(), Err: "late", NotBefore: f.now().Add(time.Minute)})
	require.Equal(t, ports.WorkPending, f.get(wk("retry")).State)
	require.NoError(t, f.heartbeat(time.Minute, byKey[wk("renew")].Ref())[0])
	f.leaseNone("the renewed lease holds its item; the retried one waits")
	require.Equal(t, 1, f.get(wk("renew")).Attempts)
}

func queueTokensGrow(f *queueFixture) {
	t := f.t
	f.enqueueKeys(wk("a"))
	first := f.leaseOne(wk("a"))
	f.clock.Advance(leaseFor)
	second := f.leaseOne(wk("a"))
	require.Greater(t, second.Token, first.Token)
	f.ackOK(ports.AckParams{Lease: second.Ref()})
	f.gone(wk("a"))

	// Deleted and enqueued again: older tokens still never match.
	f.enqueueKeys(wk("a"))
	third := f.leaseOne(wk("a"))
	require.Greater(t, third.Token, second.Token)
	require.Equal(t, 1, third.Attempt, "a new item starts its attempts over")
	requireLost(t, f.ack(ports.AckParams{Lease: first.Ref()})[0], "first token")
	requireLost(t, f.ack(ports.AckParams{Lease: second.Ref()})[0], "second token")
	f.ackOK(ports.AckParams{Lease: third.Ref()})
}

func queueAckDeletes(f *queueFixture) {
	t := f.t
	f.enqueueKeys(wk("a"))
	l := f.leaseOne(wk("a"))
	f.ackOK(ports.AckParams{Lease: l.Ref()})
	f.gone(wk("a"))
	require.Equal(t, map[ports.WorkState]int{ports.WorkPending: 0, ports.WorkLeased: 0, ports.WorkDead: 0}, f.stats())
	requireLost(t, f.ack(ports.AckParams{Lease: l.Ref()})[0], "a second ack")
	requireLost(t, f.ack(ports.AckParams{Lease: l.Ref(), RequeueAt: f.now()})[0], "a second ack with requeue")
	f.gone(wk("a"))
	requireLost(t, f.ack(ports.AckParams{Lease: ports.LeaseRef{Key: wk("never"), Token: 1}})[0], "an unknown key")
	f.gone(wk("never"))

	// A pending item cannot be acked with any token.
	f.enqueueKeys(wk("b"))
	requireLost(t, f.ack(ports.AckParams{Lease: ports.LeaseRef{Key: wk("b"), Token: l.Token}})[0], "a pending item")
	require.Equal(t, ports.WorkPending, f.get(wk("b")).State)

	res, err := f.q.WorkAck(f.ctx)
	require.NoError(t, err)
	require.Empty(t, res, "an empty batch is fine")
}

func queueAckBatch(f *queueFixture) {
	t := f.t
	f.enqueueKeys(wk("a"), wk("b"), wk("c"))
	ls := f.lease(3)
	require.Len(t, ls, 3)
	by := map[ports.WorkKey]ports.Lease{}
	for _, l := range ls {
		by[l.Key] = l
	}
	res := f.ack(
		ports.AckParams{Lease: by[wk("a")].Ref()},
		ports.AckParams{Lease: ports.LeaseRef{Key: wk("b"), Token: by[wk("b")].Token + 1000}},
		ports.AckParams{Lease: by[wk("c")].Ref(), RequeueAt: f.now().Add(time.Minute)},
		ports.AckParams{Lease: by[wk("a")].Ref()},
	)
	require.NoError(t, res[0])
	requireLost(t, res[1], "wrong token")
	require.NoError(t, res[2])
	requireLost(t, res[3], "the same lease twice in one batch")
	f.gone(wk("a"))
	require.Equal(t, ports.WorkLeased, f.get(wk("b")).State)
	require.Equal(t, ports.WorkPending, f.get(wk("c")).State)
}

func queueAckRequeueAt(f *queueFixture) {
	t := f.t
	f.enqueue(ports.EnqueueParams{Key: wk("a"), Priority: 3})
	l := f.leaseOne(wk("a"))
	f.retryOK(ports.RetryParams{Lease: l.Ref(), Err: "flaky"})
	l = f.leaseOne(wk("a"))
	require.Equal(t, 2, l.Attempt)

	at := f.now().Add(5 * time.Minute)
	f.ackOK(ports.AckParams{Lease: l.Ref(), RequeueAt: at})
	it := f.get(wk("a"))
	require.Equal(t, ports.WorkPending, it.State)
	requireTime(t, at, it.NotBefore, "not-before is the requeue time")
	require.Zero(t, it.Attempts, "a completed pass resets attempts")
	require.Empty(t, it.LastError, "a completed pass clears the error")
	require.Equal(t, 3, it.Priority, "priority is kept")
	require.Empty(t, it.LeaseOwner)
	require.False(t, it.Requeued)
	requireLost(t, f.ack(ports.AckParams{Lease: l.Ref()})[0], "the lease ended with the ack")

	f.clock.Advance(5*time.Minute - time.Microsecond)
	f.leaseNone("not before the requeue time")
	f.clock.Advance(time.Microsecond)
	l = f.leaseOne(wk("a"))
	require.Equal(t, 1, l.Attempt)

	// A requeue time in the past is due at once.
	f.ackOK(ports.AckParams{Lease: l.Ref(), RequeueAt: f.now().Add(-time.Hour)})
	f.leaseOne(wk("a"))
}

func queueEnqueueWhileLeased(f *queueFixture) {
	t := f.t
	f.enqueueKeys(wk("a"))
	l := f.leaseOne(wk("a"))
	f.enqueueKeys(wk("a"))
	it := f.get(wk("a"))
	require.Equal(t, ports.WorkLeased, it.State, "the lease is not disturbed")
	require.True(t, it.Requeued)
	require.Equal(t, 1, it.Attempts)
	f.leaseNone("still leased")
	require.NoError(t, f.heartbeat(leaseFor, l.Ref())[0], "the holder still holds it")

	f.ackOK(ports.AckParams{Lease: l.Ref()})
	it = f.get(wk("a"))
	require.Equal(t, ports.WorkPending, it.State, "the enqueue during the lease keeps the item")
	require.False(t, it.Requeued)
	require.Zero(t, it.Attempts)
	l = f.leaseOne(wk("a"))
	require.Equal(t, 1, l.Attempt)
	f.ackOK(ports.AckParams{Lease: l.Ref()})
	f.gone(wk("a"))
}

func queueAckRequeuedMerges(f *queueFixture) {
	t := f.t
	now := f.now()
	at := func(d time.Duration) time.Time { return now.Add(d) }
	tests := []struct {
		name      string
		during    []ports.EnqueueParams // enqueued while leased; Key filled in
		requeueAt time.Time
		notBefore time.Time
		priority  int
		eventTime time.Time
	}{
		{"enqueue not-before without requeue", []ports.EnqueueParams{{NotBefore: at(10 * time.Minute)}}, time.Time{},
			at(10 * time.Minute), 1, now},
		{"requeue earlier than the enqueue", []ports.EnqueueParams{{NotBefore: at(10 * time.Minute)}}, at(5 * time.Minute),
			at(5 * time.Minute), 1, now},
		{"enqueue earlier than the requeue", []ports.EnqueueParams{{NotBefore: at(10 * time.Minute)}}, at(20 * time.Minute),
			at(10 * time.Minute), 1, now},
		{"enqueue due now beats a requeue", []ports.EnqueueParams{{}}, at(20 * time.Minute),
			now, 1, now},
		{"earliest of several enqueues", []ports.EnqueueParams{{NotBefore: at(10 * time.Minute)}, {NotBefore: at(3 * time.Minute)}, {NotBefore: at(7 * time.Minute)}}, time.Time{},
			at(3 * time.Minute), 1, now},
		{"higher priority wins", []ports.EnqueueParams{{Priority: 4, NotBefore: at(time.Minute)}}, time.Time{},
			at(time.Minute), 4, now},
		{"lower priority loses", []ports.EnqueueParams{{Priority: 0, NotBefore: at(time.Minute)}}, time.Time{},
			at(time.Minute), 1, now},
		{"later event time wins", []ports.EnqueueParams{{EventTime: at(-time.Minute), NotBefore: at(time.Minute)}}, time.Time{},
			at(time.Minute), 1, at(-time.Minute)},
	}
	for _, tt := range tests {
		key := wk(tt.name)
		f.enqueue(ports.EnqueueParams{Key: key, Priority: 1, EventTime: at(-time.Hour)})
		l := f.leaseOne(key)
		f.retryOK(ports.RetryParams{Lease: l.Ref(), Err: "first try"})
		l = f.leaseOne(key)
		require.Equal(t, 2, l.Attempt)
		for _, p := range tt.during {
			p.Key = key
			f.enqueue(p)
		}
		require.True(t, f.get(key).Requeued, tt.name)
		f.ackOK(ports.AckParams{Lease: l.Ref(), RequeueAt: tt.requeueAt})
		it := f.get(key)
		require.Equal(t, ports.WorkPending, it.State, tt.name)
		require.Zero(t, it.Attempts, "%s: attempts reset", tt.name)
		require.Empty(t, it.LastError, "%s: error cleared", tt.name)
		require.False(t, it.Requeued, tt.name)
		requireTime(t, tt.notBefore, it.NotBefore, tt.name+": not-before")
		require.Equal(t, tt.priority, it.Priority, "%s: priority", tt.name)
		requireTime(t, tt.eventTime, it.EventTime, tt.name+": event time")
		// Out of the way for the next case.
		if it.NotBefore.After(now) {
			continue
		}
		l = f.leaseOne(key)
		f.ackOK(ports.AckParams{Lease: l.Ref()})
		f.gone(key)
	}
}
