-- The trigger function of 0027, which packs every written job.
CREATE OR REPLACE FUNCTION release_progression_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO release_progression_targets AS p (deployment_id, environment_id, version_id, target_key,
        job_created_at, job_id, status, verification, finished_at)
    SELECT * FROM release_progression_newest(ARRAY(SELECT j::release_jobs FROM changed j
        WHERE EXISTS (SELECT 1 FROM release_targets t WHERE t.key = j.target_key)))
    ON CONFLICT (deployment_id, environment_id, version_id, target_key) DO UPDATE SET
        job_created_at = excluded.job_created_at, job_id = excluded.job_id, status = excluded.status,
        verification = excluded.verification, finished_at = excluded.finished_at
    WHERE (excluded.job_created_at, excluded.job_id) >= (p.job_created_at, p.job_id)
        AND (p.job_id, p.status, p.verification, p.finished_at) IS DISTINCT FROM
            (excluded.job_id, excluded.status, excluded.verification, excluded.finished_at);
    RETURN NULL;
END $$;
