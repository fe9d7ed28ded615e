-- The leased work queue (ports.Queue): one row per key. Keys compare in byte
-- order ("C" collation), as in every adapter, so leases tie-break alike.
--
-- Every lease and ack changes an indexed column (state), so no update of
-- the hot path is HOT and each one leaves dead entries behind in the index
-- the row left. Dead entries cost every scan that passes them until vacuum
-- removes them, so the table is vacuumed as soon as 1000 rows are dead
-- (with no cost-based throttling) rather than after a fraction of its size;
-- fillfactor 80 keeps room on each page for the new row versions.
CREATE TABLE reconcile_work_scope (
    kind             text        COLLATE "C" NOT NULL CHECK (kind <> ''),
    scope_type       text        COLLATE "C" NOT NULL CHECK (scope_type <> ''),
    scope_id         text        COLLATE "C" NOT NULL CHECK (scope_id <> ''),
    -- ports.WorkPending is stored as 'ready' (due when it was written) or
    -- 'waiting' (not before a later time): leases read ready items in lease
    -- order from their own index and never wade through waiting ones. A
    -- lease takes due waiting items too and moves the ones it leaves to
    -- ready.
    state            text        NOT NULL CHECK (state IN ('ready', 'waiting', 'leased', 'dead')),
    priority         integer     NOT NULL DEFAULT 0,
    event_time       timestamptz NOT NULL,
    -- Pending: when the item becomes due. Leased and requeued: the earliest
    -- not-before of the enqueues that arrived during the lease.
    not_before       timestamptz NOT NULL,
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts     integer     NOT NULL CHECK (max_attempts > 0),
    last_error       text        NOT NULL DEFAULT '',
    lease_owner      text        NOT NULL DEFAULT '',
    -- The fencing token of the current or last lease, from the sequence
    -- below: tokens only grow, even across delete and re-enqueue.
    lease_token      bigint      NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    -- An enqueue arrived while leased: the item runs again after the lease.
    requeued         boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (kind, scope_type, scope_id),
    CHECK (attempts <= max_attempts),
    CHECK ((state = 'leased') = (lease_expires_at IS NOT NULL)),
    CHECK (state = 'leased' OR NOT requeued)
) WITH (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0
);

CREATE SEQUENCE reconcile_work_lease_token_seq AS bigint;

-- Leasing: ready items of a kind in lease order, so a lease reads exactly
-- the rows it claims (plus those others hold).
CREATE INDEX reconcile_work_scope_ready_idx ON reconcile_work_scope
    (kind, priority DESC, event_time, scope_type, scope_id)
    WHERE state = 'ready';

-- Waiting items of a kind by not-before: a lease reads only the due ones.
CREATE INDEX reconcile_work_scope_waiting_idx ON reconcile_work_scope
    (kind, not_before)
    WHERE state = 'waiting';

-- Reclaiming: leases of a kind by expiry.
CREATE INDEX reconcile_work_scope_leased_idx ON reconcile_work_scope
    (kind, lease_expires_at)
    WHERE state = 'leased';

-- The dead-letter listing, oldest event first.
CREATE INDEX reconcile_work_scope_dead_idx ON reconcile_work_scope
    (event_time, kind, scope_type, scope_id)
    WHERE state = 'dead';
