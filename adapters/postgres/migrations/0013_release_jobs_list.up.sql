-- JobList: jobs across targets newest first, by keyset pages on
-- (created_at desc, id desc): all of them, one job agent's (an outside
-- agent polling its jobs) or one deployment's. The other filters
-- (status, environment, resource, version, workspace) are applied along
-- the narrowest of these.
CREATE INDEX release_jobs_created_idx ON release_jobs (created_at DESC, id DESC);
CREATE INDEX release_jobs_agent_created_idx ON release_jobs (job_agent_id, created_at DESC, id DESC);
CREATE INDEX release_jobs_deployment_created_idx ON release_jobs (deployment_id, created_at DESC, id DESC);
