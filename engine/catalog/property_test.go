package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// TestLifecycleProperty runs random operation sequences through the service
// and checks after every step:
//   - published content never changes: a (object, number) always has the
//     content and id it was published with;
//   - revision numbers strictly increase per object and are never reused;
//   - an object has at most one open draft;
//   - every lifecycle change is an edge of revision.Edges;
//   - a refused operation changes nothing at all.
func TestLifecycleProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		store := memory.NewCatalog(ports.SystemClock)
		s := catalog.New(store, schemaOnly)
		objs := []revision.Object{wt("a"), wt("b"), {Kind: revision.KindPolicy, Name: "a"}}
		published := map[string]ports.Revision{}
		highest := map[revision.Object]int{}
		last := map[string]ports.Revision{}

		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for range steps {
			before := listAll(rt, store)
			err := randomOp(rt, ctx, s, before, objs)
			after := listAll(rt, store)
			if err != nil {
				if !isDomainError(err) {
					rt.Fatalf("unexpected error kind: %v", err)
				}
				require.Equal(rt, before, after, "a refused operation changed the store: %v", err)
			}

			open := map[revision.Object]int{}
			for _, r := range after {
				if prev, ok := last[r.ID]; ok && prev.Lifecycle != r.Lifecycle && !revision.Allowed(prev.Lifecycle, r.Lifecycle) {
					rt.Fatalf("%s went %s → %s, not an edge", r.ID, prev.Lifecycle, r.Lifecycle)
				}
				if r.Lifecycle.Open() {
					open[r.Object()]++
					require.Zero(rt, r.Revision)
					continue
				}
				key := fmt.Sprintf("%s#%d", r.Object(), r.Revision)
				if p, seen := published[key]; seen {
					require.Equal(rt, p.ID, r.ID, "number %s reassigned", key)
					require.Equal(rt, string(p.Content), string(r.Content), "published content of %s changed", key)
					require.Equal(rt, p.ApprovedBy, r.ApprovedBy)
					continue
				}
				require.Greater(rt, r.Revision, highest[r.Object()], "numbers strictly increase")
				highest[r.Object()] = r.Revision
				published[key] = r
			}
			for obj, n := range open {
				require.LessOrEqual(rt, n, 1, "%s has %d open drafts", obj, n)
			}
			clear(last)
			for _, r := range after {
				last[r.ID] = r
			}
		}
	})
}

// listAll reads every stored revision.
func listAll(t *rapid.T, store ports.Catalog) []ports.Revision {
	all, err := store.CatalogList(context.Background(), ports.CatalogListParams{})
	require.NoError(t, err)
	return all
}

// isDomainError reports whether err is one of the catalog's typed refusals.
func isDomainError(err error) bool {
	for _, target := range []error{revision.ErrConflict, revision.ErrInvalidTransition, revision.ErrImmutable, revision.ErrValidation, ports.ErrNotFound} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// randomOp draws one service call on one of the stored revisions (or a
// create) and runs it.
func randomOp(t *rapid.T, ctx context.Context, s *catalog.Service, all []ports.Revision, objs []revision.Object) error {
	if len(all) == 0 || rapid.IntRange(0, 5).Draw(t, "create?") == 0 {
		obj := rapid.SampledFrom(objs).Draw(t, "obj")
		p := catalog.CreateParams{Kind: obj.Kind, Name: obj.Name, Content: doc(rapid.IntRange(0, 3).Draw(t, "n"))}
		if rapid.Bool().Draw(t, "from?") {
			p.Content, p.From = nil, rapid.IntRange(1, 4).Draw(t, "from")
		}
		_, err := s.Create(ctx, p)
		return err
	}
	r := rapid.SampledFrom(all).Draw(t, "rev")
	version := r.Version
	if rapid.IntRange(0, 9).Draw(t, "stale?") == 0 {
		version--
	}
	ref := r.Ref()
	c := catalog.Change{Ref: ref, Version: version}
	ops := map[string]func() error{
		"edit": func() error {
			_, err := s.Edit(ctx, catalog.EditParams{Ref: ref, Version: version, Content: doc(rapid.IntRange(0, 3).Draw(t, "n"))})
			return err
		},
		"propose":   func() error { _, err := s.Propose(ctx, c); return err },
		"unpropose": func() error { _, err := s.Unpropose(ctx, c); return err },
		"approve": func() error {
			_, err := s.Approve(ctx, catalog.ApproveParams{Ref: ref, Version: version, Approver: rapid.SampledFrom([]string{"ana", "bo"}).Draw(t, "approver")})
			return err
		},
		"reject": func() error {
			_, err := s.Reject(ctx, catalog.RejectParams{Ref: ref, Version: version, Reason: "r"})
			return err
		},
		"propose-delete":      func() error { _, err := s.ProposeDelete(ctx, c); return err },
		"undo-propose-delete": func() error { _, err := s.UndoProposeDelete(ctx, c); return err },
		"delete":              func() error { return s.Delete(ctx, c) },
		"metadata": func() error {
			_, err := s.UpdateMetadata(ctx, catalog.MetadataParams{Ref: ref, Version: version, Labels: map[string]string{"k": rapid.StringMatching(`[a-z]{0,3}`).Draw(t, "v")}})
			return err
		},
	}
	name := rapid.SampledFrom(slices.Sorted(maps.Keys(ops))).Draw(t, "op")
	return ops[name]()
}
