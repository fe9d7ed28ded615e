DROP TRIGGER IF EXISTS workflow_task_runs_changes_update ON workflow_task_runs;
DROP TRIGGER IF EXISTS workflow_task_runs_changes_insert ON workflow_task_runs;
DROP FUNCTION IF EXISTS events_task_runs_updated();
DROP FUNCTION IF EXISTS events_task_runs_created();
CREATE TRIGGER workflow_task_runs_changes AFTER INSERT OR UPDATE ON workflow_task_runs
    FOR EACH ROW EXECUTE FUNCTION events_workflow();
DROP TRIGGER IF EXISTS release_jobs_events ON release_jobs;
DROP FUNCTION IF EXISTS workflow_events_jobs();
DROP TRIGGER IF EXISTS release_releases_events ON release_releases;
DROP FUNCTION IF EXISTS workflow_events_releases();
DROP TRIGGER IF EXISTS release_desired_changes_update ON release_desired;
DROP TRIGGER IF EXISTS release_desired_changes_insert ON release_desired;
DROP TRIGGER IF EXISTS release_jobs_changes_update ON release_jobs;
DROP TRIGGER IF EXISTS release_jobs_changes_insert ON release_jobs;
DROP FUNCTION IF EXISTS events_desired_updated();
DROP FUNCTION IF EXISTS events_desired_created();
DROP FUNCTION IF EXISTS events_jobs_updated();
DROP FUNCTION IF EXISTS events_jobs_created();

-- The row triggers as migration 0024 left them.
CREATE FUNCTION events_job() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ws text := events_workspace(NEW.resource_id);
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO events_outbox (kind, workspace, object_id, at, data) VALUES ('job.created', ws, NEW.id, NEW.updated_at,
            jsonb_build_object('status', NEW.status, 'release_id', NEW.release_id, 'target_key', NEW.target_key));
        RETURN NULL;
    END IF;
    IF NEW.status IS NOT DISTINCT FROM OLD.status THEN
        RETURN NULL;
    END IF;
    INSERT INTO events_outbox (kind, workspace, object_id, at, data) VALUES ('job.status', ws, NEW.id, NEW.updated_at,
        jsonb_build_object('status', NEW.status, 'previous', OLD.status, 'release_id', NEW.release_id, 'target_key', NEW.target_key));
    IF NEW.status = 'successful' THEN
        INSERT INTO events_outbox (kind, workspace, object_id, at, data) VALUES ('target.current', ws, NEW.target_key, NEW.updated_at,
            jsonb_build_object('release_id', NEW.release_id, 'job_id', NEW.id));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER release_jobs_changes AFTER INSERT OR UPDATE ON release_jobs
    FOR EACH ROW EXECUTE FUNCTION events_job();

CREATE FUNCTION events_desired() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.release_id = '' OR (TG_OP = 'UPDATE' AND NEW.release_id IS NOT DISTINCT FROM OLD.release_id) THEN
        RETURN NULL;
    END IF;
    INSERT INTO events_outbox (kind, workspace, object_id, at, data) VALUES ('target.desired',
        events_workspace(split_part(NEW.target_key, ':', 3)),
        NEW.target_key, NEW.updated_at, jsonb_build_object('release_id', NEW.release_id));
    RETURN NULL;
END $$;
CREATE TRIGGER release_desired_changes AFTER INSERT OR UPDATE ON release_desired
    FOR EACH ROW EXECUTE FUNCTION events_desired();

-- The hook row triggers as migrations 0011 and 0024 left them.
CREATE FUNCTION workflow_events_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO workflow_events (type, at, doc) VALUES ('release.created', NEW.created_at,
        jsonb_build_object('release_id', NEW.id, 'target_key', NEW.target_key, 'version_id', NEW.version_id));
    RETURN NULL;
END $$;
CREATE TRIGGER release_releases_events AFTER INSERT ON release_releases
    FOR EACH ROW EXECUTE FUNCTION workflow_events_release();

CREATE FUNCTION workflow_events_job() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    failed text[] := ARRAY['failure', 'invalidJobAgent', 'invalidIntegration', 'externalRunNotFound'];
    base jsonb := jsonb_build_object('release_id', NEW.release_id, 'target_key', NEW.target_key,
        'version_id', NEW.version_id, 'job_id', NEW.id, 'job_status', NEW.status,
        'job_message', COALESCE(NEW.doc->>'message', ''), 'job_agent_id', NEW.job_agent_id,
        'external_id', NEW.external_id);
    any_failed boolean := false;
BEGIN
    IF NEW.status = ANY(failed) AND NOT (OLD.status = ANY(failed)) THEN
        INSERT INTO workflow_events (type, at, doc) VALUES ('job.failed', NEW.updated_at, base);
        any_failed := true;
    END IF;
    IF NEW.doc->>'verification' = 'failed' AND OLD.doc->>'verification' IS DISTINCT FROM 'failed' THEN
        INSERT INTO workflow_events (type, at, doc) VALUES ('verification.failed', NEW.updated_at,
            base || jsonb_build_object('metrics', COALESCE((SELECT jsonb_agg(k ORDER BY k COLLATE "C")
                FROM jsonb_object_keys(COALESCE(NEW.doc->'measurements', '{}'::jsonb)) AS k), '[]'::jsonb)));
        any_failed := true;
    END IF;
    IF any_failed THEN
        INSERT INTO workflow_events (type, at, doc) VALUES ('release.failed', NEW.updated_at, base);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER release_jobs_events AFTER UPDATE ON release_jobs
    FOR EACH ROW EXECUTE FUNCTION workflow_events_job();
