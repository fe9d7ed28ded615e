// Package engine is the runtime of the reconciler: it leases work items by
// kind from a ports.Queue, runs the registered Processor for each, and
// completes the item according to the Outcome — "lease an event, recompute
// from stored state, persist, enqueue the follow-up". Beside the lease loop
// it holds the batched acks, lease renewal, graceful shutdown, the Resync
// sweep, the EnqueueBatcher, the Metrics, and Drain, which steps the same
// processors deterministically for tests and tools.
//
// The engine knows no work kind: the run executor lives in engine/runs, the
// release chain in engine/chain, workflows in engine/flow, and the
// measure-and-judge step they share in engine/verify.
//
// Invariants:
//   - Processors are stateless: each pass re-reads what it needs through
//     ports; nothing is carried between passes in memory.
//   - An item is completed only with the lease it was processed under; a
//     lost lease is dropped, never acked.
//   - Leases are renewed while a pass runs, up to its deadline
//     (PassTimeout, default 10 leases): then its context is cancelled and
//     the item retried, and a pass that ignores that is no longer renewed.
//     A panic is recovered into a retry; on shutdown in-flight items finish
//     or their leases are released.
//   - "lease lost" is warned only for a pass still running whose renewal
//     was refused, never for one whose own ack ended the lease first; the
//     warning says whose fault it was (this process's renewals, or another
//     taking it while the lease held).
//   - Renewals, acks and retries run on ports.LaneRenewal (a store with a
//     pool gives it connections of its own), so they never wait behind
//     passes; a kind whose passes take over half a lease halves how many it
//     runs at once, and fast passes raise it again (adaptiveLimit).
//   - KeepAlive keeps the process's liveness row (ports.Liveness) apart
//     from its leases.
//   - The engine imports ports only, never an adapter.
package engine
