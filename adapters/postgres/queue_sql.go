package postgres

// The queue's statements. Placeholders are bun's indexed ?N, rendered into
// the text; arrays arrive through pgdialect.Array. Every statement that
// makes an item due also fires pg_notify(notifyChannel, kind), delivered
// when its transaction commits.

// notifyChannel is the LISTEN/NOTIFY channel of the queue; the payload is
// the kind that may have work due.
const notifyChannel = "reconciler_work"

// sqlEnqueue inserts or coalesces a batch of distinct keys, sorted by key so
// concurrent batches lock rows in one order. ?0..?6 are the arrays kind,
// scope_type, scope_id, priority, event_time, not_before, max_attempts (0:
// not given); ?7 is DefaultMaxAttempts and ?8 now. The conflict branch reads
// the raw max_attempts back from req: excluded holds the defaulted one.
const sqlEnqueue = `
WITH req AS (
	SELECT * FROM unnest(?0::text[], ?1::text[], ?2::text[], ?3::int[], ?4::timestamptz[], ?5::timestamptz[], ?6::int[])
		AS r(kind, scope_type, scope_id, priority, event_time, not_before, max_attempts)
), up AS (
	INSERT INTO reconcile_work_scope AS w (kind, scope_type, scope_id, state, priority, event_time, not_before, max_attempts)
	SELECT kind, scope_type, scope_id, 'pending', priority, event_time, not_before,
		CASE WHEN max_attempts > 0 THEN max_attempts ELSE ?7 END
	FROM req
	ON CONFLICT (kind, scope_type, scope_id) DO UPDATE SET
		priority = greatest(w.priority, excluded.priority),
		event_time = greatest(w.event_time, excluded.event_time),
		max_attempts = greatest(w.max_attempts, (
			SELECT r.max_attempts FROM req r
			WHERE (r.kind, r.scope_type, r.scope_id) = (excluded.kind, excluded.scope_type, excluded.scope_id))),
		not_before = CASE
			WHEN w.state = 'pending' OR (w.state = 'leased' AND w.requeued) THEN least(w.not_before, excluded.not_before)
			ELSE excluded.not_before END,
		attempts = CASE WHEN w.state = 'dead' THEN 0 ELSE w.attempts END,
		requeued = (w.state = 'leased'),
		state = CASE WHEN w.state = 'dead' THEN 'pending' ELSE w.state END
	RETURNING w.kind, w.state, w.not_before
)
SELECT count(*) FROM (SELECT DISTINCT kind FROM up WHERE state = 'pending' AND not_before <= ?8::timestamptz) k
	CROSS JOIN LATERAL pg_notify('` + notifyChannel + `', k.kind)`

