DROP TABLE IF EXISTS run_decisions;
