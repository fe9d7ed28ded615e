package porttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// catalogRuns numbers the property's runs so each uses fresh object names.
var catalogRuns atomic.Int64

// catalogModel is what the property remembers between operations.
type catalogModel struct {
	prefix string
	// revs is the last state seen of every live revision, by id.
	revs map[string]ports.Revision
	// published is the content each (name, number) was published with.
	published map[string]string
	// highest is the highest number seen per name.
	highest map[string]int
}

// catalogProperty runs random operation sequences against the store and
// checks after every step: the store followed revision.Edges, published
// content never changes, numbers strictly increase per object and are never
// reused, and an object has at most one open draft.
func catalogProperty(t *testing.T, ctx context.Context, s ports.Catalog) {
	rapid.Check(t, func(rt *rapid.T) {
		m := &catalogModel{
			prefix:    fmt.Sprintf("prop-%d", catalogRuns.Add(1)),
			revs:      map[string]ports.Revision{},
			published: map[string]string{},
			highest:   map[string]int{},
		}
		names := []string{m.prefix + "-a", m.prefix + "-b"}
		steps := rapid.IntRange(1, 25).Draw(rt, "steps")
		for range steps {
			ids := slices.Sorted(maps.Keys(m.revs))
			if len(ids) == 0 || rapid.IntRange(0, 4).Draw(rt, "create?") == 0 {
				m.create(rt, ctx, s, rapid.SampledFrom(names).Draw(rt, "name"))
			} else {
				r := m.revs[rapid.SampledFrom(ids).Draw(rt, "id")]
				switch rapid.IntRange(0, 3).Draw(rt, "op") {
				case 0:
					m.move(rt, ctx, s, r, rapid.SampledFrom(revision.Lifecycles).Draw(rt, "to"))
				case 1:
					m.edit(rt, ctx, s, r, rapid.IntRange(0, 3).Draw(rt, "content"))
				case 2:
					m.delete(rt, ctx, s, r)
				case 3:
					_, err := s.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: r.Version - 1, Labels: map[string]string{"stale": "yes"}})
					require.True(rt, errorsIsConflict(err), "stale write: %v", err)
				}
			}
			for _, name := range names {
				m.check(rt, ctx, s, name)
			}
		}
	})
}

// create adds a draft unless the object has an open one.
func (m *catalogModel) create(t *rapid.T, ctx context.Context, s ports.Catalog, name string) {
	hasOpen := false
	for _, r := range m.revs {
		hasOpen = hasOpen || (r.Name == name && r.Lifecycle.Open())
	}
	r, err := s.CatalogCreate(ctx, catalogDraft(revision.KindWorkflowTemplate, name))
	if hasOpen {
		require.True(t, errorsIsConflict(err), "second open draft of %s: %v", name, err)
		return
	}
	require.NoError(t, err)
	m.revs[r.ID] = r
}

// move writes a lifecycle change; it succeeds exactly on table edges.
func (m *catalogModel) move(t *rapid.T, ctx context.Context, s ports.Catalog, r ports.Revision, to revision.Lifecycle) {
	got, err := s.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: r.Version, Lifecycle: to, ApprovedBy: "prop"})
	if r.Lifecycle != to && !revision.Allowed(r.Lifecycle, to) {
		require.ErrorIs(t, err, revision.ErrInvalidTransition, "%s → %s", r.Lifecycle, to)
		return
	}
	require.NoError(t, err, "%s → %s", r.Lifecycle, to)
	m.revs[r.ID] = got
}

// edit writes new content; it succeeds exactly on open drafts.
func (m *catalogModel) edit(t *rapid.T, ctx context.Context, s ports.Catalog, r ports.Revision, n int) {
	content := json.RawMessage(fmt.Sprintf(`{"spec":{"n":%d}}`, n))
	got, err := s.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: r.Version, Content: content})
	if !r.Lifecycle.Open() && string(content) != string(r.Content) {
		require.ErrorIs(t, err, revision.ErrImmutable)
		return
	}
	require.NoError(t, err)
	m.revs[r.ID] = got
}

// delete removes a revision; it succeeds exactly where the table has an edge
// to Absent.
func (m *catalogModel) delete(t *rapid.T, ctx context.Context, s ports.Catalog, r ports.Revision) {
	err := s.CatalogDelete(ctx, r.Ref(), r.Version)
	if !revision.Allowed(r.Lifecycle, revision.Absent) {
		require.True(t, errors.Is(err, revision.ErrInvalidTransition), "delete %s: %v", r.Lifecycle, err)
		return
	}
	require.NoError(t, err)
	delete(m.revs, r.ID)
}

// check compares the stored object with the model and the invariants.
func (m *catalogModel) check(t *rapid.T, ctx context.Context, s ports.Catalog, name string) {
	stored, err := s.CatalogList(ctx, ports.CatalogListParams{Kind: revision.KindWorkflowTemplate, Name: name})
	require.NoError(t, err)
	open := 0
	numbers := map[int]bool{}
	for _, r := range stored {
		want, ok := m.revs[r.ID]
		require.True(t, ok, "stored revision %s the model deleted or never made", r.ID)
		require.Equal(t, want, r)
		if r.Lifecycle.Open() {
			open++
			require.Zero(t, r.Revision, "an open draft has no number")
			continue
		}
		require.Positive(t, r.Revision, "a published revision has a number")
		require.False(t, numbers[r.Revision], "number %d used twice", r.Revision)
		numbers[r.Revision] = true
		key := fmt.Sprintf("%s#%d", name, r.Revision)
		if content, seen := m.published[key]; seen {
			require.Equal(t, content, string(r.Content), "published content of %s changed", key)
			continue
		}
		require.Greater(t, r.Revision, m.highest[name], "numbers strictly increase")
		m.highest[name] = r.Revision
		m.published[key] = string(r.Content)
	}
	require.LessOrEqual(t, open, 1, "at most one open draft per object")
	live := 0
	for _, r := range m.revs {
		if r.Name == name {
			live++
		}
	}
	require.Equal(t, live, len(stored), "every live revision is listed")
}
