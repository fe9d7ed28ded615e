package ports

import "context"

// Transactor runs several writes as one: all of them or none. Invariants
// (checked by porttest.Transactor):
//   - Every write of the release store (ObjectStore kinds, Targets,
//     Versions, Releases, Jobs) and every Queue.WorkEnqueue made with the
//     context fn receives belongs to the transaction: they all take effect
//     when fn returns nil, and none does when fn returns an error or
//     panics (the panic goes on).
//   - Inside fn, reads through that context see fn's own writes (enqueues
//     excepted: an adapter may hold them back until the commit); other
//     callers see none of them before the commit, and all of them after.
//   - InTx returns fn's error as it is (errors.Is still finds ErrConflict,
//     ErrNotFound, release.ErrInvalid), so a compare-and-swap conflict
//     inside fn, returned, aborts everything and reads as a conflict.
//   - A context already inside a transaction of the same Transactor joins
//     it instead of opening another: only the outermost InTx commits. A
//     nested InTx whose fn fails is a savepoint rolled back: its own writes
//     (and enqueues) are undone, and the enclosing fn may go on without
//     them.
//   - An audit entry appended (AuditLog.AuditAppend) with fn's context is
//     part of the transaction: stored when it commits, never when it
//     rolls back.
//
// Everything fn does must use the context it receives: a call made with
// another context is outside the transaction (and, in memory, may wait for
// the transaction to end).
type Transactor interface {
	// InTx runs fn in a transaction carried by the context fn receives.
	InTx(ctx context.Context, fn func(ctx context.Context) error) error
}
