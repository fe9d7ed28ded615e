// Package revision holds the pure lifecycle rules of the revisioned catalog:
// workflow templates and policies move through draft → proposed → published
// revisions, and a published revision is an immutable snapshot that in-flight
// workflows and releases can keep using by its number.
//
// Invariants:
//   - The allowed lifecycle changes are data: Edges, one row per (from, op,
//     to). The catalog service, the stores' conformance suite and the
//     property tests all consult the same table; nothing hard-codes an edge.
//   - A revision is created only as Draft (the only edge out of Absent).
//     Proposed → Published happens only by OpApprove, which must name the
//     approver; Draft → Published is never an edge.
//   - Published revisions are never deleted; Draft, Proposed and
//     DeletionProposed ones may be.
//   - The content of a Published or DeletionProposed revision never changes;
//     labels and annotations may change in every state.
//   - A revision gets its number when it is published: one more than the
//     highest number the object ever had, so numbers strictly increase and a
//     number is never reused, even after a deletion. Drafts have number 0.
//   - An object has at most one open draft (Draft or Proposed) at a time.
//   - Failures are typed: ErrConflict (a ConflictError with a message),
//     ErrInvalidTransition (a TransitionError), ErrImmutable and
//     ErrValidation (a ValidationError wrapping every problem found).
//   - The package is pure: no I/O, no clock, no randomness.
package revision
