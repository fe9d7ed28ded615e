package postgres

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/reconcilerhq/reconciler/ports"
)

// Queue is the PostgreSQL ports.Queue over the reconcile_work_scope table
// (migration 0001). Every method is one statement and joins the context's
// transaction when there is one (DB.InTx), so an enqueue commits with the
// state change that caused it. It also implements ports.WorkNotifier
// through LISTEN/NOTIFY.
type Queue struct {
	db     *DB
	clock  ports.Clock
	notify *notifier

	mu     sync.Mutex
	sweeps map[string]sweep // by kind

	// tids are the tuple ids this queue's leases left their rows at.
	tids tidCache

	// reapNext is when a lease next reclaims the leases of owners whose
	// liveness lapsed (Queue.reap).
	reapNext time.Time
}

// sweep is what this queue knows about the waiting items and leases of one
// kind: below floor, every waiting item and expired lease was dealt with by
// one of its leases, so leases read those indexes only above it and skip
// the dead entries vacuum has not removed yet. Now and then (every quarter
// lease, since full) a lease reads them whole, for what a floor can miss:
// rows skipped while another transaction held them, clocks of other
// processes running behind.
//
// A lease that does not deal with everything it read (it left expired
// leases for later, hit its scan cap, failed, or ran inside a caller's
// transaction that may roll back) lowers the floor back to its own and
// bumps gen: a lease of the same kind that ran beside it may have skipped
// the rows it held, so that lease must not raise the floor past them.
type sweep struct {
	floor, full time.Time
	gen         uint64
}

// sweepLag is how far behind a lease's now its kind's floor rises: writes
// that read the clock earlier but commit after the lease began (waiting
// items due within the lag) are still found by the next lease.
const sweepLag = time.Second

// noFloor is the floor of a lease that reads the waiting items and leases
// of a kind whole: before any time the queue stores.
var noFloor = time.Unix(0, 0).UTC()

var (
	_ ports.Queue        = (*Queue)(nil)
	_ ports.WorkNotifier = (*Queue)(nil)
)

// NewQueue returns the queue over db that reads "now" only from clock.
func NewQueue(db *DB, clock ports.Clock) *Queue {
	return &Queue{db: db, clock: clock, notify: newNotifier(db.pool.Config().ConnConfig, notifyChannel), sweeps: map[string]sweep{}}
}

// Close stops the notification listener, if WorkNotify started one. The
// queue's other methods keep working until the DB is closed.
func (q *Queue) Close() { q.notify.close() }

// WorkNotify implements ports.WorkNotifier: every call subscribes a new
// channel (capacity 1, written without blocking) that receives a value when
// a commit anywhere made work due (an enqueue, a retry or requeue due now,
// a redrive), when the listener (re)connects, and periodically while it
// cannot listen. Work that becomes due by time passing alone is not
// signalled: callers poll as a fallback. The first call starts the
// listener on a dedicated connection; Close stops it.
func (q *Queue) WorkNotify() <-chan struct{} { return q.notify.subscribe() }

// now reads the clock at the precision Postgres keeps.
func (q *Queue) now() time.Time { return pgTime(q.clock.Now()) }

// pgTime is t in UTC at microsecond precision.
func pgTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// orNow is t at Postgres precision, with zero meaning now.
func orNow(t, now time.Time) time.Time {
	if t.IsZero() {
		return now
	}
	return pgTime(t)
}

// keyCmp orders keys by kind, scope type, scope id, bytewise: the order of
// the table's "C" collation, in which batches lock rows.
func keyCmp(a, b ports.WorkKey) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.ScopeType, b.ScopeType), cmp.Compare(a.ScopeID, b.ScopeID))
}

