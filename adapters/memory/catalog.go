package memory

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// Catalog is an in-memory ports.Catalog. It is goroutine-safe and keeps
// private deep copies of every revision. Each object remembers the highest
// number it ever published, so numbers are never reused after a deletion;
// the try-lock table holds only the keys currently locked.
type Catalog struct {
	clock ports.Clock

	mu      sync.RWMutex
	objects map[revision.Object]*catalogObject

	locksMu sync.Mutex
	// locks maps each held key to the token of its holder.
	locks     map[string]uint64
	nextToken uint64

	// changes receives catalog.revision changes (ReleaseStore.SetChanges).
	changes *Changes
}

// catalogObject holds the revisions of one object.
type catalogObject struct {
	revs map[string]*ports.Revision
	// highest is the highest number the object ever published.
	highest int
	// open is the id of the object's open draft, "" when it has none.
	open string
}

var _ ports.Catalog = (*Catalog)(nil)

// NewCatalog returns an empty catalog that stamps revisions with clock.
func NewCatalog(clock ports.Clock) *Catalog {
	return &Catalog{clock: clock, objects: map[revision.Object]*catalogObject{}, locks: map[string]uint64{}}
}

// now reads the clock at the precision Postgres keeps.
func (c *Catalog) now() time.Time { return ports.StoredTime(c.clock.Now()) }

// CatalogCreate stores a new Draft revision at version 1.
func (c *Catalog) CatalogCreate(ctx context.Context, rev ports.Revision) (ports.Revision, error) {
	ref := rev.Ref()
	if err := revision.Invalid(ports.ValidateRevisionRef(ref), ports.ValidateRevisionContent(rev.Content)); err != nil {
		return ports.Revision{}, fmt.Errorf("create revision: %w", err)
	}
	if rev.Lifecycle != revision.Absent && rev.Lifecycle != revision.Draft {
		return ports.Revision{}, fmt.Errorf("create revision %s: %w", ref,
			&revision.TransitionError{From: revision.Absent, To: rev.Lifecycle, Op: revision.OpCreate})
	}
	stored := copyRevision(&rev)
	stored.Lifecycle, stored.Revision, stored.Version, stored.ApprovedBy, stored.EditedBy = revision.Draft, 0, 1, "", ""
	stored.PublishedAt = time.Time{}

	c.mu.Lock()
	defer c.mu.Unlock()
	c.undoInTx(ctx, ref.Object())
	obj := c.objects[ref.Object()]
	if obj == nil {
		obj = &catalogObject{revs: map[string]*ports.Revision{}}
		c.objects[ref.Object()] = obj
	}
	if _, dup := obj.revs[ref.ID]; dup {
		return ports.Revision{}, fmt.Errorf("create revision: %w", ports.CatalogConflict("revision %s already exists", ref))
	}
	if obj.open != "" {
		return ports.Revision{}, fmt.Errorf("create revision %s: %w", ref,
			ports.CatalogConflict("%s already has an open draft %s", ref.Object(), obj.open))
	}
	now := c.now()
	stored.CreatedAt, stored.UpdatedAt = now, now
	obj.revs[ref.ID] = &stored
	obj.open = ref.ID
	c.changes.publishAfterCommit(ctx, ports.RevisionChange(&stored, "", false, now)...)
	return copyRevision(&stored), nil
}

// CatalogGet returns a copy of the stored revision, or ErrNotFound.
func (c *Catalog) CatalogGet(_ context.Context, ref ports.RevisionRef) (ports.Revision, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	r, err := c.lookup(ref)
	if err != nil {
		return ports.Revision{}, fmt.Errorf("get revision: %w", err)
	}
	return copyRevision(r), nil
}

// CatalogList returns copies of the matching revisions in listing order.
func (c *Catalog) CatalogList(_ context.Context, p ports.CatalogListParams) ([]ports.Revision, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []ports.Revision
	add := func(obj *catalogObject) {
		for _, r := range obj.revs {
			if p.Revision != 0 && r.Revision != p.Revision {
				continue
			}
			if len(p.Lifecycles) > 0 && !slices.Contains(p.Lifecycles, r.Lifecycle) {
				continue
			}
			out = append(out, copyRevision(r))
		}
	}
	if p.Kind != "" && p.Name != "" {
		// One object: no scan of the others.
		if obj := c.objects[revision.Object{Kind: p.Kind, Name: p.Name}]; obj != nil {
			add(obj)
		}
	} else {
		for key, obj := range c.objects {
			if (p.Kind == "" || key.Kind == p.Kind) && (p.Name == "" || key.Name == p.Name) {
				add(obj)
			}
		}
	}
	slices.SortFunc(out, compareListed)
	return out, nil
}

