// Package postgres holds the PostgreSQL adapters of the ports (bun with
// pgdialect over a pgx pool): the work queue, the run store, and the
// migrations that create their tables.
//
// Invariants:
//   - Every query goes through idb(ctx): inside DB.InTx it joins the
//     caller's transaction, so a state change and the work it enqueues
//     commit or roll back together.
//   - Migrations are numbered up/down SQL files embedded in the binary,
//     schema-relative (no schema names: search_path decides), each applied
//     once in its own transaction, under a per-schema advisory lock held on
//     one dedicated connection, so concurrent processes migrate safely.
//   - "Now" comes only from the injected ports.Clock, never from SQL now(),
//     and times are kept in UTC at microsecond precision.
//   - Queue: every operation is one SQL statement. Leases are claimed with
//     FOR UPDATE SKIP LOCKED and fenced by tokens from one sequence, so a
//     stale holder never matches; batched heartbeats and acks lock their
//     rows in key order, so concurrent batches never deadlock; an item is
//     deleted only by an ack of its current lease with nothing pending.
//   - No writing transaction notifies: a NOTIFY serialises, cluster-wide,
//     the commits of every transaction that sent one, each until its WAL
//     flush. Whatever makes work due (or creates a pending job) is announced
//     once its transaction has committed, on the channel 'reconciler_work'
//     (kind) or 'reconciler_jobs' (agent id), by the DB's publisher, in a
//     transaction of its own that waits for no flush; every process hears
//     it at once, the one that made the work too. A notice lost to a crash
//     between the two only delays the other processes until they poll.
//     WorkNotify listens on one
//     dedicated connection, reconnects with backoff, and wakes subscribers
//     periodically while it cannot listen, so workers fall back to polling.
package postgres
