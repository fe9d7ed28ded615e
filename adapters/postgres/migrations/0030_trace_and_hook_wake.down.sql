-- events_publish as migration 0024 left it.
CREATE OR REPLACE FUNCTION events_publish() RETURNS bigint LANGUAGE plpgsql AS $$
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
DROP TABLE workflow_events_notified;

ALTER TABLE reconcile_work_scope DROP COLUMN traceparent;
