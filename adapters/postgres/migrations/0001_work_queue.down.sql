DROP TABLE IF EXISTS reconcile_work_scope;
DROP SEQUENCE IF EXISTS reconcile_work_lease_token_seq;
