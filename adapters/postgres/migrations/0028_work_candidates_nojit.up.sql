-- The lease's candidates are read with JIT off whatever the session says.
-- The planner's estimate for the candidate query grows with the queue (it
-- assumes a hundred workspaces of ready items): at 100,000 items it passed
-- jit_inline_above_cost and jit_optimize_above_cost, and each lease spent
-- about a second compiling a query that runs in milliseconds (bench
-- release --targets 100000: 482 targets/s against 1,665 at 30,000).
-- DB.Open turns JIT off for its sessions too; this holds for a session
-- that asked for it (a DSN with jit=on, a pooler that drops the startup
-- parameter).
ALTER FUNCTION reconcile_work_candidates(text[], timestamptz[], timestamptz, integer, integer) SET jit = off;