// WorkEnqueue inserts or coalesces items in one statement. The batch is
// validated first, so bad input stores nothing; enqueues of one key within
// the batch are merged by the same rules as across calls.
func (q *Queue) WorkEnqueue(ctx context.Context, items ...ports.EnqueueParams) error {
	for i := range items {
		if err := ports.ValidateEnqueue(items[i]); err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
	}
	if len(items) == 0 {
		return nil
	}
	now := q.now()
	merged := make([]ports.EnqueueParams, 0, len(items))
	index := make(map[ports.WorkKey]int, len(items))
	for _, p := range items {
		p.NotBefore, p.EventTime = orNow(p.NotBefore, now), orNow(p.EventTime, now)
		i, seen := index[p.Key]
		if !seen {
			index[p.Key] = len(merged)
			merged = append(merged, p)
			continue
		}
		m := &merged[i]
		m.Priority = max(m.Priority, p.Priority)
		m.MaxAttempts = max(m.MaxAttempts, p.MaxAttempts)
		if p.NotBefore.Before(m.NotBefore) {
			m.NotBefore = p.NotBefore
		}
		if p.EventTime.After(m.EventTime) {
			m.EventTime = p.EventTime
		}
		if p.Traceparent != "" {
			m.Traceparent = p.Traceparent
		}
	}
	slices.SortFunc(merged, func(a, b ports.EnqueueParams) int { return keyCmp(a.Key, b.Key) })
	n := len(merged)
	kinds, types, ids, spaces, traces := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	prios, maxes := make([]int, n), make([]int, n)
	events, notBefores := make([]time.Time, n), make([]time.Time, n)
	for i, p := range merged {
		kinds[i], types[i], ids[i], spaces[i], traces[i] = p.Key.Kind, p.Key.ScopeType, p.Key.ScopeID, p.Workspace, p.Traceparent
		prios[i], maxes[i] = p.Priority, p.MaxAttempts
		events[i], notBefores[i] = p.EventTime, p.NotBefore
	}
	ready, err := scanStrings(q.db.hotQuery(ctx, hotEnqueue, kinds, types, ids, prios, events, notBefores, maxes, ports.DefaultMaxAttempts, now, spaces, traces))
	if err != nil {
		if n == 1 {
			return fmt.Errorf("enqueue %s: %w", merged[0].Key, err)
		}
		return fmt.Errorf("enqueue %d items: %w", n, err)
	}
	q.madeReady(ctx, ready...)
	return nil
}

// madeReady tells the listeners of every process, this one's included,
// that kinds have items ready, once ctx's transaction, if any, has
// committed (a rolled-back one made nothing ready), through the DB's
// publisher. This process's subscribers are not woken ahead of the
// others': the process that made the work would lease all of it before
// any other heard of it.
func (q *Queue) madeReady(ctx context.Context, kinds ...string) {
	if len(kinds) == 0 {
		return
	}
	q.db.afterCommit(ctx, func() { q.db.pub.publish(notifyChannel, kinds...) })
}