// compareListed orders revisions by kind, name, published ones by number,
// then unpublished ones, then id.
func compareListed(a, b ports.Revision) int {
	return cmp.Or(
		cmp.Compare(a.Kind, b.Kind),
		cmp.Compare(a.Name, b.Name),
		cmp.Compare(unpublishedLast(a.Revision), unpublishedLast(b.Revision)),
		cmp.Compare(a.Revision, b.Revision),
		cmp.Compare(a.ID, b.ID),
	)
}

// unpublishedLast ranks number 0 (an open draft) after every published
// number.
func unpublishedLast(number int) int {
	if number == 0 {
		return 1
	}
	return 0
}

// CatalogUpdate applies one compare-and-swap write.
func (c *Catalog) CatalogUpdate(ctx context.Context, p ports.CatalogUpdateParams) (ports.Revision, error) {
	if err := ports.ValidateRevisionRef(p.Ref); err != nil {
		return ports.Revision{}, fmt.Errorf("update revision: %w", err)
	}
	if p.Content != nil {
		if err := ports.ValidateRevisionContent(p.Content); err != nil {
			return ports.Revision{}, fmt.Errorf("update revision %s: %w", p.Ref, err)
		}
	}
	content := bytes.Clone(p.Content)
	labels, annotations := copyLabels(p.Labels), copyLabels(p.Annotations)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.undoInTx(ctx, p.Ref.Object())
	r, err := c.lookup(p.Ref)
	if err != nil {
		return ports.Revision{}, fmt.Errorf("update revision: %w", err)
	}
	if r.Version != p.ExpectedVersion {
		return ports.Revision{}, fmt.Errorf("update revision: %w", staleConflict(p.Ref, p.ExpectedVersion, r.Version))
	}
	to := cmp.Or(p.Lifecycle, r.Lifecycle)
	u := revision.Update{From: r.Lifecycle, To: to, ApprovedBy: p.ApprovedBy,
		ContentChanged: content != nil && !bytes.Equal(content, r.Content)}
	if err := revision.CheckUpdate(u); err != nil {
		return ports.Revision{}, fmt.Errorf("update revision %s: %w", p.Ref, err)
	}
	obj := c.objects[p.Ref.Object()]
	now := c.now()
	if revision.Publishes(r.Lifecycle, to) {
		obj.highest = revision.NextNumber(obj.highest)
		r.Revision, r.ApprovedBy, r.PublishedAt = obj.highest, p.ApprovedBy, now
		obj.open = ""
	}
	old := r.Lifecycle
	r.Lifecycle = to
	c.changes.publishAfterCommit(ctx, ports.RevisionChange(r, string(old), false, now)...)
	if u.ContentChanged {
		r.Content, r.EditedBy = content, p.EditedBy
	}
	if p.Labels != nil {
		r.Labels = labels
	}
	if p.Annotations != nil {
		r.Annotations = annotations
	}
	r.Version++
	r.UpdatedAt = now
	return copyRevision(r), nil
}

