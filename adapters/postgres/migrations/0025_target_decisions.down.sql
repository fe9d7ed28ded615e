DROP TABLE IF EXISTS target_decisions;