// scanStrings reads the one text column of rows.
func scanStrings(rows *sql.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// WorkLease claims up to p.Limit due items of p.Kinds in one statement:
// highest priority, then oldest event, then key. Expired leases are
// reclaimed here: leased again, or dead-lettered when their attempts are
// exhausted and no enqueue arrived during them.
func (q *Queue) WorkLease(ctx context.Context, p ports.LeaseParams) ([]ports.Lease, error) {
	if err := ports.ValidateLease(p); err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	now := q.now()
	exp := pgTime(now.Add(p.Duration))
	kinds := slices.Clone(p.Kinds)
	slices.Sort(kinds)
	kinds = slices.Compact(kinds)
	// A lease inside a caller's transaction reads whole and never raises a
	// floor: what it did is undone if the transaction rolls back.
	_, inTx := ctx.Value(txKey{}).(*ctxTx)
	floors, gens := q.floors(kinds, now, p.Duration, inTx)
	var swept []string
	settled := false
	defer func() {
		if !settled || inTx {
			swept = nil
		}
		q.settleFloors(kinds, floors, gens, swept, now)
	}()
	stmt := hotLeaseAsync
	if inTx {
		stmt = hotLease
	} else if err := q.reap(ctx, now, p.Duration); err != nil {
		return nil, fmt.Errorf("lease %v: %w", p.Kinds, err)
	}
	rows, err := q.db.poolQuery(ctx, stmt, kinds, floors, now, p.Limit, p.Owner, exp, ports.LeaseExpiredError, leaseScanCap(p.Limit))
	if err != nil {
		return nil, fmt.Errorf("lease %v: %w", p.Kinds, err)
	}
	defer rows.Close()
	type claimed struct {
		lease    ports.Lease
		priority int
	}
	out := make([]claimed, 0, p.Limit)
	for rows.Next() {
		var c claimed
		var tid pgtype.TID
		l := &c.lease
		if err := rows.Scan(&l.Key.Kind, &l.Key.ScopeType, &l.Key.ScopeID, &l.Token, &l.Attempt, &l.EventTime, &c.priority, &tid, &l.Reclaimed, &l.Traceparent); err != nil {
			return nil, fmt.Errorf("lease %v: %w", p.Kinds, err)
		}
		if l.Key.ScopeType == "" {
			swept = append(swept, l.Key.Kind)
			continue
		}
		if tid.Valid {
			q.tids.put(l.Token, l.Key, tid)
		}
		l.EventTime = l.EventTime.UTC()
		l.ExpiresAt = exp
		l.Priority = c.priority
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lease %v: %w", p.Kinds, err)
	}
	settled = true
	// RETURNING has no order: hand the leases out in lease order.
	slices.SortFunc(out, func(a, b claimed) int {
		return cmp.Or(cmp.Compare(b.priority, a.priority), a.lease.EventTime.Compare(b.lease.EventTime), keyCmp(a.lease.Key, b.lease.Key))
	})
	leases := make([]ports.Lease, len(out))
	for i, c := range out {
		leases[i] = c.lease
	}
	return leases, nil
}

// reap makes the unexpired leases held by owners whose liveness row
// lapsed expire now, so this lease reclaims them at once rather than when
// they run out. It runs at most once per quarter of the lease duration d.
func (q *Queue) reap(ctx context.Context, now time.Time, d time.Duration) error {
	q.mu.Lock()
	due := !now.Before(q.reapNext)
	if due {
		q.reapNext = now.Add(d / 4)
	}
	q.mu.Unlock()
	if !due {
		return nil
	}
	if _, err := q.db.hotExec(ctx, hotReap, now); err != nil {
		q.mu.Lock()
		q.reapNext = time.Time{}
		q.mu.Unlock()
		return fmt.Errorf("reclaim the leases of lapsed owners: %w", err)
	}
	return nil
}

// leaseScanCap is how many waiting items and expired leases of each kind a
// lease of limit items reads at most: every due waiting item it reads is
// leased or made ready, so a burst that fell due at once drains in a few
// leases, each of bounded size.
func leaseScanCap(limit int) int { return max(2*limit, 1000) }

// floors returns the floor each kind's lease reads waiting items and
// expired leases above, and the kind's gen when it was read: noFloor when
// the kind was never read whole, not for a quarter of the lease duration,
// the clock went back, or whole is set.
func (q *Queue) floors(kinds []string, now time.Time, d time.Duration, whole bool) ([]time.Time, []uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out, gens := make([]time.Time, len(kinds)), make([]uint64, len(kinds))
	for i, k := range kinds {
		s, ok := q.sweeps[k]
		gens[i] = s.gen
		switch {
		case whole, !ok, now.Sub(s.full) >= d/4, now.Before(s.full), now.Before(s.floor):
			out[i] = noFloor
		default:
			out[i] = s.floor
		}
	}
	return out, gens
}

// settleFloors records what a lease at now did for each of its kinds. A
// swept kind (every waiting item and expired lease above its floor was
// dealt with) raises its floor to now less sweepLag, unless a lease of the
// kind that ran meanwhile left some behind (its gen moved). Any other kind
// lowers its floor back to the one this lease used and bumps its gen.
func (q *Queue) settleFloors(kinds []string, floors []time.Time, gens []uint64, swept []string, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, k := range kinds {
		s := q.sweeps[k]
		if !slices.Contains(swept, k) {
			if floors[i].Before(s.floor) {
				s.floor = floors[i]
			}
			s.gen++
			q.sweeps[k] = s
			continue
		}
		if s.gen != gens[i] {
			continue
		}
		if floor := now.Add(-sweepLag); floor.After(s.floor) {
			s.floor = floor
		}
		if floors[i].Equal(noFloor) && now.After(s.full) {
			s.full = now
		}
		q.sweeps[k] = s
	}
}

// refArrays spreads lease refs into the statement's key, token and
// position arrays.
func refArrays(refs []ports.LeaseRef) (kinds, types, ids []string, tokens []int64, ords []int) {
	n := len(refs)
	kinds, types, ids = make([]string, n), make([]string, n), make([]string, n)
	tokens, ords = make([]int64, n), make([]int, n)
	for i, r := range refs {
		kinds[i], types[i], ids[i] = r.Key.Kind, r.Key.ScopeType, r.Key.ScopeID
		tokens[i], ords[i] = r.Token, i
	}
	return kinds, types, ids, tokens, ords
}

// scanOrds reads the positions a batch statement reports as done.
func scanOrds(rows rowsReader, n int) ([]bool, error) {
	defer rows.Close()
	ok := make([]bool, n)
	for rows.Next() {
		var ord int
		if err := rows.Scan(&ord); err != nil {
			return nil, err
		}
		if ord >= 0 && ord < n {
			ok[ord] = true
		}
	}
	return ok, rows.Err()
}

// scanAckRows reads the result of sqlAck: the positions done, and the
// kinds it made items ready of (the rows of position -1).
func scanAckRows(rows rowsReader, n int) (ok []bool, ready []string, err error) {
	defer rows.Close()
	ok = make([]bool, n)
	for rows.Next() {
		var (
			ord  int
			kind *string
		)
		if err := rows.Scan(&ord, &kind); err != nil {
			return nil, nil, err
		}
		switch {
		case ord < 0 && kind != nil:
			ready = append(ready, *kind)
		case ord >= 0 && ord < n:
			ok[ord] = true
		}
	}
	return ok, ready, rows.Err()
}

// WorkHeartbeat sets each held lease to expire d from now, in one
// statement.
func (q *Queue) WorkHeartbeat(ctx context.Context, d time.Duration, refs ...ports.LeaseRef) ([]error, error) {
	if d <= 0 {
		return nil, fmt.Errorf("heartbeat: %w: duration must be positive, got %s", ports.ErrInvalidWork, d)
	}
	res := make([]error, len(refs))
	if len(refs) == 0 {
		return res, nil
	}
	kinds, types, ids, tokens, ords := refArrays(refs)
	q.tids.drop(tokens) // a renewed lease's row moves to another tuple id
	exp := pgTime(q.now().Add(d))
	rows, err := q.db.poolQuery(ctx, hotHeartbeat, kinds, types, ids, tokens, ords, exp)
	if err != nil {
		return nil, fmt.Errorf("heartbeat %d leases: %w", len(refs), err)
	}
	held, err := scanOrds(rows, len(refs))
	if err != nil {
		return nil, fmt.Errorf("heartbeat %d leases: %w", len(refs), err)
	}
	for i, r := range refs {
		if !held[i] {
			res[i] = fmt.Errorf("heartbeat %s: %w", r.Key, ports.ErrLeaseLost)
		}
	}
	return res, nil
}

// WorkAck completes held leases: each item is deleted, or pending again
// (attempts reset, error cleared) when RequeueAt is set or an enqueue
// arrived during the lease, at the earlier of the two.
//
// Most acks end a lease nobody enqueued to meanwhile, with no RequeueAt:
// those items are deleted by one plain DELETE (ackDelete). What it leaves
// (a RequeueAt, a key acked twice in the batch, an enqueue or heartbeat
// that changed the row since the statement's snapshot, a lease lost) goes
// through the full statement (sqlAck), which locks the rows and reads
// them before it decides. Each statement is a transaction of its own;
// every item is acked by exactly one of them or found lost by the second.
func (q *Queue) WorkAck(ctx context.Context, acks ...ports.AckParams) ([]error, error) {
	res := make([]error, len(acks))
	if len(acks) == 0 {
		return res, nil
	}
	_, inTx := ctx.Value(txKey{}).(*ctxTx)
	defer q.tids.drop(ackTokens(acks)) // every lease acked ends here
	done, err := q.ackDelete(ctx, acks, inTx)
	if err != nil {
		return nil, fmt.Errorf("ack %d leases: %w", len(acks), err)
	}
	var rest []int
	for i := range acks {
		if !done[i] {
			rest = append(rest, i)
		}
	}
	if len(rest) > 0 {
		if err := q.ackFull(ctx, acks, rest, done, inTx); err != nil {
			return nil, fmt.Errorf("ack %d leases: %w", len(acks), err)
		}
	}
	for i, a := range acks {
		if !done[i] {
			res[i] = fmt.Errorf("ack %s: %w", a.Lease.Key, ports.ErrLeaseLost)
		}
	}
	return res, nil
}

// ackTokens are the lease tokens of acks.
func ackTokens(acks []ports.AckParams) []int64 {
	out := make([]int64, len(acks))
	for i, a := range acks {
		out[i] = a.Lease.Token
	}
	return out
}

// ackDelete deletes the items of the acks without RequeueAt whose key
// appears once in acks, when their row is still leased under the ack's
// token with no enqueue during the lease: by tuple id for the leases this
// Queue made (tidCache), by key for the others, one statement each (at
// most two). It reports which acks it completed. Each statement takes its
// rows in key order, so rows are locked in key order (as by every batch
// statement).
func (q *Queue) ackDelete(ctx context.Context, acks []ports.AckParams, inTx bool) ([]bool, error) {
	done := make([]bool, len(acks))
	// In key order, a key acked twice is a run of equal keys.
	byKeyOrder := make([]int, len(acks))
	for i := range byKeyOrder {
		byKeyOrder[i] = i
	}
	slices.SortFunc(byKeyOrder, func(a, b int) int { return keyCmp(acks[a].Lease.Key, acks[b].Lease.Key) })
	plain := make([]int, 0, len(acks))
	for j := 0; j < len(byKeyOrder); {
		k := j + 1
		for k < len(byKeyOrder) && acks[byKeyOrder[k]].Lease.Key == acks[byKeyOrder[j]].Lease.Key {
			k++
		}
		if i := byKeyOrder[j]; k == j+1 && acks[i].RequeueAt.IsZero() {
			plain = append(plain, i)
		}
		j = k
	}
	var (
		tids                 []pgtype.TID
		tidTokens            []int64
		byKey                []ports.LeaseRef
		byTidOrds, byKeyOrds []int
	)
	for _, i := range plain {
		ref := acks[i].Lease
		if tid, ok := q.tids.take(ref); ok {
			tids, tidTokens, byTidOrds = append(tids, tid), append(tidTokens, ref.Token), append(byTidOrds, i)
			continue
		}
		byKey, byKeyOrds = append(byKey, ref), append(byKeyOrds, i)
	}
	if len(tids) > 0 {
		stmt := hotAckByTidAsync
		if inTx {
			stmt = hotAckByTid
		}
		if err := q.markOrds(ctx, done, stmt, tids, tidTokens, byTidOrds); err != nil {
			return nil, err
		}
	}
	if len(byKey) > 0 {
		kinds, types, ids, tokens, _ := refArrays(byKey)
		stmt := hotAckDeleteAsync
		if inTx {
			stmt = hotAckDelete
		}
		if err := q.markOrds(ctx, done, stmt, kinds, types, ids, tokens, byKeyOrds); err != nil {
			return nil, err
		}
	}
	return done, nil
}

// markOrds runs a statement that answers positions into done and marks
// each position it answered.
func (q *Queue) markOrds(ctx context.Context, done []bool, stmt string, args ...any) error {
	rows, err := q.db.poolQuery(ctx, stmt, args...)
	if err != nil {
		return err
	}
	ok, err := scanOrds(rows, len(done))
	if err != nil {
		return err
	}
	for i, o := range ok {
		done[i] = done[i] || o
	}
	return nil
}

// ackFull runs the full ack statement (sqlAck) for the acks at positions
// rest, marking in done the ones it completed.
func (q *Queue) ackFull(ctx context.Context, acks []ports.AckParams, rest []int, done []bool, inTx bool) error {
	refs := make([]ports.LeaseRef, len(rest))
	requeueAt := make([]*time.Time, len(rest))
	for j, i := range rest {
		refs[j] = acks[i].Lease
		if !acks[i].RequeueAt.IsZero() {
			at := pgTime(acks[i].RequeueAt)
			requeueAt[j] = &at
		}
	}
	kinds, types, ids, tokens, ords := refArrays(refs)
	stmt := hotAckAsync
	if inTx {
		stmt = hotAck
	}
	rows, err := q.db.poolQuery(ctx, stmt, kinds, types, ids, tokens, requeueAt, ords, q.now())
	if err != nil {
		return err
	}
	ok, ready, err := scanAckRows(rows, len(rest))
	if err != nil {
		return err
	}
	q.madeReady(ctx, ready...)
	for j, i := range rest {
		if ok[j] {
			done[i] = true
		}
	}
	return nil
}

// WorkRetry records a failure of a held lease and reschedules or
// dead-letters the item, in one statement.
func (q *Queue) WorkRetry(ctx context.Context, p ports.RetryParams) error {
	now := q.now()
	k := p.Lease.Key
	q.tids.drop([]int64{p.Lease.Token})
	var state string
	err := q.db.idb(ctx).QueryRowContext(ctx, sqlRetry,
		k.Kind, k.ScopeType, k.ScopeID, p.Lease.Token, p.Err, orNow(p.NotBefore, now), p.Terminal, now).
		Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("retry %s: %w", k, ports.ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("retry %s: %w", k, err)
	}
	if state == "ready" {
		q.madeReady(ctx, k.Kind)
	}
	return nil
}

// WorkGet returns the stored item, or ErrNotFound.
func (q *Queue) WorkGet(ctx context.Context, key ports.WorkKey) (ports.WorkItem, error) {
	rows, err := q.db.idb(ctx).QueryContext(ctx, sqlGet, key.Kind, key.ScopeType, key.ScopeID)
	if err != nil {
		return ports.WorkItem{}, fmt.Errorf("work %s: %w", key, err)
	}
	items, err := scanItems(rows)
	if err != nil {
		return ports.WorkItem{}, fmt.Errorf("work %s: %w", key, err)
	}
	if len(items) == 0 {
		return ports.WorkItem{}, fmt.Errorf("work %s: %w", key, ports.ErrNotFound)
	}
	return items[0], nil
}

// WorkDeadList lists dead items, oldest event first, then by key.
func (q *Queue) WorkDeadList(ctx context.Context, p ports.DeadListParams) ([]ports.WorkItem, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = ports.DefaultDeadListLimit
	}
	rows, err := q.db.idb(ctx).QueryContext(ctx, sqlDeadList, p.Kind, limit)
	if err != nil {
		return nil, fmt.Errorf("dead list: %w", err)
	}
	items, err := scanItems(rows)
	if err != nil {
		return nil, fmt.Errorf("dead list: %w", err)
	}
	return items, nil
}

