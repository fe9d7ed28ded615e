// Package memory holds the in-memory adapters of the ports, the embedded
// default: same semantics as the Postgres adapters, proven by the same
// ports/porttest suites, with no durability across restarts.
//
// Invariants:
//   - Every adapter is goroutine-safe and hands out copies, never pointers
//     into its own state.
//   - Times are kept at the precision Postgres keeps (microseconds, UTC), and
//     "now" comes only from the injected ports.Clock.
//
// Queue invariants (see ports.Queue for the contract):
//   - Each live item sits in exactly one heap of its kind: due (priority
//     desc, event time asc, key asc), waiting (not-before asc) or leased
//     (expiry asc); dead items sit in none and in a dead index. Leasing pops
//     from the due heap after moving the waiting and leased heads whose time
//     has passed, so no operation scans the backlog: O(log n) per item
//     touched.
//   - An item is leased only through a fresh queue-wide token, so a stale
//     holder can never match; it completes only by its current token while
//     the item is still leased.
//   - An item leaves the queue only by an ack with nothing pending; failures
//     end in the dead state, and an enqueue during a lease always leaves the
//     item pending after the lease, whatever ended it.
//   - Per-state counts are kept on every transition, so WorkStats is O(1).
package memory
