package postgres

import "strings"

// The queue's statements. Placeholders are bun's indexed ?N, rendered into
// the text by bun; the hot ones (enqueue, lease, heartbeat, ack) run through
// hotQuery as prepared statements, rewritten to $N by dollarParams. Every statement that
// makes an item due answers the kinds it made ready; the Queue publishes
// them on notifyChannel once the statement's transaction has committed,
// in a transaction of its own (see publisher): none of these statements
// notifies.

// notifyChannel is the LISTEN/NOTIFY channel of the queue; the payload is
// the kind that may have work due.
const notifyChannel = "reconciler_work"

// sqlEnqueue inserts or coalesces a batch of distinct keys, sorted by key so
// concurrent batches lock rows in one order. ?0..?6 are the arrays kind,
// scope_type, scope_id, priority, event_time, not_before, max_attempts (0:
// not given); ?7 is DefaultMaxAttempts, ?8 now and ?9 the array workspace
// (kept by a coalescing enqueue: an item does not move between workspaces)
// and ?10 the array traceparent (empty when the enqueue was not traced; a
// traced enqueue replaces the item's, an untraced one keeps it). The conflict branch reads
// the raw max_attempts back from req: excluded holds the defaulted one. An
// item is stored ready when its not-before is due, waiting otherwise. The
// result is the kinds of the items stored ready.
const sqlEnqueue = `
WITH req AS (
	SELECT * FROM unnest(?0::text[], ?1::text[], ?2::text[], ?3::int[], ?4::timestamptz[], ?5::timestamptz[], ?6::int[], ?9::text[],
		?10::text[])
		AS r(kind, scope_type, scope_id, priority, event_time, not_before, max_attempts, workspace, traceparent)
), up AS (
	INSERT INTO reconcile_work_scope AS w (kind, scope_type, scope_id, state, priority, event_time, not_before, max_attempts, workspace,
		traceparent)
	SELECT kind, scope_type, scope_id, CASE WHEN not_before <= ?8::timestamptz THEN 'ready' ELSE 'waiting' END,
		priority, event_time, not_before, CASE WHEN max_attempts > 0 THEN max_attempts ELSE ?7 END, workspace, traceparent
	FROM req
	ON CONFLICT (kind, scope_type, scope_id) DO UPDATE SET
		traceparent = CASE WHEN excluded.traceparent <> '' THEN excluded.traceparent ELSE w.traceparent END,
		priority = greatest(w.priority, excluded.priority),
		event_time = greatest(w.event_time, excluded.event_time),
		max_attempts = greatest(w.max_attempts, (
			SELECT r.max_attempts FROM req r
			WHERE (r.kind, r.scope_type, r.scope_id) = (excluded.kind, excluded.scope_type, excluded.scope_id))),
		not_before = CASE
			WHEN w.state IN ('ready', 'waiting') OR w.requeued THEN least(w.not_before, excluded.not_before)
			ELSE excluded.not_before END,
		attempts = CASE WHEN w.state = 'dead' THEN 0 ELSE w.attempts END,
		requeued = (w.state = 'leased'),
		state = CASE
			WHEN w.state = 'leased' THEN 'leased'
			WHEN w.state <> 'dead' AND w.not_before <= ?8::timestamptz THEN 'ready'
			WHEN excluded.not_before <= ?8::timestamptz THEN 'ready'
			ELSE 'waiting' END
	RETURNING w.kind, w.state
)
SELECT DISTINCT kind FROM up WHERE state = 'ready'`

