package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// ReleaseStore is the Postgres ports.ReleaseStore (every small port of the
// release chain) over the release_* tables of migration 0004. Every query goes through idb(ctx), so it joins the
// caller's DB.InTx; multi-statement writes (TargetsReplace) open or join
// one. Each method is one statement on its normal path; a second query runs
// only to explain a write that matched nothing (not found, conflict,
// invalid).
type ReleaseStore struct {
	// Catalog holds the policies' (and workflow templates') revisions in
	// the same database; the chain evaluates the latest published policy
	// revisions, which TargetFactsGet reads in its one statement.
	*Catalog

	db     *DB
	clock  ports.Clock
	onPage func(rows int)
	// takers listens for JobTakeNotify, from its first call until Close.
	takers *notifier
}

var _ ports.ReleaseStore = (*ReleaseStore)(nil)

// ReleaseOption tunes NewReleaseStore.
type ReleaseOption func(*ReleaseStore)

// WithVersionPageHook calls fn with the row count of every page
// VersionsNewestFirst reads, so tests can count page reads.
func WithVersionPageHook(fn func(rows int)) ReleaseOption {
	return func(s *ReleaseStore) { s.onPage = fn }
}

// NewReleaseStore returns a store over db that stamps writes with clock.
// Close it (its Catalog's try-lock connections and its take listener)
// before closing db.
func NewReleaseStore(db *DB, clock ports.Clock, opts ...ReleaseOption) *ReleaseStore {
	s := &ReleaseStore{Catalog: NewCatalog(db, clock), db: db, clock: clock,
		takers: newNotifier(db.pool.Config().ConnConfig, jobsChannel)}
	for _, o := range opts {
		o(s)
	}
	return s
}

var _ ports.Transactor = (*ReleaseStore)(nil)

// InTx implements ports.Transactor with DB.InTx: the store's calls, and
// those of the other adapters on the same DB (the Queue), join it.
func (s *ReleaseStore) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	return s.db.InTx(ctx, fn)
}

// now reads the clock at the precision Postgres keeps.
func (s *ReleaseStore) now() time.Time { return ports.StoredTime(s.clock.Now()) }

// relNullTime is t, or NULL for the zero time.
func relNullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return ports.StoredTime(t)
}

// exec runs a statement and returns the rows it affected.
func (s *ReleaseStore) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := s.db.idb(ctx).NewRaw(q, args...).Exec(ctx)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// hotScan runs q, written with bun's ?N placeholders, as a hot statement
// (DB.hotQuery) and scans its first row into dest; no row is
// sql.ErrNoRows. For the statements every chain pass runs.
func (s *ReleaseStore) hotScan(ctx context.Context, q string, args []any, dest ...any) error {
	return scanOne(s.db.hotQuery(ctx, hotText(q), args...))(dest...)
}

// hotExecN is hotScan for a statement without rows; it returns the rows
// affected.
func (s *ReleaseStore) hotExecN(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := s.db.hotExec(ctx, hotText(q), args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// hotTexts caches dollarParams per statement text.
var hotTexts sync.Map

// hotText is dollarParams(q), computed once per text.
func hotText(q string) string {
	if v, ok := hotTexts.Load(q); ok {
		return v.(string)
	}
	h := dollarParams(q)
	hotTexts.Store(q, h)
	return h
}

// scan runs a query into dest; no row is sql.ErrNoRows for a single-row
// dest.
func (s *ReleaseStore) scan(ctx context.Context, q string, args []any, dest ...any) error {
	return s.db.idb(ctx).NewRaw(q, args...).Scan(ctx, dest...)
}

// relEncode encodes a document; a value JSON cannot hold (NaN, a channel)
// is invalid input at field.
func relEncode(field string, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", release.Invalid(field, err.Error())
	}
	return string(b), nil
}

// relStored decodes a document row.
func relStored[T any](r *docRow) (ports.Stored[T], error) {
	var v T
	if err := json.Unmarshal(r.Doc, &v); err != nil {
		return ports.Stored[T]{}, fmt.Errorf("decode: %w", err)
	}
	return ports.Stored[T]{Value: v, Version: r.Version, UpdatedAt: r.UpdatedAt.UTC()}, nil
}