// WorkRedrive makes a dead item pending and due now with attempts reset.
func (q *Queue) WorkRedrive(ctx context.Context, key ports.WorkKey) error {
	var (
		state    string
		redriven bool
	)
	err := q.db.idb(ctx).QueryRowContext(ctx, sqlRedrive, key.Kind, key.ScopeType, key.ScopeID, q.now()).Scan(&state, &redriven)
	switch {
	case err != nil:
		return fmt.Errorf("redrive %s: %w", key, err)
	case redriven:
		q.madeReady(ctx, key.Kind)
		return nil
	case state == "":
		return fmt.Errorf("redrive %s: %w", key, ports.ErrNotFound)
	}
	return fmt.Errorf("redrive %s: item is %s, not dead: %w", key, portState(state), ports.ErrConflict)
}

// WorkStats counts items by state; every state has an entry.
func (q *Queue) WorkStats(ctx context.Context) (map[ports.WorkState]int, error) {
	rows, err := q.db.idb(ctx).QueryContext(ctx, sqlStats)
	if err != nil {
		return nil, fmt.Errorf("work stats: %w", err)
	}
	defer rows.Close()
	out := map[ports.WorkState]int{ports.WorkPending: 0, ports.WorkLeased: 0, ports.WorkDead: 0}
	for rows.Next() {
		var (
			state string
			n     int
		)
		if err := rows.Scan(&state, &n); err != nil {
			return nil, fmt.Errorf("work stats: %w", err)
		}
		out[portState(state)] += n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("work stats: %w", err)
	}
	return out, nil
}

