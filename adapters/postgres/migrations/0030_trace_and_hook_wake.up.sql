-- The W3C trace context a work item was last enqueued under (ports.
-- EnqueueParams.Traceparent; '' when untraced), so the pass that leases it,
-- in whichever process, continues the enqueuer's trace.
ALTER TABLE reconcile_work_scope ADD COLUMN traceparent text NOT NULL DEFAULT '';

-- Hook events wake the event stream's watchers (ports.ChangeStream's
-- ChangesNotify), so the hook dispatcher (engine/flow.Triggers.Listen)
-- hears of them from the same publisher as the stream instead of polling
-- the outbox: events_publish also notifies reconciler_events when
-- workflow_events holds an event with a seq above the one it last
-- notified for (workflow_events_notified). A wake-up missed by a race
-- with a slower transaction's lower seq is caught by the dispatcher's
-- fallback read.
CREATE TABLE workflow_events_notified (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    through  bigint  NOT NULL
);
INSERT INTO workflow_events_notified (through) SELECT COALESCE(max(seq), 0) FROM workflow_events;

CREATE OR REPLACE FUNCTION events_publish() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    moved bigint := 0;
    hooks boolean := false;
BEGIN
    IF EXISTS (SELECT 1 FROM workflow_events w WHERE w.seq > (SELECT through FROM workflow_events_notified)) THEN
        PERFORM set_config('synchronous_commit', 'off', true);
        UPDATE workflow_events_notified SET through = m.top
        FROM (SELECT max(seq) AS top FROM workflow_events) m WHERE m.top > through;
        hooks := FOUND;
    END IF;
    IF EXISTS (SELECT 1 FROM events_outbox) THEN
        PERFORM set_config('synchronous_commit', 'off', true);
        PERFORM pg_advisory_xact_lock(1702260340, hashtext(coalesce(current_schema(), '')));
        WITH o AS (DELETE FROM events_outbox RETURNING *)
        INSERT INTO events (id, kind, workspace, object_id, at, data)
            SELECT nextval('events_id_seq'), kind, workspace, object_id, at, data
            FROM (SELECT * FROM o ORDER BY seq) s;
        GET DIAGNOSTICS moved = ROW_COUNT;
    END IF;
    IF moved > 0 OR hooks THEN
        PERFORM pg_notify('reconciler_events', '');
    END IF;
    RETURN moved;
END $$;
