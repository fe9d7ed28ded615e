package memory

import (
	"context"
	"fmt"
	"slices"

	"github.com/reconcilerhq/reconciler/ports"
)

// Transactor is the in-memory ports.Transactor over one ReleaseStore and
// one Queue. A transaction holds the store's write lock from start to end
// (other callers wait: they never see part of it), records how to undo each
// store write it makes, and holds its enqueues back until the commit; a
// failing or panicking fn runs the undo records newest first, so the store
// is exactly as before, and enqueues nothing.
type Transactor struct {
	store *ReleaseStore
	queue *Queue
}

var _ ports.Transactor = (*Transactor)(nil)

// NewTransactor returns the transactor of store and queue (both required).
func NewTransactor(store *ReleaseStore, queue *Queue) *Transactor {
	return &Transactor{store: store, queue: queue}
}

// txKey is the context key of the transaction InTx opened.
type txKey struct{}

// memTx is one open transaction. fn must not use its context from several
// goroutines at once (as with a database transaction).
type memTx struct {
	store    *ReleaseStore
	queue    *Queue
	undo     []func()
	enqueues []ports.EnqueueParams
	// commits run once the transaction has committed (published changes).
	commits []func()
}

// txOf returns the transaction ctx carries, nil when none.
func txOf(ctx context.Context) *memTx {
	t, _ := ctx.Value(txKey{}).(*memTx)
	return t
}

// InTx implements ports.Transactor.
func (x *Transactor) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if t := txOf(ctx); t != nil && t.store == x.store && t.queue == x.queue {
		return t.nested(ctx, fn)
	}
	tx := &memTx{store: x.store, queue: x.queue}
	x.store.mu.Lock()
	committed := false
	defer func() {
		if !committed { // also on panic; the panic goes on
			for _, u := range slices.Backward(tx.undo) {
				u()
			}
		}
		x.store.mu.Unlock()
	}()
	if err := fn(context.WithValue(ctx, txKey{}, tx)); err != nil {
		return err
	}
	// Enqueues were validated as they were made, so this cannot fail; the
	// store is still locked, so a worker woken now reads the committed state.
	if err := x.queue.WorkEnqueue(ctx, tx.enqueues...); err != nil {
		return fmt.Errorf("commit enqueues: %w", err)
	}
	committed = true
	for _, f := range tx.commits {
		f()
	}
	return nil
}

// nested runs fn inside t as a savepoint: when fn fails, the writes,
// enqueues and commit hooks it added are undone (newest first) and the
// enclosing transaction goes on without them.
func (t *memTx) nested(ctx context.Context, fn func(ctx context.Context) error) error {
	undo, enqueues, commits := len(t.undo), len(t.enqueues), len(t.commits)
	err := fn(ctx)
	if err != nil {
		for _, u := range slices.Backward(t.undo[undo:]) {
			u()
		}
		t.undo, t.enqueues, t.commits = t.undo[:undo], t.enqueues[:enqueues], t.commits[:commits]
	}
	return err
}

// onCommit runs f once ctx's transaction has committed, and reports true;
// it reports false when ctx carries no transaction.
func onCommit(ctx context.Context, f func()) bool {
	t := txOf(ctx)
	if t == nil {
		return false
	}
	t.commits = append(t.commits, f)
	return true
}

// inTx reports whether ctx carries a transaction of this store, whose lock
// it then holds.
func (s *ReleaseStore) inTx(ctx context.Context) bool {
	t := txOf(ctx)
	return t != nil && t.store == s
}

// lock takes the write lock unless ctx's transaction holds it, and returns
// its release.
func (s *ReleaseStore) lock(ctx context.Context) func() {
	if s.inTx(ctx) {
		return func() {}
	}
	s.mu.Lock()
	return s.mu.Unlock
}

// rlock is lock for a read.
func (s *ReleaseStore) rlock(ctx context.Context) func() {
	if s.inTx(ctx) {
		return func() {}
	}
	s.mu.RLock()
	return s.mu.RUnlock
}

// onUndo records how to undo a write just made, when ctx carries a
// transaction of this store; the caller holds the lock.
func (s *ReleaseStore) onUndo(ctx context.Context, undo func()) {
	if t := txOf(ctx); t != nil && t.store == s {
		t.undo = append(t.undo, undo)
	}
}

// restore puts back a map entry as it was before a write: old when it was
// there, else nothing.
func restore[K comparable, V any](m map[K]V, k K, old V, had bool) {
	if had {
		m[k] = old
	} else {
		delete(m, k)
	}
}

// holdEnqueues keeps valid items for ctx's transaction's commit and reports
// true, when ctx carries a transaction of this queue.
func (q *Queue) holdEnqueues(ctx context.Context, items []ports.EnqueueParams) bool {
	t := txOf(ctx)
	if t == nil || t.queue != q {
		return false
	}
	t.enqueues = append(t.enqueues, items...)
	return true
}
