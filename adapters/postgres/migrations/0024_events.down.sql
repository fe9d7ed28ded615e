DROP TRIGGER IF EXISTS release_resources_events ON release_resources;
DROP FUNCTION IF EXISTS workflow_events_resource();
-- workflow_events_job as migration 0011 left it (no release.failed).
CREATE OR REPLACE FUNCTION workflow_events_job() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    failed text[] := ARRAY['failure', 'invalidJobAgent', 'invalidIntegration', 'externalRunNotFound'];
    base jsonb := jsonb_build_object('release_id', NEW.release_id, 'target_key', NEW.target_key,
        'version_id', NEW.version_id, 'job_id', NEW.id, 'job_status', NEW.status,
        'job_message', COALESCE(NEW.doc->>'message', ''), 'job_agent_id', NEW.job_agent_id,
        'external_id', NEW.external_id);
BEGIN
    IF NEW.status = ANY(failed) AND NOT (OLD.status = ANY(failed)) THEN
        INSERT INTO workflow_events (type, at, doc) VALUES ('job.failed', NEW.updated_at, base);
    END IF;
    IF NEW.doc->>'verification' = 'failed' AND OLD.doc->>'verification' IS DISTINCT FROM 'failed' THEN
        INSERT INTO workflow_events (type, at, doc) VALUES ('verification.failed', NEW.updated_at,
            base || jsonb_build_object('metrics', COALESCE((SELECT jsonb_agg(k ORDER BY k COLLATE "C")
                FROM jsonb_object_keys(COALESCE(NEW.doc->'measurements', '{}'::jsonb)) AS k), '[]'::jsonb)));
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS catalog_revisions_changes ON catalog_revisions;
DROP TRIGGER IF EXISTS runs_changes ON runs;
DROP TRIGGER IF EXISTS workflow_task_runs_changes ON workflow_task_runs;
DROP TRIGGER IF EXISTS workflows_changes ON workflows;
DROP TRIGGER IF EXISTS release_desired_changes ON release_desired;
DROP TRIGGER IF EXISTS release_jobs_changes ON release_jobs;
DROP FUNCTION IF EXISTS events_revision();
DROP FUNCTION IF EXISTS events_run();
DROP FUNCTION IF EXISTS events_workflow();
DROP FUNCTION IF EXISTS events_desired();
DROP FUNCTION IF EXISTS events_job();
DROP FUNCTION IF EXISTS events_prune(bigint, interval);
DROP FUNCTION IF EXISTS events_publish();
DROP FUNCTION IF EXISTS events_workspace(text);
DROP TABLE IF EXISTS events_pruned;
DROP SEQUENCE IF EXISTS events_id_seq;
DROP TABLE IF EXISTS events;
DROP TABLE IF EXISTS events_outbox;
