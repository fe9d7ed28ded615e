package postgres

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// Catalog is the Postgres ports.Catalog over the catalog_objects and
// catalog_revisions tables. Every write runs in one transaction (joining the
// caller's DB.InTx when there is one) that locks the revision's row, checks
// the version and the lifecycle rules of package revision in Go — the same
// code the memory adapter runs — and writes. Publishing takes the next
// number from catalog_objects under that row's lock. The try-lock is a
// session advisory lock held on a dedicated connection from a small pool of
// its own, so it excludes every process sharing the database and never
// starves the changes it guards of connections. Close releases that pool.
type Catalog struct {
	db    *DB
	clock ports.Clock

	// locks is the pool of try-lock connections, opened on first use.
	lockOnce sync.Once
	locks    *pgxpool.Pool
	lockErr  error
}

var _ ports.Catalog = (*Catalog)(nil)

// NewCatalog returns a catalog over db that stamps revisions with clock.
func NewCatalog(db *DB, clock ports.Clock) *Catalog {
	return &Catalog{db: db, clock: clock}
}

// catalogLockClass is the first key of the catalog's advisory locks ("cata");
// the second is a hash of the schema and the lock key, so schemas lock
// independently.
const catalogLockClass = 0x63617461

// catalogColumns selects a revision row, with json columns as text so the
// content reads back byte for byte.
const catalogColumns = `kind, name, id, number, lifecycle, content::text AS content,
	labels::text AS labels, annotations::text AS annotations, version, approved_by,
	created_by, edited_by, created_at, updated_at, published_at`

// catalogRow is one row of catalog_revisions as read.
type catalogRow struct {
	Kind        revision.Kind      `bun:"kind"`
	Name        string             `bun:"name"`
	ID          string             `bun:"id"`
	Number      int                `bun:"number"`
	Lifecycle   revision.Lifecycle `bun:"lifecycle"`
	Content     string             `bun:"content"`
	Labels      string             `bun:"labels"`
	Annotations string             `bun:"annotations"`
	Version     int64              `bun:"version"`
	ApprovedBy  string             `bun:"approved_by"`
	CreatedBy   string             `bun:"created_by"`
	EditedBy    string             `bun:"edited_by"`
	CreatedAt   time.Time          `bun:"created_at"`
	UpdatedAt   time.Time          `bun:"updated_at"`
	PublishedAt sql.NullTime       `bun:"published_at"`
}

// revision converts the row to the port's type.
func (m *catalogRow) revision() (ports.Revision, error) {
	r := ports.Revision{
		Kind: m.Kind, Name: m.Name, ID: m.ID, Revision: m.Number, Lifecycle: m.Lifecycle,
		Content: json.RawMessage(m.Content), Version: m.Version, ApprovedBy: m.ApprovedBy,
		CreatedBy: m.CreatedBy, EditedBy: m.EditedBy,
		CreatedAt: runUTC(m.CreatedAt), UpdatedAt: runUTC(m.UpdatedAt),
	}
	if m.PublishedAt.Valid {
		r.PublishedAt = runUTC(m.PublishedAt.Time)
	}
	var err error
	if r.Labels, err = decodeLabels(m.Labels); err != nil {
		return ports.Revision{}, fmt.Errorf("revision %s: labels: %w", r.Ref(), err)
	}
	if r.Annotations, err = decodeLabels(m.Annotations); err != nil {
		return ports.Revision{}, fmt.Errorf("revision %s: annotations: %w", r.Ref(), err)
	}
	return r, nil
}

// decodeLabels reads a stored label object; empty becomes nil.
func decodeLabels(s string) (map[string]string, error) {
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}

// encodeLabels renders labels as a JSON object; nil becomes {}.
func encodeLabels(m map[string]string) (string, error) {
	if len(m) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(m)
	return string(b), err
}

// now reads the clock at the precision Postgres keeps.
func (c *Catalog) now() time.Time { return c.clock.Now().UTC().Truncate(time.Microsecond) }

