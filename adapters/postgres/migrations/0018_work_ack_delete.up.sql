-- The plain acks (the ack statements of queue_sql.go call these): delete
-- the rows of held leases that need nothing else, found by tuple id
-- (reconcile_work_ack_delete_tids) or by key (reconcile_work_ack_delete_keys)
-- and locked first in the order of the arrays, which the caller passes in
-- key order, as every batch statement takes its rows (taken in any other
-- order, they deadlocked with enqueues). Each returns the positions (p_ords)
-- it deleted.
--
-- Each row is read by its tuple id or its primary key, never by scanning
-- the table. Planned from statistics taken while the table was small (a
-- connection caches its plan until the next ANALYZE), the planner would
-- rather scan the table once per ack, or once per acked row by key, however
-- much it grew meanwhile. The planner settings below rule those plans out
-- for these functions' queries only.
CREATE FUNCTION reconcile_work_ack_delete_tids(p_tids tid[], p_tokens bigint[], p_ords integer[])
RETURNS SETOF integer
LANGUAGE plpgsql VOLATILE
ROWS 100
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
BEGIN
    RETURN QUERY
    WITH lk AS (
        SELECT w.ctid AS tid, r.ord FROM unnest(p_tids, p_tokens, p_ords) WITH ORDINALITY AS r(tid, token, ord, n)
        JOIN reconcile_work_scope w ON w.ctid = r.tid
        WHERE w.lease_token = r.token AND w.lease_expires_at IS NOT NULL AND NOT w.requeued
        ORDER BY r.n
        FOR UPDATE OF w
    ), del AS (
        DELETE FROM reconcile_work_scope w USING lk
        WHERE w.ctid = lk.tid
        RETURNING lk.ord
    )
    SELECT del.ord FROM del;
END
$$;

CREATE FUNCTION reconcile_work_ack_delete_keys(p_kinds text[], p_scope_types text[], p_scope_ids text[],
    p_tokens bigint[], p_ords integer[])
RETURNS SETOF integer
LANGUAGE plpgsql VOLATILE
ROWS 100
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
BEGIN
    RETURN QUERY
    WITH lk AS (
        SELECT w.ctid AS tid, r.ord
        FROM unnest(p_kinds, p_scope_types, p_scope_ids, p_tokens, p_ords) WITH ORDINALITY
            AS r(kind, scope_type, scope_id, token, ord, n)
        JOIN reconcile_work_scope w ON (w.kind, w.scope_type, w.scope_id) = (r.kind, r.scope_type, r.scope_id)
        WHERE w.lease_token = r.token AND w.lease_expires_at IS NOT NULL AND NOT w.requeued
        ORDER BY r.n
        FOR UPDATE OF w
    ), del AS (
        DELETE FROM reconcile_work_scope w USING lk
        WHERE w.ctid = lk.tid
        RETURNING lk.ord
    )
    SELECT del.ord FROM del;
END
$$;
