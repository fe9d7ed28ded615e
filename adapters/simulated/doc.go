// Package simulated holds stand-ins for the outside world of the four run
// kinds, for the demo and for tests. Nothing here talks to a real system:
//
//   - AgentRuntime and CodeHost only record what they are asked to do
//     (launches, releases, merges, review submissions). No agent starts and
//     no pull request changes, so runs driven by them wait in provisioning.
//   - World plays the demo's outside world: launched agents get pods that
//     become ready and finish, pull requests open and merge, each written
//     through the run store and followed by a wake-up.
//
// Invariants:
//   - Every call is idempotent by its key, as the ports require, and every
//     type is goroutine-safe; the recorders hand out copies.
//   - A daemon that wires one of these says so (cmd/reconciler serve logs a
//     warning and shows it in /readyz?verbose): a stand-in is never silent.
package simulated
