-- The trigger functions of 0027, which keep no generation.
CREATE OR REPLACE FUNCTION release_progression_targets_in() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO release_progression_scopes AS s (deployment_id, environment_id, targets)
    SELECT a.deployment_id, a.environment_id, count(*) FROM added a GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (deployment_id, environment_id) DO UPDATE SET targets = s.targets + excluded.targets;
    INSERT INTO release_progression_targets (deployment_id, environment_id, version_id, target_key,
        job_created_at, job_id, status, verification, finished_at)
    SELECT * FROM release_progression_newest(ARRAY(SELECT j FROM added a
        JOIN release_jobs j ON j.deployment_id = a.deployment_id AND j.target_key = a.key))
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION release_progression_targets_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE release_progression_scopes s SET targets = s.targets - g.n
    FROM (SELECT r.deployment_id, r.environment_id, count(*) AS n FROM removed r GROUP BY 1, 2) g
    WHERE s.deployment_id = g.deployment_id AND s.environment_id = g.environment_id;
    DELETE FROM release_progression_targets p WHERE p.target_key IN (SELECT r.key FROM removed r);
    RETURN NULL;
END $$;

ALTER TABLE release_progression_scopes DROP COLUMN IF EXISTS generation;
DROP SEQUENCE IF EXISTS release_target_generation_seq;
