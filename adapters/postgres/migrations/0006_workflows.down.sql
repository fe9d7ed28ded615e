DROP TABLE IF EXISTS workflow_task_runs;
DROP TABLE IF EXISTS workflows;
