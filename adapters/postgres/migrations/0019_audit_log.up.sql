-- The audit log (ports.AuditLog): one row per write, never updated.
CREATE TABLE audit_log (
    seq       bigserial PRIMARY KEY,
    at        timestamptz NOT NULL,
    actor     text COLLATE "C" NOT NULL,
    source    text NOT NULL,
    action    text NOT NULL,
    method    text NOT NULL,
    path      text NOT NULL,
    kind      text COLLATE "C" NOT NULL,
    object_id text COLLATE "C" NOT NULL,
    summary   text NOT NULL,
    status    integer NOT NULL
);
CREATE INDEX audit_log_object_idx ON audit_log (kind, object_id, seq);
CREATE INDEX audit_log_actor_idx ON audit_log (actor, seq);
