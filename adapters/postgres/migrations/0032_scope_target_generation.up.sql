-- A generation per deployment and environment (ports.ScopeTargets), kept
-- by the triggers that count the scope's targets (0027), in the same
-- statement as each insert and delete of release_targets, so a reader can
-- keep a scope's list and re-read it only when it changed (the chain's
-- rollout order read the whole list once per batch: N²/B over a rollout).
-- An update of release_targets never changes its scope: the key is the
-- deployment, environment and resource; only system_id is ever rewritten.
--
-- Generations come from a sequence, never handed out twice: a write rolled
-- back cannot leave its generation to a later write with other contents.
-- Zero is the scope that never held a target (no row).
CREATE SEQUENCE release_target_generation_seq;

ALTER TABLE release_progression_scopes ADD COLUMN generation bigint NOT NULL DEFAULT 0;
UPDATE release_progression_scopes SET generation = nextval('release_target_generation_seq');

CREATE OR REPLACE FUNCTION release_progression_targets_in() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO release_progression_scopes AS s (deployment_id, environment_id, targets, generation)
    SELECT a.deployment_id, a.environment_id, count(*), nextval('release_target_generation_seq')
    FROM added a GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (deployment_id, environment_id) DO UPDATE SET targets = s.targets + excluded.targets,
        generation = excluded.generation;
    INSERT INTO release_progression_targets (deployment_id, environment_id, version_id, target_key,
        job_created_at, job_id, status, verification, finished_at)
    SELECT * FROM release_progression_newest(ARRAY(SELECT j FROM added a
        JOIN release_jobs j ON j.deployment_id = a.deployment_id AND j.target_key = a.key))
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION release_progression_targets_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE release_progression_scopes s SET targets = s.targets - g.n, generation = nextval('release_target_generation_seq')
    FROM (SELECT r.deployment_id, r.environment_id, count(*) AS n FROM removed r GROUP BY 1, 2) g
    WHERE s.deployment_id = g.deployment_id AND s.environment_id = g.environment_id;
    DELETE FROM release_progression_targets p WHERE p.target_key IN (SELECT r.key FROM removed r);
    RETURN NULL;
END $$;