// CatalogCreate stores a new Draft revision at version 1. Both inserts skip
// on conflict rather than fail, so a duplicate or a second open draft does
// not abort the caller's transaction; a skipped insert is then explained.
func (c *Catalog) CatalogCreate(ctx context.Context, rev ports.Revision) (ports.Revision, error) {
	ref := rev.Ref()
	if err := revision.Invalid(ports.ValidateRevisionRef(ref), ports.ValidateRevisionContent(rev.Content)); err != nil {
		return ports.Revision{}, fmt.Errorf("create revision: %w", err)
	}
	if rev.Lifecycle != revision.Absent && rev.Lifecycle != revision.Draft {
		return ports.Revision{}, fmt.Errorf("create revision %s: %w", ref,
			&revision.TransitionError{From: revision.Absent, To: rev.Lifecycle, Op: revision.OpCreate})
	}
	labels, err := encodeLabels(rev.Labels)
	if err != nil {
		return ports.Revision{}, fmt.Errorf("create revision %s: labels: %w", ref, err)
	}
	annotations, err := encodeLabels(rev.Annotations)
	if err != nil {
		return ports.Revision{}, fmt.Errorf("create revision %s: annotations: %w", ref, err)
	}
	now := c.now()
	var out ports.Revision
	err = c.db.InTx(ctx, func(ctx context.Context) error {
		idb := c.db.idb(ctx)
		if _, err := idb.NewRaw(`INSERT INTO catalog_objects (kind, name) VALUES (?, ?) ON CONFLICT DO NOTHING`,
			ref.Kind, ref.Name).Exec(ctx); err != nil {
			return err
		}
		var rows []catalogRow
		err := idb.NewRaw(`INSERT INTO catalog_revisions
			(kind, name, id, number, lifecycle, content, labels, annotations, version, created_by, created_at, updated_at)
			VALUES (?, ?, ?, 0, ?, ?::json, ?::jsonb, ?::jsonb, 1, ?, ?, ?)
			ON CONFLICT DO NOTHING RETURNING `+catalogColumns,
			ref.Kind, ref.Name, ref.ID, revision.Draft, string(rev.Content), labels, annotations, rev.CreatedBy, now, now,
		).Scan(ctx, &rows)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return c.createConflict(ctx, ref)
		}
		out, err = rows[0].revision()
		return err
	})
	if err != nil {
		return ports.Revision{}, fmt.Errorf("create revision %s: %w", ref, err)
	}
	return out, nil
}

// createConflict explains an insert that a unique index skipped: the id is
// taken, or the object has an open draft.
func (c *Catalog) createConflict(ctx context.Context, ref ports.RevisionRef) error {
	var rows []catalogRow
	err := c.db.idb(ctx).NewRaw(`SELECT `+catalogColumns+` FROM catalog_revisions
		WHERE kind = ? AND name = ? AND (id = ? OR lifecycle IN (?, ?)) ORDER BY id = ? DESC LIMIT 1`,
		ref.Kind, ref.Name, ref.ID, revision.Draft, revision.Proposed, ref.ID).Scan(ctx, &rows)
	switch {
	case err != nil:
		return err
	case len(rows) == 0:
		// The colliding row is gone already; the caller may retry.
		return ports.CatalogConflict("revision %s collided with a concurrent change", ref)
	case rows[0].ID == ref.ID:
		return ports.CatalogConflict("revision %s already exists", ref)
	}
	return ports.CatalogConflict("%s already has an open draft %s", ref.Object(), rows[0].ID)
}

// CatalogGet reads one revision, or ErrNotFound.
func (c *Catalog) CatalogGet(ctx context.Context, ref ports.RevisionRef) (ports.Revision, error) {
	r, err := c.get(ctx, ref, false)
	if err != nil {
		return ports.Revision{}, fmt.Errorf("get revision: %w", err)
	}
	return r, nil
}

