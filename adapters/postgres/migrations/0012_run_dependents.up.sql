-- RunDependents: the non-terminal runs that name a run in depends_on, to
-- wake when it finishes.
CREATE INDEX runs_depends_on_idx ON runs USING gin (depends_on) WHERE NOT terminal;
