// Package runs executes the four run kinds (repo, standalone, pr-review,
// persistent agent) on the engine: Processor builds a reconcile.Snapshot
// through ports.RunStore, takes the pure reconcile.Decide, and applies the
// one action; NonTerminal is the resync source of every live run.
//
// Invariants:
//   - A state change and its patch are one compare-and-swap write, checked
//     against the kind's edge table; a lost CAS is logged stale and re-runs
//     the pass on fresh data.
//   - Side effects (agent launches, merges, reviews) go through ports with
//     an idempotency key derived from (run, version, action).
//   - A failed read of a secondary source is recorded in the snapshot (the
//     decision defers); only a failed read of the run itself is an error.
//   - Every decision is logged as reconcile.decision; at debug level the
//     snapshot is logged in the format `reconciler decide` replays.
package runs