// sqlLease claims up to ?3 due items of the kinds ?0 (distinct) at now ?2,
// highest priority, then oldest event, then key first. Due are ready items,
// waiting items whose not-before has come, and expired leases. ?4 is the
// owner, ?5 the new expiry, ?6 LeaseExpiredError, ?7 the most waiting items
// and expired leases it reads per kind.
//
// Each kind's candidates come from its own index, read in index order
// whatever the table's statistics say (reconcile_work_candidates, migration
// 0016), and are locked there with
// SKIP LOCKED (a claim never waits; it takes the next items), so the locks
// sit right on index scans: a row another claim changed meanwhile is
// rechecked alone, never by re-running a join. Ready items are read in
// lease order, just as many as the claim wants. Waiting and expired ones
// are read only above the kind's floor ?1 (waiting items are written with
// a not-before past the writer's now, leases with an expiry past it, so
// what lies below a recent floor was dealt with by an earlier lease; the
// caller sends no floor now and then to catch stragglers).
//
// The update finds each candidate by the tuple id its lock returned (the
// row's current version, which nobody else can change while this
// statement holds its lock), not by a second primary-key lookup.
//
// The lease is fair between workspaces (ports.Queue.WorkLease): each
// candidate is ranked within its workspace, and the candidates within their
// workspace's share (ports.FairShare of ?3 over the workspaces with leasable
// candidates) come before the rest, each group in lease order.
//
// In one update the best ?3 leasable candidates are leased, the other due
// waiting items become ready (so the waiting index never piles up due
// items), and expired leases at their attempt limit with no enqueue during
// them are dead-lettered. Expired leases that did not make the cut stay
// leased: their holder may still finish. The result is the leases, then
// one row with an empty scope type for each kind whose waiting items and
// expired leases up to now were all dealt with, so its floor may rise.
// Each lease comes with the tuple id the update left its row at (see
// tidCache) and whether it took over an expired lease (ports.Lease.Reclaimed).
//
// An expired lease whose owner's liveness row is fresh (process_liveness,
// ports.Liveness) is no candidate: its process is alive, however late its
// renewals, so its lease is neither taken nor dead-lettered (Queue.reap
// makes a lapsed owner's leases due at once).
const sqlLease = `
WITH k AS (
	SELECT * FROM unnest(?0::text[], ?1::timestamptz[]) AS k(kind, floor)
), cand AS (
	SELECT * FROM reconcile_work_candidates(?0::text[], ?1::timestamptz[], ?2::timestamptz, ?3::int, ?7::int) c
	-- The owner is read by the candidate's tid in a scalar subquery (a TID
	-- scan per expired candidate): as a join, the planner may hash the
	-- whole work table for the anti-join.
	WHERE c.src <> 'expired' OR NOT EXISTS (
		SELECT FROM process_liveness pl
		WHERE pl.owner = (SELECT o.lease_owner FROM reconcile_work_scope o WHERE o.ctid = c.tid)
		  AND pl.alive_until > ?2::timestamptz)
), share AS (
	SELECT (?3::int + greatest(count(DISTINCT workspace), 1) - 1) / greatest(count(DISTINCT workspace), 1) AS n
	FROM cand WHERE leasable
), wranked AS (
	SELECT cand.*, row_number() OVER (
		PARTITION BY leasable, workspace ORDER BY priority DESC, event_time, kind COLLATE "C", scope_type COLLATE "C",
			scope_id COLLATE "C") AS wrank
	FROM cand
), ranked AS (
	SELECT wranked.*, leasable AND row_number() OVER (
		PARTITION BY leasable ORDER BY wrank > (SELECT n FROM share), priority DESC, event_time, kind COLLATE "C",
			scope_type COLLATE "C", scope_id COLLATE "C") <= ?3 AS take
	FROM wranked
), upd AS (
	UPDATE reconcile_work_scope w SET
		state = CASE WHEN r.take THEN 'leased' WHEN r.src = 'waiting' THEN 'ready' ELSE 'dead' END,
		attempts = CASE
			WHEN NOT r.take THEN w.attempts
			WHEN r.src = 'expired' AND w.attempts >= w.max_attempts THEN 1
			ELSE w.attempts + 1 END,
		last_error = CASE WHEN r.src = 'expired' THEN ?6 ELSE w.last_error END,
		not_before = CASE WHEN r.src = 'expired' AND r.take THEN least(w.not_before, w.lease_expires_at) ELSE w.not_before END,
		requeued = false,
		lease_owner = CASE WHEN r.take THEN ?4 ELSE '' END,
		lease_token = CASE WHEN r.take THEN nextval('reconcile_work_lease_token_seq') ELSE w.lease_token END,
		lease_expires_at = CASE WHEN r.take THEN ?5::timestamptz END
	FROM ranked r
	WHERE w.ctid = r.tid
		AND (r.take OR r.src = 'waiting' OR NOT r.leasable)
	RETURNING w.kind, w.scope_type, w.scope_id, w.state, w.lease_token, w.attempts, w.event_time, w.priority, w.ctid,
		r.src = 'expired' AS reclaimed, w.traceparent
)
SELECT kind, scope_type, scope_id, lease_token, attempts, event_time, priority, ctid, reclaimed, traceparent FROM upd
WHERE state = 'leased'
UNION ALL
SELECT k.kind, '', '', 0, 0, ?2::timestamptz, 0, NULL::tid, false, '' FROM k
WHERE (SELECT count(*) FROM cand c WHERE c.kind = k.kind AND c.src = 'waiting') < ?7
	AND (SELECT count(*) FROM cand c WHERE c.kind = k.kind AND c.src = 'expired') < ?7
	AND NOT EXISTS (SELECT FROM ranked r WHERE r.kind = k.kind AND r.src = 'expired' AND r.leasable AND NOT r.take)`

