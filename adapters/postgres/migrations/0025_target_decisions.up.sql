-- Each release target's recent desired-release decisions
-- (ports.Releases.TargetDecisions): one row per decision that changed the
-- target's desired release, written by the same statement (release_desired's
-- upsert). The store keeps the newest ports.TargetDecisionsKept per target.
CREATE TABLE target_decisions (
    target_key text        COLLATE "C" NOT NULL,
    seq        bigint      NOT NULL,
    at         timestamptz NOT NULL,
    doc        jsonb       NOT NULL,
    PRIMARY KEY (target_key, seq)
);
