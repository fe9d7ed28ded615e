-- The W3C trace context a work item was last enqueued under (ports.
-- EnqueueParams.Traceparent; '' when untraced), so the pass that leases it,
-- in whichever process, continues the enqueuer's trace.
ALTER TABLE reconcile_work_scope ADD COLUMN traceparent text NOT NULL DEFAULT '';