// sqlHeartbeat sets the expiry of held leases to ?5. ?0..?4 are the arrays
// kind, scope_type, scope_id, token, position. Rows are found by primary key
// and locked in key order; "leased" is tested as lease_expires_at IS NOT
// NULL (the same, by a CHECK), so the planner never mistakes the leased
// index for a key lookup. The result is the positions whose lease was held.
const sqlHeartbeat = `
WITH req AS (
	SELECT * FROM unnest(?0::text[], ?1::text[], ?2::text[], ?3::bigint[], ?4::int[])
		AS r(kind, scope_type, scope_id, token, ord)
), lk AS (
	SELECT w.kind, w.scope_type, w.scope_id, w.lease_token FROM reconcile_work_scope w
	WHERE (w.kind, w.scope_type, w.scope_id, w.lease_token) IN (SELECT kind, scope_type, scope_id, token FROM req)
		AND w.lease_expires_at IS NOT NULL
	ORDER BY w.kind, w.scope_type, w.scope_id
	FOR UPDATE
), upd AS (
	UPDATE reconcile_work_scope w SET lease_expires_at = ?5::timestamptz
	FROM lk
	WHERE (w.kind, w.scope_type, w.scope_id) = (lk.kind, lk.scope_type, lk.scope_id)
	RETURNING w.kind, w.scope_type, w.scope_id, w.lease_token
)
SELECT r.ord FROM req r JOIN upd u
	ON (r.kind, r.scope_type, r.scope_id, r.token) = (u.kind, u.scope_type, u.scope_id, u.lease_token)`

// sqlAck completes held leases. ?0..?5 are the arrays kind, scope_type,
// scope_id, token, requeue_at (NULL: none), position; ?6 is now. Rows are
// found by primary key (see sqlHeartbeat) and locked in key order; whether
// an enqueue arrived during the lease is read from the locked row, so a
// racing enqueue is never missed. The first ack of a lease wins; later ones
// in the batch find it ended. An item with nothing pending is deleted; one
// with a requeue time or an enqueue during the lease is pending again,
// starting over, ready or waiting by its new not-before. The result holds
// the positions that succeeded (with a NULL kind), and -1 with each kind
// that an item was made ready of.
const sqlAck = `
WITH req AS (
	SELECT * FROM unnest(?0::text[], ?1::text[], ?2::text[], ?3::bigint[], ?4::timestamptz[], ?5::int[])
		AS r(kind, scope_type, scope_id, token, requeue_at, ord)
), lk AS (
	SELECT w.kind, w.scope_type, w.scope_id, w.lease_token, w.requeued, w.not_before FROM reconcile_work_scope w
	WHERE (w.kind, w.scope_type, w.scope_id, w.lease_token) IN (SELECT kind, scope_type, scope_id, token FROM req)
		AND w.lease_expires_at IS NOT NULL
	ORDER BY w.kind, w.scope_type, w.scope_id
	FOR UPDATE
), hit AS (
	SELECT DISTINCT ON (r.kind, r.scope_type, r.scope_id) r.kind, r.scope_type, r.scope_id, r.ord,
		lk.requeued OR r.requeue_at IS NOT NULL AS keep,
		CASE
			WHEN NOT lk.requeued THEN r.requeue_at
			WHEN r.requeue_at IS NULL THEN lk.not_before
			ELSE least(lk.not_before, r.requeue_at) END AS not_before
	FROM req r JOIN lk ON (r.kind, r.scope_type, r.scope_id, r.token) = (lk.kind, lk.scope_type, lk.scope_id, lk.lease_token)
	ORDER BY r.kind, r.scope_type, r.scope_id, r.ord
), del AS (
	DELETE FROM reconcile_work_scope w USING hit h
	WHERE (w.kind, w.scope_type, w.scope_id) = (h.kind, h.scope_type, h.scope_id) AND NOT h.keep
	RETURNING h.ord
), upd AS (
	UPDATE reconcile_work_scope w SET
		state = CASE WHEN h.not_before <= ?6::timestamptz THEN 'ready' ELSE 'waiting' END,
		not_before = h.not_before,
		attempts = 0, last_error = '', lease_owner = '', lease_expires_at = NULL, requeued = false
	FROM hit h
	WHERE (w.kind, w.scope_type, w.scope_id) = (h.kind, h.scope_type, h.scope_id) AND h.keep
	RETURNING h.ord, w.kind, w.state
)
SELECT ord, NULL::text FROM del
UNION ALL SELECT ord, NULL FROM upd
UNION ALL SELECT -1, kind FROM (SELECT DISTINCT kind FROM upd WHERE state = 'ready') k`

