-- release_progression_jobs (0027) packed every job a statement wrote into
-- an array of whole rows (their docs included) before
-- release_progression_newest dropped the non-terminal ones: in a rollout
-- every job is created pending and written in progress, so each batch's
-- insert and update paid for an array that came to nothing (5.6 ms per
-- batch of 32 at 10,000 targets). Only terminal jobs are packed now; the
-- result is the same, as release_progression_newest keeps only those.
CREATE OR REPLACE FUNCTION release_progression_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM changed j WHERE j.status IN ('successful', 'failure', 'cancelled', 'skipped',
            'invalidJobAgent', 'invalidIntegration', 'externalRunNotFound')) THEN
        RETURN NULL;
    END IF;
    INSERT INTO release_progression_targets AS p (deployment_id, environment_id, version_id, target_key,
        job_created_at, job_id, status, verification, finished_at)
    SELECT * FROM release_progression_newest(ARRAY(SELECT j::release_jobs FROM changed j
        WHERE j.status IN ('successful', 'failure', 'cancelled', 'skipped', 'invalidJobAgent', 'invalidIntegration', 'externalRunNotFound')
            AND EXISTS (SELECT 1 FROM release_targets t WHERE t.key = j.target_key)))
    ON CONFLICT (deployment_id, environment_id, version_id, target_key) DO UPDATE SET
        job_created_at = excluded.job_created_at, job_id = excluded.job_id, status = excluded.status,
        verification = excluded.verification, finished_at = excluded.finished_at
    WHERE (excluded.job_created_at, excluded.job_id) >= (p.job_created_at, p.job_id)
        AND (p.job_id, p.status, p.verification, p.finished_at) IS DISTINCT FROM
            (excluded.job_id, excluded.status, excluded.verification, excluded.finished_at);
    RETURN NULL;
END $$;