// sqlLease claims up to ?2 due items of the kinds ?0 (distinct) at now ?1:
// pending and due, or leased with an expired lease. Expired leases at their
// attempt limit with no enqueue during them are dead-lettered instead, all
// of them, so they never take a claimed item's place. ?3 is the owner, ?4
// the new expiry, ?5 LeaseExpiredError, ?6 how many candidates to consider
// per kind and state.
//
// pre takes each kind's best candidates from its own index (the planner
// picks the priority-ordered index when most pending items are due, the
// not-before one when few are), so no lease sorts a whole backlog; cand
// re-checks them on the locked rows and keeps the best ?2. Both locks use
// SKIP LOCKED: a claim never waits for another, it takes the next items.
const sqlLease = `
WITH pre AS (
	SELECT p.kind, p.scope_type, p.scope_id
	FROM unnest(?0::text[]) AS k(kind)
	CROSS JOIN LATERAL (
		SELECT kind, scope_type, scope_id FROM reconcile_work_scope
		WHERE kind = k.kind AND state = 'pending' AND not_before <= ?1::timestamptz
		ORDER BY priority DESC, event_time, scope_type, scope_id
		LIMIT ?6
	) p
	UNION ALL
	SELECT e.kind, e.scope_type, e.scope_id
	FROM unnest(?0::text[]) AS k(kind)
	CROSS JOIN LATERAL (
		SELECT kind, scope_type, scope_id FROM reconcile_work_scope
		WHERE kind = k.kind AND state = 'leased' AND lease_expires_at <= ?1::timestamptz
			AND (attempts < max_attempts OR requeued)
		ORDER BY priority DESC, event_time, scope_type, scope_id
		LIMIT ?6
	) e
), cand AS (
	SELECT w.kind, w.scope_type, w.scope_id FROM reconcile_work_scope w
	WHERE (w.kind, w.scope_type, w.scope_id) IN (SELECT kind, scope_type, scope_id FROM pre)
		AND ((w.state = 'pending' AND w.not_before <= ?1::timestamptz)
			OR (w.state = 'leased' AND w.lease_expires_at <= ?1::timestamptz
				AND (w.attempts < w.max_attempts OR w.requeued)))
	ORDER BY w.priority DESC, w.event_time, w.kind, w.scope_type, w.scope_id
	LIMIT ?2
	FOR UPDATE OF w SKIP LOCKED
), expired AS (
	SELECT kind, scope_type, scope_id FROM reconcile_work_scope
	WHERE kind = ANY(?0::text[]) AND state = 'leased' AND lease_expires_at <= ?1::timestamptz
		AND attempts >= max_attempts AND NOT requeued
	FOR UPDATE SKIP LOCKED
), dead AS (
	UPDATE reconcile_work_scope w SET
		state = 'dead', last_error = ?5, lease_owner = '', lease_expires_at = NULL
	FROM expired e
	WHERE (w.kind, w.scope_type, w.scope_id) = (e.kind, e.scope_type, e.scope_id)
	RETURNING w.kind
)
UPDATE reconcile_work_scope w SET
	state = 'leased',
	attempts = CASE WHEN w.state = 'leased' AND w.attempts >= w.max_attempts THEN 1 ELSE w.attempts + 1 END,
	last_error = CASE WHEN w.state = 'leased' THEN ?5 ELSE w.last_error END,
	not_before = CASE WHEN w.state = 'leased' THEN least(w.not_before, w.lease_expires_at) ELSE w.not_before END,
	requeued = false,
	lease_owner = ?3,
	lease_token = nextval('reconcile_work_lease_token_seq'),
	lease_expires_at = ?4::timestamptz
FROM cand c
WHERE (w.kind, w.scope_type, w.scope_id) = (c.kind, c.scope_type, c.scope_id)
RETURNING w.kind, w.scope_type, w.scope_id, w.lease_token, w.attempts, w.event_time, w.priority`