// CatalogDelete removes a deletable revision whose version matches.
func (c *Catalog) CatalogDelete(ctx context.Context, ref ports.RevisionRef, expectedVersion int64) error {
	if err := ports.ValidateRevisionRef(ref); err != nil {
		return fmt.Errorf("delete revision: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.undoInTx(ctx, ref.Object())
	r, err := c.lookup(ref)
	if err != nil {
		return fmt.Errorf("delete revision: %w", err)
	}
	if r.Version != expectedVersion {
		return fmt.Errorf("delete revision: %w", staleConflict(ref, expectedVersion, r.Version))
	}
	if _, err := revision.Apply(r.Lifecycle, revision.OpDelete); err != nil {
		return fmt.Errorf("delete revision %s: %w", ref, err)
	}
	obj := c.objects[ref.Object()]
	c.changes.publishAfterCommit(ctx, ports.RevisionChange(r, string(r.Lifecycle), true, c.now())...)
	delete(obj.revs, ref.ID)
	if obj.open == ref.ID {
		obj.open = ""
	}
	// The object entry stays, empty or not: it remembers the highest number.
	return nil
}

// CatalogLatestPublished returns the highest-numbered Published revision of
// the object, or ErrNotFound.
func (c *Catalog) CatalogLatestPublished(_ context.Context, kind revision.Kind, name string) (ports.Revision, error) {
	key := revision.Object{Kind: kind, Name: name}
	c.mu.RLock()
	defer c.mu.RUnlock()
	var best *ports.Revision
	if obj := c.objects[key]; obj != nil {
		for _, r := range obj.revs {
			if r.Lifecycle == revision.Published && (best == nil || r.Revision > best.Revision) {
				best = r
			}
		}
	}
	if best == nil {
		return ports.Revision{}, fmt.Errorf("latest published %s: %w", key, ports.ErrNotFound)
	}
	return copyRevision(best), nil
}

// undoInTx records, when ctx carries a transaction of the release store
// that owns c, how to put object key back as it is now, so a failing
// transaction undoes the catalog's writes too. The caller holds c.mu.
func (c *Catalog) undoInTx(ctx context.Context, key revision.Object) {
	t := txOf(ctx)
	if t == nil || t.store.Catalog != c {
		return
	}
	old := c.objects[key]
	var saved *catalogObject
	if old != nil {
		saved = &catalogObject{revs: make(map[string]*ports.Revision, len(old.revs)), highest: old.highest, open: old.open}
		for id, r := range old.revs {
			cp := copyRevision(r)
			saved.revs[id] = &cp
		}
	}
	t.undo = append(t.undo, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if saved == nil {
			delete(c.objects, key)
			return
		}
		c.objects[key] = saved
	})
}

// CatalogLatestPublishedAll returns the latest Published revision of every
// object of kind, by name.
func (c *Catalog) CatalogLatestPublishedAll(_ context.Context, kind revision.Kind) ([]ports.Revision, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []ports.Revision
	for key, obj := range c.objects {
		if key.Kind != kind {
			continue
		}
		var best *ports.Revision
		for _, r := range obj.revs {
			if r.Lifecycle == revision.Published && (best == nil || r.Revision > best.Revision) {
				best = r
			}
		}
		if best != nil {
			out = append(out, copyRevision(best))
		}
	}
	slices.SortFunc(out, func(a, b ports.Revision) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// CatalogTryLock takes key if no one holds it. The entry is deleted on
// unlock, so the table holds only held keys.
func (c *Catalog) CatalogTryLock(_ context.Context, key string) (func(), error) {
	c.locksMu.Lock()
	defer c.locksMu.Unlock()
	if _, held := c.locks[key]; held {
		return nil, ports.CatalogLockConflict(key)
	}
	c.nextToken++
	token := c.nextToken
	c.locks[key] = token
	var once sync.Once
	return func() {
		once.Do(func() {
			c.locksMu.Lock()
			defer c.locksMu.Unlock()
			if c.locks[key] == token {
				delete(c.locks, key)
			}
		})
	}, nil
}

// heldLocks reports how many keys are locked (for tests).
func (c *Catalog) heldLocks() int {
	c.locksMu.Lock()
	defer c.locksMu.Unlock()
	return len(c.locks)
}

// lookup finds the stored revision; the caller holds mu.
func (c *Catalog) lookup(ref ports.RevisionRef) (*ports.Revision, error) {
	if obj := c.objects[ref.Object()]; obj != nil {
		if r, ok := obj.revs[ref.ID]; ok {
			return r, nil
		}
	}
	return nil, fmt.Errorf("revision %s: %w", ref, ports.ErrNotFound)
}

// staleConflict is the conflict of a compare-and-swap on a stale version.
func staleConflict(ref ports.RevisionRef, expected, stored int64) error {
	return ports.CatalogConflict("revision %s changed: expected version %d, stored %d", ref, expected, stored)
}

// copyRevision deep-copies r; empty maps become nil.
func copyRevision(r *ports.Revision) ports.Revision {
	c := *r
	c.Content = bytes.Clone(r.Content)
	c.Labels = copyLabels(r.Labels)
	c.Annotations = copyLabels(r.Annotations)
	c.CreatedAt, c.UpdatedAt, c.PublishedAt = ports.StoredTime(r.CreatedAt), ports.StoredTime(r.UpdatedAt), ports.StoredTime(r.PublishedAt)
	return c
}

// copyLabels copies a label or annotation map; empty becomes nil.
func copyLabels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}
