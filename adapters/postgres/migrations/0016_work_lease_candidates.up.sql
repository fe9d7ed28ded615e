-- A lease's candidates (the lease statement of queue_sql.go reads them
-- through this function): for each kind of p_kinds, up to p_limit ready
-- items in lease order, up to p_scan due waiting items above the kind's
-- floor (p_floors) by not-before, and up to p_scan expired leases above it
-- by expiry, each locked with SKIP LOCKED.
--
-- Each is read in the order of its own index, so a lease reads the rows it
-- claims, however long the backlog. Planned from statistics taken while a
-- kind had few items (or before any were taken), the planner would rather
-- read all of a kind's ready items with a bitmap scan and sort them, on
-- every lease until the next ANALYZE: a backlog that grew faster than
-- autovacuum looked made each lease read the whole backlog. The planner
-- settings below rule those plans out for this function's query only.
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
