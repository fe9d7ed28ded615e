-- The leased work queue (ports.Queue): one row per key. Keys compare in byte
-- order ("C" collation), as in every adapter, so leases tie-break alike.
CREATE TABLE reconcile_work_scope (
    kind             text        COLLATE "C" NOT NULL CHECK (kind <> ''),
    scope_type       text        COLLATE "C" NOT NULL CHECK (scope_type <> ''),
    scope_id         text        COLLATE "C" NOT NULL CHECK (scope_id <> ''),
    state            text        NOT NULL CHECK (state IN ('pending', 'leased', 'dead')),
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
);

CREATE SEQUENCE reconcile_work_lease_token_seq AS bigint;

-- Leasing: pending items of a kind in lease order, not_before checked from
-- the index itself; it serves a backlog that is mostly due.
CREATE INDEX reconcile_work_scope_pending_idx ON reconcile_work_scope
    (kind, priority DESC, event_time, scope_type, scope_id) INCLUDE (not_before)
    WHERE state = 'pending';

-- Leasing when most pending items wait for a later not-before (requeued
-- timers): only the due ones are read, then sorted.
CREATE INDEX reconcile_work_scope_due_idx ON reconcile_work_scope
    (kind, not_before)
    WHERE state = 'pending';

-- Reclaiming: leases of a kind by expiry.
CREATE INDEX reconcile_work_scope_leased_idx ON reconcile_work_scope
    (kind, lease_expires_at)
    WHERE state = 'leased';

-- The dead-letter listing, oldest event first.
CREATE INDEX reconcile_work_scope_dead_idx ON reconcile_work_scope
    (event_time, kind, scope_type, scope_id)
    WHERE state = 'dead';
