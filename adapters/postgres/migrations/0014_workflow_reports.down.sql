DROP TABLE IF EXISTS workflow_reports;
