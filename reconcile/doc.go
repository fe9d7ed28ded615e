// Package reconcile is the pure decision kernel for the four run kinds:
// repo, standalone, pr-review and persistent-agent.
//
// A pass observes a frozen snapshot of the world (the run's row, its pod, its
// pull request, capacity, settings and the time), calls Decide, and gets back
// exactly one Action. An executor outside this package applies the action
// under compare-and-swap against the run's version.
//
// Invariants:
//   - Decisions are pure: no I/O, no clock, no randomness. Now and the jitter
//     seed are fields of the snapshot, so the same snapshot always yields the
//     same action, and any logged snapshot can be replayed.
//   - Every Transition is an edge of the kind's Machine; the executor checks the
//     same table before it writes.
//   - Every action carries a non-empty Reason: a stable kebab-case code.
//   - While BackoffUntil is in the future the decision is a Noop that reports
//     the wake-up time; a failed read never yields a transition.
package reconcile
