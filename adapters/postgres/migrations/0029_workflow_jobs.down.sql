DROP TABLE IF EXISTS workflow_jobs;
