-- Per-workspace fairness in the lease (ports.Queue.WorkLease): each item
-- names the workspace it belongs to ('' is the shared one), the ready index
-- leads with it, and a lease's candidates are read per workspace, so a
-- workspace with a huge backlog cannot hide a small one's items from it.
ALTER TABLE reconcile_work_scope ADD COLUMN workspace text COLLATE "C" NOT NULL DEFAULT '';

-- Backfill the release chain's target items: the workspace of the target's
-- deployment's system. Other items stay in the shared workspace until their
-- next enqueue after they are done.
UPDATE reconcile_work_scope w SET workspace = s.workspace_id
FROM release_deployments d JOIN release_systems s ON s.id = d.system_id
WHERE w.scope_type = 'release-target' AND d.id = split_part(w.scope_id, ':', 1);

DROP INDEX reconcile_work_scope_ready_idx;
CREATE INDEX reconcile_work_scope_ready_idx ON reconcile_work_scope
    (kind, workspace, priority DESC, event_time, scope_type, scope_id)
    WHERE state = 'ready';

-- As in migration 0016, with the ready items read per workspace: the
-- workspaces with ready items of a kind are found by skipping through the
-- ready index (one probe per workspace), and each gives up to p_limit items
-- in lease order, so the lease statement can share p_limit fairly. With
-- one workspace this reads what 0016 read.
DROP FUNCTION reconcile_work_candidates(text[], timestamptz[], timestamptz, integer, integer);
CREATE FUNCTION reconcile_work_candidates(p_kinds text[], p_floors timestamptz[], p_now timestamptz,
    p_limit integer, p_scan integer)
RETURNS TABLE (tid tid, kind text, scope_type text, scope_id text, priority integer, event_time timestamptz,
    src text, leasable boolean, workspace text)
LANGUAGE plpgsql VOLATILE
ROWS 10
SET enable_bitmapscan = off
SET enable_seqscan = off
SET enable_sort = off
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH RECURSIVE k AS (
        SELECT u.kind, u.floor FROM unnest(p_kinds, p_floors) AS u(kind, floor)
    ), ws AS (
        SELECT k.kind, (SELECT w.workspace FROM reconcile_work_scope w
            WHERE w.kind = k.kind AND w.state = 'ready' ORDER BY w.workspace LIMIT 1) AS workspace
        FROM k
        UNION ALL
        SELECT ws.kind, (SELECT w.workspace FROM reconcile_work_scope w
            WHERE w.kind = ws.kind AND w.state = 'ready' AND w.workspace > ws.workspace ORDER BY w.workspace LIMIT 1)
        FROM ws WHERE ws.workspace IS NOT NULL
    )
    SELECT c.tid, c.kind, c.scope_type, c.scope_id, c.priority, c.event_time, 'ready'::text, true, c.workspace
    FROM ws CROSS JOIN LATERAL (
        SELECT w.ctid AS tid, w.kind, w.scope_type, w.scope_id, w.priority, w.event_time, w.workspace
        FROM reconcile_work_scope w
        WHERE w.kind = ws.kind AND w.workspace = ws.workspace AND w.state = 'ready' AND w.not_before <= p_now
        ORDER BY w.priority DESC, w.event_time, w.scope_type, w.scope_id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ) c
    WHERE ws.workspace IS NOT NULL
    UNION ALL
    SELECT c.tid, c.kind, c.scope_type, c.scope_id, c.priority, c.event_time, 'waiting'::text, true, c.workspace
    FROM k CROSS JOIN LATERAL (
        SELECT w.ctid AS tid, w.kind, w.scope_type, w.scope_id, w.priority, w.event_time, w.workspace
        FROM reconcile_work_scope w
        WHERE w.kind = k.kind AND w.state = 'waiting' AND w.not_before > k.floor AND w.not_before <= p_now
        ORDER BY w.not_before
        LIMIT p_scan
        FOR UPDATE SKIP LOCKED
    ) c
    UNION ALL
    SELECT c.tid, c.kind, c.scope_type, c.scope_id, c.priority, c.event_time, 'expired'::text,
        c.attempts < c.max_attempts OR c.requeued, c.workspace
    FROM k CROSS JOIN LATERAL (
        SELECT w.ctid AS tid, w.kind, w.scope_type, w.scope_id, w.priority, w.event_time, w.attempts, w.max_attempts,
            w.requeued, w.workspace
        FROM reconcile_work_scope w
        WHERE w.kind = k.kind AND w.state = 'leased' AND w.lease_expires_at > k.floor AND w.lease_expires_at <= p_now
        ORDER BY w.lease_expires_at
        LIMIT p_scan
        FOR UPDATE SKIP LOCKED
    ) c;
END
$$;

-- The leased items by owner: the reap of a lapsed owner's leases (sqlReap)
-- looks them up here instead of reading the work table.
CREATE INDEX reconcile_work_scope_owner_idx ON reconcile_work_scope (lease_owner) WHERE state = 'leased';