// get reads one revision, locking its row when forUpdate.
func (c *Catalog) get(ctx context.Context, ref ports.RevisionRef, forUpdate bool) (ports.Revision, error) {
	q := `SELECT ` + catalogColumns + ` FROM catalog_revisions WHERE kind = ? AND name = ? AND id = ?`
	if forUpdate {
		q += ` FOR UPDATE`
	}
	var rows []catalogRow
	if err := c.db.idb(ctx).NewRaw(q, ref.Kind, ref.Name, ref.ID).Scan(ctx, &rows); err != nil {
		return ports.Revision{}, fmt.Errorf("revision %s: %w", ref, err)
	}
	if len(rows) == 0 {
		return ports.Revision{}, fmt.Errorf("revision %s: %w", ref, ports.ErrNotFound)
	}
	return rows[0].revision()
}

// CatalogList returns the matching revisions in listing order.
func (c *Catalog) CatalogList(ctx context.Context, p ports.CatalogListParams) ([]ports.Revision, error) {
	var where []string
	var args []any
	if p.Kind != "" {
		where, args = append(where, "kind = ?"), append(args, p.Kind)
	}
	if p.Name != "" {
		where, args = append(where, "name = ?"), append(args, p.Name)
	}
	if p.Revision != 0 {
		where, args = append(where, "number = ?"), append(args, p.Revision)
	}
	if len(p.Lifecycles) > 0 {
		marks := make([]string, len(p.Lifecycles))
		for i, l := range p.Lifecycles {
			marks[i] = "?"
			args = append(args, l)
		}
		where = append(where, "lifecycle IN ("+strings.Join(marks, ", ")+")")
	}
	q := `SELECT ` + catalogColumns + ` FROM catalog_revisions`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY kind, name, number = 0, number, id`
	var rows []catalogRow
	if err := c.db.idb(ctx).NewRaw(q, args...).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("list revisions: %w", err)
	}
	return catalogRevisions(rows)
}

// catalogRevisions converts rows; no rows is a nil slice.
func catalogRevisions(rows []catalogRow) ([]ports.Revision, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	out := make([]ports.Revision, len(rows))
	for i := range rows {
		r, err := rows[i].revision()
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// CatalogUpdate applies one compare-and-swap write in a transaction: lock
// the row, check version and rules, take a number when publishing, write.
func (c *Catalog) CatalogUpdate(ctx context.Context, p ports.CatalogUpdateParams) (ports.Revision, error) {
	if err := ports.ValidateRevisionRef(p.Ref); err != nil {
		return ports.Revision{}, fmt.Errorf("update revision: %w", err)
	}
	if p.Content != nil {
		if err := ports.ValidateRevisionContent(p.Content); err != nil {
			return ports.Revision{}, fmt.Errorf("update revision %s: %w", p.Ref, err)
		}
	}
	var out ports.Revision
	err := c.db.InTx(ctx, func(ctx context.Context) error {
		cur, err := c.get(ctx, p.Ref, true)
		if err != nil {
			return err
		}
		if cur.Version != p.ExpectedVersion {
			return catalogStale(p.Ref, p.ExpectedVersion, cur.Version)
		}
		to := cmp.Or(p.Lifecycle, cur.Lifecycle)
		u := revision.Update{From: cur.Lifecycle, To: to, ApprovedBy: p.ApprovedBy,
			ContentChanged: p.Content != nil && !bytes.Equal(p.Content, cur.Content)}
		if err := revision.CheckUpdate(u); err != nil {
			return err
		}
		next := cur
		next.Lifecycle = to
		if u.ContentChanged {
			next.Content, next.EditedBy = p.Content, p.EditedBy
		}
		if p.Labels != nil {
			next.Labels = p.Labels
		}
		if p.Annotations != nil {
			next.Annotations = p.Annotations
		}
		now := c.now()
		if revision.Publishes(cur.Lifecycle, to) {
			number, err := c.takeNumber(ctx, p.Ref.Object())
			if err != nil {
				return err
			}
			next.Revision = number
			next.ApprovedBy, next.PublishedAt = p.ApprovedBy, now
		}
		out, err = c.write(ctx, next, now)
		return err
	})
	if err != nil {
		return ports.Revision{}, fmt.Errorf("update revision %s: %w", p.Ref, err)
	}
	return out, nil
}

// takeNumber advances the object's highest number to revision.NextNumber of
// it, under the object row's lock, and returns the new number.
func (c *Catalog) takeNumber(ctx context.Context, obj revision.Object) (int, error) {
	var highest int
	if err := c.db.idb(ctx).NewRaw(`SELECT highest_number FROM catalog_objects WHERE kind = ? AND name = ? FOR UPDATE`,
		obj.Kind, obj.Name).Scan(ctx, &highest); err != nil {
		return 0, fmt.Errorf("take a number: %w", err)
	}
	number := revision.NextNumber(highest)
	if _, err := c.db.idb(ctx).NewRaw(`UPDATE catalog_objects SET highest_number = ? WHERE kind = ? AND name = ?`,
		number, obj.Kind, obj.Name).Exec(ctx); err != nil {
		return 0, fmt.Errorf("take a number: %w", err)
	}
	return number, nil
}

// write stores next over the locked row, bumping the version.
func (c *Catalog) write(ctx context.Context, next ports.Revision, now time.Time) (ports.Revision, error) {
	labels, err := encodeLabels(next.Labels)
	if err != nil {
		return ports.Revision{}, fmt.Errorf("labels: %w", err)
	}
	annotations, err := encodeLabels(next.Annotations)
	if err != nil {
		return ports.Revision{}, fmt.Errorf("annotations: %w", err)
	}
	var published any
	if !next.PublishedAt.IsZero() {
		published = next.PublishedAt
	}
	var rows []catalogRow
	err = c.db.idb(ctx).NewRaw(`UPDATE catalog_revisions SET
			lifecycle = ?, number = ?, content = ?::json, labels = ?::jsonb, annotations = ?::jsonb,
			approved_by = ?, edited_by = ?, published_at = ?, version = version + 1, updated_at = ?
		WHERE kind = ? AND name = ? AND id = ? RETURNING `+catalogColumns,
		next.Lifecycle, next.Revision, string(next.Content), labels, annotations,
		next.ApprovedBy, next.EditedBy, published, now, next.Kind, next.Name, next.ID,
	).Scan(ctx, &rows)
	if err != nil {
		return ports.Revision{}, err
	}
	if len(rows) == 0 {
		return ports.Revision{}, fmt.Errorf("revision %s: %w", next.Ref(), ports.ErrNotFound)
	}
	return rows[0].revision()
}

// catalogStale is the conflict of a compare-and-swap on a stale version.
func catalogStale(ref ports.RevisionRef, expected, stored int64) error {
	return ports.CatalogConflict("revision %s changed: expected version %d, stored %d", ref, expected, stored)
}

// CatalogDelete removes a deletable revision whose version matches.
func (c *Catalog) CatalogDelete(ctx context.Context, ref ports.RevisionRef, expectedVersion int64) error {
	if err := ports.ValidateRevisionRef(ref); err != nil {
		return fmt.Errorf("delete revision: %w", err)
	}
	err := c.db.InTx(ctx, func(ctx context.Context) error {
		cur, err := c.get(ctx, ref, true)
		if err != nil {
			return err
		}
		if cur.Version != expectedVersion {
			return catalogStale(ref, expectedVersion, cur.Version)
		}
		if _, err := revision.Apply(cur.Lifecycle, revision.OpDelete); err != nil {
			return err
		}
		_, err = c.db.idb(ctx).NewRaw(`DELETE FROM catalog_revisions WHERE kind = ? AND name = ? AND id = ?`,
			ref.Kind, ref.Name, ref.ID).Exec(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete revision %s: %w", ref, err)
	}
	return nil
}

// CatalogLatestPublished returns the highest-numbered Published revision of
// the object, or ErrNotFound.
func (c *Catalog) CatalogLatestPublished(ctx context.Context, kind revision.Kind, name string) (ports.Revision, error) {
	obj := revision.Object{Kind: kind, Name: name}
	var rows []catalogRow
	err := c.db.idb(ctx).NewRaw(`SELECT `+catalogColumns+` FROM catalog_revisions
		WHERE kind = ? AND name = ? AND lifecycle = ? ORDER BY number DESC LIMIT 1`,
		kind, name, revision.Published).Scan(ctx, &rows)
	if err != nil {
		return ports.Revision{}, fmt.Errorf("latest published %s: %w", obj, err)
	}
	if len(rows) == 0 {
		return ports.Revision{}, fmt.Errorf("latest published %s: %w", obj, ports.ErrNotFound)
	}
	r, err := rows[0].revision()
	if err != nil {
		return ports.Revision{}, fmt.Errorf("latest published %s: %w", obj, err)
	}
	return r, nil
}

// CatalogLatestPublishedAll returns the latest Published revision of every
// object of kind, by name, in one statement.
func (c *Catalog) CatalogLatestPublishedAll(ctx context.Context, kind revision.Kind) ([]ports.Revision, error) {
	var rows []catalogRow
	err := c.db.idb(ctx).NewRaw(`SELECT DISTINCT ON (name) `+catalogColumns+` FROM catalog_revisions
		WHERE kind = ? AND lifecycle = ? ORDER BY name, number DESC`, kind, revision.Published).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("latest published %ss: %w", kind, err)
	}
	out := make([]ports.Revision, len(rows))
	for i := range rows {
		if out[i], err = rows[i].revision(); err != nil {
			return nil, fmt.Errorf("latest published %ss: %w", kind, err)
		}
	}
	return out, nil
}

// catalogLockSQL is the advisory-lock key expression: the class and a hash
// of the schema and the key ($1).
var catalogLockSQL = strconv.Itoa(catalogLockClass) + ", hashtext(coalesce(current_schema(), '') || '/' || $1)"

// lockPool returns the pool lock connections come from, opening it on first
// use: a copy of the DB's pool configuration, so a held lock never takes a
// connection the change under it needs (which could deadlock a full pool).
func (c *Catalog) lockPool() (*pgxpool.Pool, error) {
	c.lockOnce.Do(func() {
		cfg := c.db.pool.Config()
		cfg.MinConns = 0
		cfg.MaxConnIdleTime = time.Minute
		c.locks, c.lockErr = pgxpool.NewWithConfig(context.Background(), cfg)
	})
	return c.locks, c.lockErr
}

// Close closes the connections the try-lock keeps; call it before closing
// the DB. Locks still held are released with their sessions.
func (c *Catalog) Close() {
	c.lockOnce.Do(func() { c.lockErr = errors.New("catalog closed") })
	if c.locks != nil {
		c.locks.Close()
	}
}

// CatalogTryLock takes the session advisory lock of key on a connection of
// its own, held until unlock, without waiting for the lock. Postgres keeps
// no row per lock, so a released lock leaves nothing behind.
func (c *Catalog) CatalogTryLock(ctx context.Context, key string) (func(), error) {
	pool, err := c.lockPool()
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", key, err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", key, err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock("+catalogLockSQL+")", key).Scan(&ok); err != nil {
		// The lock may or may not have been taken: end the session.
		discardConn(conn)
		return nil, fmt.Errorf("lock %s: %w", key, err)
	}
	if !ok {
		conn.Release()
		return nil, ports.CatalogLockConflict(key)
	}
	var once sync.Once
	return func() { once.Do(func() { unlockConn(conn, key) }) }, nil
}

// unlockConn releases key's advisory lock and returns the connection to the
// pool; when the unlock fails the session is ended instead, which releases
// the lock, so a pooled connection never holds one.
func unlockConn(conn *pgxpool.Conn, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var released bool
	err := conn.QueryRow(ctx, "SELECT pg_advisory_unlock("+catalogLockSQL+")", key).Scan(&released)
	if err != nil || !released {
		discardConn(conn)
		return
	}
	conn.Release()
}

// discardConn takes conn out of the pool and closes its session.
func discardConn(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = conn.Hijack().Close(ctx)
}
