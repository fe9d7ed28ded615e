DROP INDEX IF EXISTS runs_depends_on_idx;
