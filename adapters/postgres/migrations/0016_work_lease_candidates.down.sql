DROP FUNCTION IF EXISTS reconcile_work_candidates(text[], timestamptz[], timestamptz, integer, integer);