// sqlAckDelete deletes the items of acked leases that need nothing else
// (see Queue.ackDelete). ?0..?4 are the arrays kind, scope_type, scope_id,
// token, position, in key order. The function of migration 0018
// (reconcile_work_ack_delete_keys) finds each row by primary key, never by
// scanning the table whatever its statistics say, locks the rows in the
// arrays' order (key order, as every batch statement takes them: an ack
// that took them in the table's order deadlocked with enqueues), and
// deletes each by its tuple id: a row that another transaction changed
// since the statement's snapshot (an enqueue during the lease, a
// heartbeat) has a new tuple id, so it is left for the full ack, as is a
// lease no longer held. The result is the positions deleted.
const sqlAckDelete = `
WITH del AS (
	SELECT d AS ord FROM reconcile_work_ack_delete_keys(?0::text[], ?1::text[], ?2::text[], ?3::bigint[], ?4::int[]) AS d
)
SELECT ord FROM del`

// sqlAckDeleteByTid is sqlAckDelete for leases whose row's tuple id this
// Queue knows from the lease (tidCache): ?0..?2 are the arrays tuple id,
// token, position, in the leases' key order. The function of migration
// 0018 (reconcile_work_ack_delete_tids) reads each row by its tuple id,
// locks them in the arrays' order and deletes each only while it still
// holds that lease (its token, unique to the lease; leased; no enqueue
// during it; the key was checked against the lease's by the cache), as
// sqlAckDelete does; a row changed since has moved to another tuple id and
// is left for the full ack.
const sqlAckDeleteByTid = `
WITH del AS (
	SELECT d AS ord FROM reconcile_work_ack_delete_tids(?0::tid[], ?1::bigint[], ?2::int[]) AS d
)
SELECT ord FROM del`

// sqlRetry fails one held lease (?0..?3 kind, scope_type, scope_id, token)
// with error ?4, not-before ?5, terminal ?6, at now ?7. Exhausted (terminal,
// or out of attempts) it goes dead, unless an enqueue arrived during the
// lease: then it is pending at that enqueue's not-before with a fresh
// budget. Otherwise it is pending at the earlier of ?5 and any enqueue's:
// ready or waiting by that not-before. The row is found by primary key (see
// sqlHeartbeat). The result is the new state, or no row when the lease was
// not held.
const sqlRetry = `
WITH upd AS (
	UPDATE reconcile_work_scope w SET
		state = CASE
			WHEN NOT w.requeued AND (?6 OR w.attempts >= w.max_attempts) THEN 'dead'
			WHEN (CASE
				WHEN ?6 OR w.attempts >= w.max_attempts THEN w.not_before
				WHEN w.requeued THEN least(w.not_before, ?5::timestamptz)
				ELSE ?5::timestamptz END) <= ?7::timestamptz THEN 'ready'
			ELSE 'waiting' END,
		not_before = CASE
			WHEN ?6 OR w.attempts >= w.max_attempts THEN w.not_before
			WHEN w.requeued THEN least(w.not_before, ?5::timestamptz)
			ELSE ?5::timestamptz END,
		attempts = CASE WHEN w.requeued AND (?6 OR w.attempts >= w.max_attempts) THEN 0 ELSE w.attempts END,
		last_error = ?4, lease_owner = '', lease_expires_at = NULL, requeued = false
	WHERE (w.kind, w.scope_type, w.scope_id) = (?0, ?1, ?2) AND w.lease_expires_at IS NOT NULL AND w.lease_token = ?3
	RETURNING w.state
)
SELECT state FROM upd`

// sqlRedrive makes dead item ?0..?2 ready, due at now ?3, attempts reset.
// The result is the state the item had (” when missing) and whether it was
// redriven.
const sqlRedrive = `
WITH cur AS (
	SELECT state FROM reconcile_work_scope WHERE (kind, scope_type, scope_id) = (?0, ?1, ?2)
), upd AS (
	UPDATE reconcile_work_scope SET state = 'ready', not_before = ?3::timestamptz, attempts = 0
	WHERE (kind, scope_type, scope_id) = (?0, ?1, ?2) AND state = 'dead'
	RETURNING kind
)
SELECT coalesce((SELECT state FROM cur), ''), EXISTS (SELECT FROM upd)`

