// Package catalog is the revisioned catalog service: workflow templates and
// policies are edited as drafts, proposed, approved into numbered immutable
// revisions, and retired through a proposed deletion. It is the one place
// that applies the lifecycle rules of reconcile/revision to a ports.Catalog.
//
// Invariants:
//   - Every change is a draft-commit: the service reads the revision, applies
//     the operation to a private working copy, validates it (the JSON-object
//     schema, then the kind's validator: by default DefaultValidators, the
//     workflow package's template checks including the task DAG, and the
//     policy package's checks including CEL compilation) and commits it in ONE
//     compare-and-swap write. Any failure before that write changes nothing;
//     the write itself is atomic.
//   - Every mutation takes the object's try-lock (LockKey) first and fails
//     fast with a conflict when another change to the object is in progress;
//     it carries the caller's expected version, and a stale one is a
//     conflict. Reads take no lock.
//   - Lifecycle changes are exactly the edges of revision.Edges; Approve is
//     the only way to publish and records the approver; published content
//     never changes; labels and annotations change in every state.
//   - An object has at most one open draft; a new revision of a published
//     object starts as a new draft (Create, optionally copying a published
//     revision's content).
//   - GetRevision returns the exact content a number was published with for
//     as long as the revision exists, so in-flight work keeps its revision.
//   - Errors are typed: conflicts match both revision.ErrConflict and
//     ports.ErrConflict; ErrInvalidTransition, ErrImmutable and ErrValidation
//     come from package revision; a missing revision is ports.ErrNotFound.
package catalog
