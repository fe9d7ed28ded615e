-- A pending job's notification on the jobs channel is no longer sent by a
-- trigger inside the transaction that inserts the job: the release store
-- publishes it once that transaction has committed, in a transaction of its
-- own. A NOTIFY holds a cluster-wide lock from its transaction's commit
-- until the commit is flushed, so a trigger that notifies makes every
-- writing transaction that inserts jobs wait for the others' flushes.
DROP TRIGGER IF EXISTS release_jobs_takers ON release_jobs;
DROP FUNCTION IF EXISTS release_jobs_notify_takers();
