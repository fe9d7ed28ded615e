-- JobList: jobs across targets newest first, by keyset pages on
-- (created_at desc, id desc): all of them, or one job agent's (an outside
-- agent polling its jobs). The other filters (deployment, status,
-- environment, resource, version, workspace) are applied along the
-- narrowest of these.
--
-- No index leads with deployment_id besides release_jobs_target_idx: one on
-- (deployment_id, created_at desc, id desc) was chosen by the planner for
-- the chain's per-target lookups (deployment_id = ? AND target_key = ?
-- ORDER BY created_at DESC LIMIT n) while a rollout filled the table, so
-- each lookup read every job of the deployment: 46 million index tuples and
-- 5.5 s -> 21 s for `bench release --targets 10000`.
CREATE INDEX release_jobs_created_idx ON release_jobs (created_at DESC, id DESC);
CREATE INDEX release_jobs_agent_created_idx ON release_jobs (job_agent_id, created_at DESC, id DESC);
