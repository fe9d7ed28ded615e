-- The event outbox of workflow hooks (ports.Events). Triggers record an
-- event in the same statement, so the same transaction, as the change
-- that causes it: release.created when a release is inserted, job.failed
-- when a job's status moves into a failed one, verification.failed when
-- its verification moves to failed (the rule of ports.JobEvents). doc
-- holds the event's other fields as ports.Event encodes them.
CREATE TABLE workflow_events (
    seq   bigserial   PRIMARY KEY,
    type  text        NOT NULL,
    at    timestamptz NOT NULL,
    doc   jsonb       NOT NULL
);

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

CREATE TRIGGER release_jobs_events AFTER UPDATE ON release_jobs
    FOR EACH ROW EXECUTE FUNCTION workflow_events_job();

-- The unfinished workflows of a trigger (a schedule's concurrency policy).
CREATE INDEX workflows_unfinished_trigger_idx ON workflows ((doc->'trigger'->>'key'))
    WHERE doc->>'phase' IN ('Pending', 'Running');
