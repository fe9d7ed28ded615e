DROP TABLE IF EXISTS process_liveness;
