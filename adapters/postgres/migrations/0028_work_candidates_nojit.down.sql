ALTER FUNCTION reconcile_work_candidates(text[], timestamptz[], timestamptz, integer, integer) RESET jit;
