-- The event stream (ports.ChangeStream). Triggers record each change in
-- events_outbox in the transaction that makes it (a rolled-back write
-- records nothing); the publisher moves committed rows into events after
-- the commit (events_publish), numbering them under a transaction-level
-- advisory lock, so ids become visible in increasing order and a reader
-- that resumes after the last id it saw misses none. events keeps the
-- last changes (events_prune); events_pruned remembers the highest id
-- pruned, so a resume point older than that is refused.
CREATE TABLE events_outbox (
    seq        bigserial   PRIMARY KEY,
    kind       text        NOT NULL,
    workspace  text        COLLATE "C" NOT NULL DEFAULT '',
    object_id  text        COLLATE "C" NOT NULL,
    at         timestamptz NOT NULL,
    data       jsonb       NOT NULL DEFAULT '{}'
);

CREATE TABLE events (
    id         bigint      PRIMARY KEY,
    kind       text        NOT NULL,
    workspace  text        COLLATE "C" NOT NULL DEFAULT '',
    object_id  text        COLLATE "C" NOT NULL,
    at         timestamptz NOT NULL,
    data       jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX events_at_idx ON events (at);
CREATE SEQUENCE events_id_seq AS bigint;

CREATE TABLE events_pruned (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    through  bigint  NOT NULL
);
INSERT INTO events_pruned (through) VALUES (0);

-- The workspace of a resource, '' when it is unknown.
CREATE FUNCTION events_workspace(resource text) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT COALESCE((SELECT workspace_id FROM release_resources WHERE id = resource), '')
$$;

-- Moves the committed outbox into events, in outbox order, and notifies
-- reconciler_events; it returns how many it moved. The advisory lock
-- (class 'evnt', this schema) orders the movers of every process. Its
-- transaction commits without waiting for its WAL flush: a crash loses
-- the move and the outbox rows alike, so the next mover moves them.
CREATE FUNCTION events_publish() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    moved bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM events_outbox) THEN
        RETURN 0;
    END IF;
    PERFORM set_config('synchronous_commit', 'off', true);
    PERFORM pg_advisory_xact_lock(1702260340, hashtext(coalesce(current_schema(), '')));
    WITH o AS (DELETE FROM events_outbox RETURNING *)
    INSERT INTO events (id, kind, workspace, object_id, at, data)
        SELECT nextval('events_id_seq'), kind, workspace, object_id, at, data
        FROM (SELECT * FROM o ORDER BY seq) s;
    GET DIAGNOSTICS moved = ROW_COUNT;
    IF moved > 0 THEN
        PERFORM pg_notify('reconciler_events', '');
    END IF;
    RETURN moved;
END $$;

-- Prunes events beyond the newest keep or older than retention.
CREATE FUNCTION events_prune(keep bigint, retention interval) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    top bigint;
BEGIN
    WITH d AS (
        DELETE FROM events
        WHERE id <= (SELECT COALESCE(max(id), 0) FROM events) - keep OR at < now() - retention
        RETURNING id)
    SELECT max(id) INTO top FROM d;
    IF top IS NOT NULL THEN
        UPDATE events_pruned SET through = GREATEST(through, top);
    END IF;
    RETURN COALESCE(top, 0);
END $$;

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

CREATE FUNCTION events_workflow() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    old_phase text := '';
BEGIN
    IF TG_OP = 'UPDATE' THEN
        old_phase := COALESCE(OLD.doc->>'phase', '');
    END IF;
    IF COALESCE(NEW.doc->>'phase', '') = old_phase THEN
        RETURN NULL;
    END IF;
    IF TG_TABLE_NAME = 'workflows' THEN
        INSERT INTO events_outbox (kind, object_id, at, data) VALUES ('workflow.status', NEW.id, now(),
            jsonb_build_object('phase', NEW.doc->>'phase'));
    ELSE
        INSERT INTO events_outbox (kind, object_id, at, data) VALUES ('taskrun.status', NEW.workflow_id || '/' || NEW.id, now(),
            jsonb_build_object('phase', NEW.doc->>'phase'));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER workflows_changes AFTER INSERT OR UPDATE ON workflows
    FOR EACH ROW EXECUTE FUNCTION events_workflow();
CREATE TRIGGER workflow_task_runs_changes AFTER INSERT OR UPDATE ON workflow_task_runs
    FOR EACH ROW EXECUTE FUNCTION events_workflow();

CREATE FUNCTION events_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.state IS NOT DISTINCT FROM OLD.state THEN
        RETURN NULL;
    END IF;
    INSERT INTO events_outbox (kind, object_id, at, data) VALUES ('run.status', NEW.kind || '/' || NEW.id, NEW.updated_at,
        jsonb_build_object('kind', NEW.kind, 'state', NEW.state));
    RETURN NULL;
END $$;
CREATE TRIGGER runs_changes AFTER INSERT OR UPDATE ON runs
    FOR EACH ROW EXECUTE FUNCTION events_run();

CREATE FUNCTION events_revision() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
    lc text;
BEGIN
    IF TG_OP = 'DELETE' THEN
        r := OLD;
        lc := 'deleted';
    ELSE
        r := NEW;
        lc := NEW.lifecycle;
        IF TG_OP = 'UPDATE' AND NEW.lifecycle IS NOT DISTINCT FROM OLD.lifecycle THEN
            RETURN NULL;
        END IF;
    END IF;
    INSERT INTO events_outbox (kind, object_id, at, data) VALUES ('catalog.revision', r.kind || '/' || r.name || '/' || r.id,
        CASE WHEN TG_OP = 'DELETE' THEN now() ELSE NEW.updated_at END,
        jsonb_build_object('kind', r.kind, 'name', r.name, 'lifecycle', lc, 'revision', r.number));
    RETURN NULL;
END $$;
CREATE TRIGGER catalog_revisions_changes AFTER INSERT OR UPDATE OR DELETE ON catalog_revisions
    FOR EACH ROW EXECUTE FUNCTION events_revision();

-- Hook events (ports.Events): release.failed after a job's job.failed or
-- verification.failed (the rule of ports.JobEvents), and
-- resource.created, resource.updated and resource.deleted.
CREATE OR REPLACE FUNCTION workflow_events_job() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE FUNCTION workflow_events_resource() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO workflow_events (type, at, doc) VALUES ('resource.deleted', now(), jsonb_build_object('resource_id', OLD.id));
    ELSE
        INSERT INTO workflow_events (type, at, doc) VALUES (CASE TG_OP WHEN 'INSERT' THEN 'resource.created' ELSE 'resource.updated' END,
            NEW.updated_at, jsonb_build_object('resource_id', NEW.id));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER release_resources_events AFTER INSERT OR UPDATE OR DELETE ON release_resources
    FOR EACH ROW EXECUTE FUNCTION workflow_events_resource();