// WorkKindStats counts items by kind and state; see ports.Queue.
func (q *Queue) WorkKindStats(ctx context.Context) ([]ports.KindStats, error) {
	rows, err := q.db.idb(ctx).QueryContext(ctx, sqlKindStats, q.now())
	if err != nil {
		return nil, fmt.Errorf("work kind stats: %w", err)
	}
	defer rows.Close()
	var out []ports.KindStats
	for rows.Next() {
		var (
			kind, state string
			n           int
			oldest      sql.NullTime
		)
		if err := rows.Scan(&kind, &state, &n, &oldest); err != nil {
			return nil, fmt.Errorf("work kind stats: %w", err)
		}
		st := portState(state)
		if i := len(out) - 1; i >= 0 && out[i].Kind == kind && out[i].State == st {
			// ready and waiting are both pending.
			out[i].Count += n
			if oldest.Valid && (out[i].OldestDue.IsZero() || oldest.Time.Before(out[i].OldestDue)) {
				out[i].OldestDue = oldest.Time
			}
			continue
		}
		ks := ports.KindStats{Kind: kind, State: st, Count: n}
		if oldest.Valid {
			ks.OldestDue = oldest.Time
		}
		out = append(out, ks)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("work kind stats: %w", err)
	}
	ports.SortKindStats(out)
	return out, nil
}

// portState is the port's name of a stored state: ready and waiting items
// are both pending.
func portState(state string) ports.WorkState {
	switch state {
	case "ready", "waiting":
		return ports.WorkPending
	}
	return ports.WorkState(state)
}

// scanItems reads rows of workColumns and closes them.
func scanItems(rows *sql.Rows) ([]ports.WorkItem, error) {
	defer rows.Close()
	var out []ports.WorkItem
	for rows.Next() {
		var (
			it      ports.WorkItem
			state   string
			expires sql.NullTime
		)
		if err := rows.Scan(&it.Key.Kind, &it.Key.ScopeType, &it.Key.ScopeID, &state, &it.Priority, &it.EventTime,
			&it.NotBefore, &it.Attempts, &it.MaxAttempts, &it.LastError, &it.LeaseOwner, &expires, &it.Requeued, &it.Workspace); err != nil {
			return nil, err
		}
		it.State = portState(state)
		it.EventTime, it.NotBefore = it.EventTime.UTC(), it.NotBefore.UTC()
		if expires.Valid {
			it.LeaseExpiresAt = expires.Time.UTC()
		}
		out = append(out, it)
	}
	return out, rows.Err()
}
