DROP INDEX reconcile_work_scope_owner_idx;

DROP FUNCTION reconcile_work_candidates(text[], timestamptz[], timestamptz, integer, integer);
CREATE FUNCTION reconcile_work_candidates(p_kinds text[], p_floors timestamptz[], p_now timestamptz,
    p_limit integer, p_scan integer)
RETURNS TABLE (tid tid, kind text, scope_type text, scope_id text, priority integer, event_time timestamptz,
    src text, leasable boolean)
LANGUAGE plpgsql VOLATILE
-- Few rows, as far as the lease statement's plan is concerned: it finds
-- each candidate's row by tuple id (a TID scan per candidate), never by
-- hashing the whole table, which a thousand rows (the default) would make
-- look cheaper.
ROWS 10
SET enable_bitmapscan = off
SET enable_seqscan = off
SET enable_sort = off
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH k AS (
        SELECT u.kind, u.floor FROM unnest(p_kinds, p_floors) AS u(kind, floor)
    )
    SELECT c.tid, c.kind, c.scope_type, c.scope_id, c.priority, c.event_time, 'ready'::text, true
    FROM k CROSS JOIN LATERAL (
        SELECT w.ctid AS tid, w.kind, w.scope_type, w.scope_id, w.priority, w.event_time FROM reconcile_work_scope w
        WHERE w.kind = k.kind AND w.state = 'ready' AND w.not_before <= p_now
        ORDER BY w.priority DESC, w.event_time, w.scope_type, w.scope_id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ) c
    UNION ALL
    SELECT c.tid, c.kind, c.scope_type, c.scope_id, c.priority, c.event_time, 'waiting'::text, true
    FROM k CROSS JOIN LATERAL (
        SELECT w.ctid AS tid, w.kind, w.scope_type, w.scope_id, w.priority, w.event_time FROM reconcile_work_scope w
        WHERE w.kind = k.kind AND w.state = 'waiting' AND w.not_before > k.floor AND w.not_before <= p_now
        ORDER BY w.not_before
        LIMIT p_scan
        FOR UPDATE SKIP LOCKED
    ) c
    UNION ALL
    SELECT c.tid, c.kind, c.scope_type, c.scope_id, c.priority, c.event_time, 'expired'::text,
        c.attempts < c.max_attempts OR c.requeued
    FROM k CROSS JOIN LATERAL (
        SELECT w.ctid AS tid, w.kind, w.scope_type, w.scope_id, w.priority, w.event_time, w.attempts, w.max_attempts,
            w.requeued
        FROM reconcile_work_scope w
        WHERE w.kind = k.kind AND w.state = 'leased' AND w.lease_expires_at > k.floor AND w.lease_expires_at <= p_now
        ORDER BY w.lease_expires_at
        LIMIT p_scan
        FOR UPDATE SKIP LOCKED
    ) c;
END
$$;

DROP INDEX reconcile_work_scope_ready_idx;
CREATE INDEX reconcile_work_scope_ready_idx ON reconcile_work_scope
    (kind, priority DESC, event_time, scope_type, scope_id)
    WHERE state = 'ready';

ALTER TABLE reconcile_work_scope DROP COLUMN workspace;
