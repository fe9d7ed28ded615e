// Package ports holds the interfaces between the pure core and the outside
// world: the work queue, the run store, the catalog, the release store's
// small ports (ObjectStore with one generic Objects per simple kind,
// Targets, Versions, Releases, Jobs, TargetFactsReader), job agents,
// verifiers and the other side-effect ports. Each port has a conformance
// suite in ports/porttest that every adapter runs unchanged.
//
// Invariants:
//   - Ports speak in the core's types (package reconcile and friends); they
//     never expose an adapter's types.
//   - Every write that can race is a compare-and-swap on a version; a lost
//     race is ErrConflict, never an internal error.
//   - A missing object is ErrNotFound; a stale lease is ErrLeaseLost; a
//     delete refused because others depend on the object is ErrInUse
//     (which is also ErrConflict): deletes never cascade.
//   - Side-effect ports take an idempotency key: calling twice with the same
//     key has the effect of calling once.
package ports