// sqlHeartbeat sets the expiry of held leases to ?5. ?0..?4 are the arrays
// kind, scope_type, scope_id, token, position. Rows are locked in key order;
// the result is the positions whose lease was held.
const sqlHeartbeat = `
WITH req AS (
	SELECT * FROM unnest(?0::text[], ?1::text[], ?2::text[], ?3::bigint[], ?4::int[])
		AS r(kind, scope_type, scope_id, token, ord)
), lk AS (
	SELECT w.kind, w.scope_type, w.scope_id FROM reconcile_work_scope w
	WHERE (w.kind, w.scope_type, w.scope_id, w.lease_token) IN (SELECT kind, scope_type, scope_id, token FROM req)
		AND w.state = 'leased'
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
// locked in key order; whether an enqueue arrived during the lease is read
// from the locked row, so a racing enqueue is never missed. The first ack of
// a lease wins; later ones in the batch find it ended. An item with nothing
// pending is deleted; one with a requeue time or an enqueue during the lease
// becomes pending, starting over. The result holds the positions that
// succeeded, and -1 for each kind notified.
const sqlAck = `
WITH req AS (
	SELECT * FROM unnest(?0::text[], ?1::text[], ?2::text[], ?3::bigint[], ?4::timestamptz[], ?5::int[])
		AS r(kind, scope_type, scope_id, token, requeue_at, ord)
), lk AS (
	SELECT w.kind, w.scope_type, w.scope_id, w.lease_token, w.requeued FROM reconcile_work_scope w
	WHERE (w.kind, w.scope_type, w.scope_id, w.lease_token) IN (SELECT kind, scope_type, scope_id, token FROM req)
		AND w.state = 'leased'
	ORDER BY w.kind, w.scope_type, w.scope_id
	FOR UPDATE
), hit AS (
	SELECT DISTINCT ON (r.kind, r.scope_type, r.scope_id) r.kind, r.scope_type, r.scope_id, r.requeue_at, r.ord, lk.requeued
	FROM req r JOIN lk ON (r.kind, r.scope_type, r.scope_id, r.token) = (lk.kind, lk.scope_type, lk.scope_id, lk.lease_token)
	ORDER BY r.kind, r.scope_type, r.scope_id, r.ord
), del AS (
	DELETE FROM reconcile_work_scope w USING hit h
	WHERE (w.kind, w.scope_type, w.scope_id) = (h.kind, h.scope_type, h.scope_id)
		AND NOT h.requeued AND h.requeue_at IS NULL
	RETURNING h.ord
), upd AS (
	UPDATE reconcile_work_scope w SET
		state = 'pending',
		not_before = CASE
			WHEN NOT h.requeued THEN h.requeue_at
			WHEN h.requeue_at IS NULL THEN w.not_before
			ELSE least(w.not_before, h.requeue_at) END,
		attempts = 0, last_error = '', lease_owner = '', lease_expires_at = NULL, requeued = false
	FROM hit h
	WHERE (w.kind, w.scope_type, w.scope_id) = (h.kind, h.scope_type, h.scope_id)
		AND (h.requeued OR h.requeue_at IS NOT NULL)
	RETURNING h.ord, w.kind, w.not_before
)
SELECT ord FROM del
UNION ALL SELECT ord FROM upd
UNION ALL SELECT -1 FROM (SELECT DISTINCT kind FROM upd WHERE not_before <= ?6::timestamptz) k
	CROSS JOIN LATERAL pg_notify('` + notifyChannel + `', k.kind)`

// sqlRetry fails one held lease (?0..?3 kind, scope_type, scope_id, token)
// with error ?4, not-before ?5, terminal ?6, at now ?7. Exhausted (terminal,
// or out of attempts) it goes dead, unless an enqueue arrived during the
// lease: then it is pending at that enqueue's not-before with a fresh
// budget. Otherwise it is pending at the earlier of ?5 and any enqueue's.
// The result is the new state, or no row when the lease was not held.
const sqlRetry = `
WITH upd AS (
	UPDATE reconcile_work_scope w SET
		state = CASE WHEN w.requeued OR NOT (?6 OR w.attempts >= w.max_attempts) THEN 'pending' ELSE 'dead' END,
		not_before = CASE
			WHEN ?6 OR w.attempts >= w.max_attempts THEN w.not_before
			WHEN w.requeued THEN least(w.not_before, ?5::timestamptz)
			ELSE ?5::timestamptz END,
		attempts = CASE WHEN w.requeued AND (?6 OR w.attempts >= w.max_attempts) THEN 0 ELSE w.attempts END,
		last_error = ?4, lease_owner = '', lease_expires_at = NULL, requeued = false
	WHERE (w.kind, w.scope_type, w.scope_id) = (?0, ?1, ?2) AND w.state = 'leased' AND w.lease_token = ?3
	RETURNING w.kind, w.state, w.not_before
)
SELECT state, (SELECT count(*) FROM (SELECT kind FROM upd WHERE state = 'pending' AND not_before <= ?7::timestamptz) k
	CROSS JOIN LATERAL pg_notify('` + notifyChannel + `', k.kind))
FROM upd`

// sqlRedrive makes dead item ?0..?2 pending, due at now ?3, attempts reset.
// The result is the state the item had (” when missing) and whether it was
// redriven.
const sqlRedrive = `
WITH cur AS (
	SELECT state FROM reconcile_work_scope WHERE (kind, scope_type, scope_id) = (?0, ?1, ?2)
), upd AS (
	UPDATE reconcile_work_scope SET state = 'pending', not_before = ?3::timestamptz, attempts = 0
	WHERE (kind, scope_type, scope_id) = (?0, ?1, ?2) AND state = 'dead'
	RETURNING kind
)
SELECT coalesce((SELECT state FROM cur), ''),
	(SELECT count(*) FROM upd u CROSS JOIN LATERAL pg_notify('` + notifyChannel + `', u.kind)) > 0`

// workColumns are the columns scanItem reads, in order.
const workColumns = `kind, scope_type, scope_id, state, priority, event_time, not_before, attempts,
	max_attempts, last_error, lease_owner, lease_expires_at, requeued`

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
