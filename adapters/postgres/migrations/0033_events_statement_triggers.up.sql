-- The event outbox of release jobs and desired releases is written by
-- statement triggers over transition tables instead of row triggers
-- (0024's events_job and events_desired): the chain writes both tables in
-- batches of many rows a statement, and a row trigger cost a plpgsql call,
-- a workspace lookup and an INSERT per row (0.1-0.3 ms of server CPU per
-- target). Each statement now records its events in one INSERT ... SELECT,
-- resolving workspaces with one join. The events are those the row
-- triggers recorded, in the order the statement wrote its rows (a job's
-- job.status before its target.current); PostgreSQL keeps an INSERT's and
-- an UPDATE's transition tables apart, so an INSERT ... ON CONFLICT DO
-- UPDATE records its updated rows' events, then its inserted rows'.
-- The rows of a transition table read in the order they were written;
-- row_number() over that read keeps the order through the joins.
--
-- TaskRuns (written in batches, as the jobs) go the same way; workflows,
-- workflow jobs and runs are written a row a statement and keep their row
-- triggers.
--
-- The hook events (0011, 0024) of release_releases (release.created) and
-- release_jobs (job.failed, verification.failed, release.failed) go the
-- same way: their row triggers ran, and the jobs' built a document, for
-- every release and job update of the chain.
DROP TRIGGER release_jobs_changes ON release_jobs;
DROP TRIGGER release_desired_changes ON release_desired;
DROP FUNCTION events_job();
DROP FUNCTION events_desired();

-- job.created for each job inserted.
CREATE FUNCTION events_jobs_created() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO events_outbox (kind, workspace, object_id, at, data)
    SELECT 'job.created', COALESCE(r.workspace_id, ''), n.id, n.updated_at,
        jsonb_build_object('status', n.status, 'release_id', n.release_id, 'target_key', n.target_key)
    FROM (SELECT a.*, row_number() OVER () AS ord FROM added a) n
    LEFT JOIN release_resources r ON r.id = n.resource_id
    ORDER BY n.ord;
    RETURN NULL;
END $$;

-- job.status for each job whose status changed, and target.current after
-- it when the job became successful. A job's id is never rewritten, so it
-- pairs the old row with the new.
CREATE FUNCTION events_jobs_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO events_outbox (kind, workspace, object_id, at, data)
    SELECT e.kind, COALESCE(r.workspace_id, ''), e.object_id, n.updated_at, e.data
    FROM (SELECT a.*, row_number() OVER () AS ord FROM added a) n
    JOIN removed o ON o.id = n.id
    LEFT JOIN release_resources r ON r.id = n.resource_id
    CROSS JOIN LATERAL (VALUES
        (1, 'job.status', n.id, jsonb_build_object('status', n.status, 'previous', o.status,
            'release_id', n.release_id, 'target_key', n.target_key)),
        (2, 'target.current', n.target_key, jsonb_build_object('release_id', n.release_id, 'job_id', n.id))
    ) AS e(sub, kind, object_id, data)
    WHERE n.status IS DISTINCT FROM o.status AND (e.sub = 1 OR n.status = 'successful')
    ORDER BY n.ord, e.sub;
    RETURN NULL;
END $$;

CREATE TRIGGER release_jobs_changes_insert AFTER INSERT ON release_jobs
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION events_jobs_created();
CREATE TRIGGER release_jobs_changes_update AFTER UPDATE ON release_jobs
    REFERENCING OLD TABLE AS removed NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION events_jobs_updated();

-- target.desired for each desired release inserted with a release, or
-- updated to another one; the workspace is the target's resource's (the
-- third part of its key).
CREATE FUNCTION events_desired_created() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO events_outbox (kind, workspace, object_id, at, data)
    SELECT 'target.desired', COALESCE(r.workspace_id, ''), n.target_key, n.updated_at,
        jsonb_build_object('release_id', n.release_id)
    FROM (SELECT a.*, row_number() OVER () AS ord FROM added a) n
    LEFT JOIN release_resources r ON r.id = split_part(n.target_key, ':', 3)
    WHERE n.release_id <> ''
    ORDER BY n.ord;
    RETURN NULL;
END $$;

CREATE FUNCTION events_desired_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO events_outbox (kind, workspace, object_id, at, data)
    SELECT 'target.desired', COALESCE(r.workspace_id, ''), n.target_key, n.updated_at,
        jsonb_build_object('release_id', n.release_id)
    FROM (SELECT a.*, row_number() OVER () AS ord FROM added a) n
    JOIN removed o ON o.target_key = n.target_key
    LEFT JOIN release_resources r ON r.id = split_part(n.target_key, ':', 3)
    WHERE n.release_id <> '' AND n.release_id IS DISTINCT FROM o.release_id
    ORDER BY n.ord;
    RETURN NULL;
END $$;

CREATE TRIGGER release_desired_changes_insert AFTER INSERT ON release_desired
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION events_desired_created();
CREATE TRIGGER release_desired_changes_update AFTER UPDATE ON release_desired
    REFERENCING OLD TABLE AS removed NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION events_desired_updated();

-- release.created for each release inserted (0011's workflow_events_release).
DROP TRIGGER release_releases_events ON release_releases;
DROP FUNCTION workflow_events_release();
CREATE FUNCTION workflow_events_releases() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO workflow_events (type, at, doc)
    SELECT 'release.created', n.created_at,
        jsonb_build_object('release_id', n.id, 'target_key', n.target_key, 'version_id', n.version_id)
    FROM (SELECT a.*, row_number() OVER () AS ord FROM added a) n
    ORDER BY n.ord;
    RETURN NULL;
END $$;
CREATE TRIGGER release_releases_events AFTER INSERT ON release_releases
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION workflow_events_releases();

-- For each job updated: job.failed when its status moved into a failed
-- one, verification.failed (with the names of its measurements) when its
-- verification moved to failed, and release.failed after either (0024's
-- workflow_events_job, the rule of ports.JobEvents).
DROP TRIGGER release_jobs_events ON release_jobs;
DROP FUNCTION workflow_events_job();
CREATE FUNCTION workflow_events_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO workflow_events (type, at, doc)
    SELECT e.type, n.updated_at, jsonb_build_object('release_id', n.release_id, 'target_key', n.target_key,
            'version_id', n.version_id, 'job_id', n.id, 'job_status', n.status,
            'job_message', COALESCE(n.doc->>'message', ''), 'job_agent_id', n.job_agent_id,
            'external_id', n.external_id)
        || CASE WHEN e.sub = 2 THEN jsonb_build_object('metrics', COALESCE((SELECT jsonb_agg(k ORDER BY k COLLATE "C")
            FROM jsonb_object_keys(COALESCE(n.doc->'measurements', '{}'::jsonb)) AS k), '[]'::jsonb)) ELSE '{}'::jsonb END
    FROM (SELECT a.*, row_number() OVER () AS ord FROM added a) n
    JOIN removed o ON o.id = n.id
    CROSS JOIN LATERAL (SELECT
        n.status = ANY(f.failed) AND NOT (o.status = ANY(f.failed)) AS job,
        COALESCE(n.doc->>'verification' = 'failed' AND o.doc->>'verification' IS DISTINCT FROM 'failed', false) AS verification
        FROM (SELECT ARRAY['failure', 'invalidJobAgent', 'invalidIntegration', 'externalRunNotFound'] AS failed) f) c
    CROSS JOIN LATERAL (VALUES (1, 'job.failed'), (2, 'verification.failed'), (3, 'release.failed')) AS e(sub, type)
    WHERE (c.job OR c.verification) AND CASE e.sub WHEN 1 THEN c.job WHEN 2 THEN c.verification ELSE true END
    ORDER BY n.ord, e.sub;
    RETURN NULL;
END $$;
CREATE TRIGGER release_jobs_events AFTER UPDATE ON release_jobs
    REFERENCING OLD TABLE AS removed NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION workflow_events_jobs();

-- taskrun.status for each TaskRun inserted with a phase or updated to
-- another one (0024's events_workflow, which workflows keep).
DROP TRIGGER workflow_task_runs_changes ON workflow_task_runs;
CREATE FUNCTION events_task_runs_created() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO events_outbox (kind, object_id, at, data)
    SELECT 'taskrun.status', n.workflow_id || '/' || n.id, now(), jsonb_build_object('phase', n.doc->>'phase')
    FROM (SELECT a.*, row_number() OVER () AS ord FROM added a) n
    WHERE COALESCE(n.doc->>'phase', '') <> ''
    ORDER BY n.ord;
    RETURN NULL;
END $$;
CREATE FUNCTION events_task_runs_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO events_outbox (kind, object_id, at, data)
    SELECT 'taskrun.status', n.workflow_id || '/' || n.id, now(), jsonb_build_object('phase', n.doc->>'phase')
    FROM (SELECT a.*, row_number() OVER () AS ord FROM added a) n
    JOIN removed o ON o.workflow_id = n.workflow_id AND o.id = n.id
    WHERE COALESCE(n.doc->>'phase', '') <> COALESCE(o.doc->>'phase', '')
    ORDER BY n.ord;
    RETURN NULL;
END $$;
CREATE TRIGGER workflow_task_runs_changes_insert AFTER INSERT ON workflow_task_runs
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION events_task_runs_created();
CREATE TRIGGER workflow_task_runs_changes_update AFTER UPDATE ON workflow_task_runs
    REFERENCING OLD TABLE AS removed NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION events_task_runs_updated();
