DROP FUNCTION IF EXISTS reconcile_work_ack_delete_keys(text[], text[], text[], bigint[], integer[]);
DROP FUNCTION IF EXISTS reconcile_work_ack_delete_tids(tid[], bigint[], integer[]);
