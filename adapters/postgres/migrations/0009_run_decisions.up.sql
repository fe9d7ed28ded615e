-- Each run's recent decision history (ports.RunStore.RunDecisions): one row
-- per recorded write, keyed by the run's version that write produced. The
-- store keeps the newest ports.RunDecisionsKept rows per run.
CREATE TABLE run_decisions (
    kind       text        NOT NULL,
    id         text        COLLATE "C" NOT NULL,
    version    bigint      NOT NULL,
    at         timestamptz NOT NULL,
    action     text        NOT NULL,
    reason     text        NOT NULL,
    from_state text        NOT NULL DEFAULT '',
    to_state   text        NOT NULL DEFAULT '',
    by_name    text        NOT NULL DEFAULT '',
    PRIMARY KEY (kind, id, version),
    FOREIGN KEY (kind, id) REFERENCES runs (kind, id) ON DELETE CASCADE
);