// workColumns are the columns scanItem reads, in order.
const workColumns = `kind, scope_type, scope_id, state, priority, event_time, not_before, attempts,
	max_attempts, last_error, lease_owner, lease_expires_at, requeued, workspace`

// sqlGet reads one item by key ?0..?2.
const sqlGet = `SELECT ` + workColumns + ` FROM reconcile_work_scope WHERE (kind, scope_type, scope_id) = (?0, ?1, ?2)`

// sqlDeadList lists dead items, oldest event first, of kind ?0 (” for
// all), at most ?1.
const sqlDeadList = `SELECT ` + workColumns + ` FROM reconcile_work_scope
WHERE state = 'dead' AND (?0 = '' OR kind = ?0)
ORDER BY event_time, kind, scope_type, scope_id
LIMIT ?1`

// sqlStats counts items by state.
const sqlStats = `SELECT state, count(*) FROM reconcile_work_scope GROUP BY state`

// sqlKindStats counts items by kind and stored state, with the earliest
// not-before of the pending ones due at the parameter; ready and waiting rows of a
// kind come next to each other.
const sqlKindStats = `SELECT kind, state, count(*),
  min(not_before) FILTER (WHERE state IN ('ready', 'waiting') AND not_before <= ?)
FROM reconcile_work_scope GROUP BY kind, state
ORDER BY kind, CASE state WHEN 'ready' THEN 'pending' WHEN 'waiting' THEN 'pending' ELSE state END`

// sqlReap makes the unexpired leases of the owners whose liveness row
// lapsed by ?0 expire at ?0, so a lease reclaims them at once.
//
// It finds them by the lapsed owners (process_liveness is small) through the
// leased items' owner index (migration 0026), never by reading the work
// table: a join may hash the whole table.
const sqlReap = `UPDATE reconcile_work_scope w SET lease_expires_at = ?0::timestamptz
WHERE w.state = 'leased' AND w.lease_expires_at > ?0::timestamptz
	AND w.lease_owner IN (SELECT pl.owner FROM process_liveness pl WHERE pl.alive_until <= ?0::timestamptz)`

// The hot statements, with $N parameters (see DB.hotQuery).
var (
	hotEnqueue   = dollarParams(sqlEnqueue)
	hotLease     = dollarParams(sqlLease)
	hotHeartbeat = dollarParams(sqlHeartbeat)
	hotAck       = dollarParams(sqlAck)
	hotAckDelete = dollarParams(sqlAckDelete)
	hotReap      = dollarParams(sqlReap)
	hotAckByTid  = dollarParams(sqlAckDeleteByTid)
	// hotLeaseAsync and hotAckAsync are the lease and the ack committing
	// without waiting for the WAL flush (asyncCommit), for a call outside
	// a caller's transaction.
	hotLeaseAsync = dollarParams(asyncCommit(sqlLease))
	hotAckAsync   = dollarParams(asyncCommit(sqlAck))
	// hotAckDeleteAsync is sqlAckDelete committing the same way.
	hotAckDeleteAsync = dollarParams(asyncCommit(sqlAckDelete))
	hotAckByTidAsync  = dollarParams(asyncCommit(sqlAckDeleteByTid))
)

// asyncCommit makes a statement of the form "WITH ... SELECT ..." (run as
// a transaction of its own) commit without waiting for the WAL flush
// (synchronous_commit off for that transaction only): a lease or an ack
// the server loses in a crash leaves the item pending or leased as before,
// so it runs again, which passes allow (they are idempotent and complete
// only under their own lease); and any later durable commit flushes it
// anyway. A pass's own writes and the enqueues are never made this way.
func asyncCommit(q string) string {
	const with = "\nWITH "
	i := strings.Index(q, with)
	if i < 0 {
		panic("asyncCommit: no WITH")
	}
	q = q[:i] + "\nWITH async AS (SELECT set_config('synchronous_commit', 'off', true) AS v),\n" + q[i+len(with):]
	const sel = "\nSELECT "
	j := strings.Index(q, sel)
	if j < 0 {
		panic("asyncCommit: no final SELECT")
	}
	// The first branch of the final SELECT reads the setting, so it is
	// set before the commit whenever the statement wrote.
	k := strings.Index(q[j:], " FROM ")
	return q[:j+k] + " FROM async, " + q[j+k+len(" FROM "):]
}
