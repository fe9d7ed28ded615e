ALTER TABLE reconcile_work_scope DROP COLUMN traceparent;
