package catalog_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// reach creates a revision of obj and drives it to l through the service.
func reach(t *testing.T, s *catalog.Service, obj revision.Object, l revision.Lifecycle) ports.Revision {
	t.Helper()
	ctx := t.Context()
	r := create(t, s, obj, 1)
	var err error
	if l == revision.Draft {
		return r
	}
	r, err = s.Propose(ctx, at(r))
	require.NoError(t, err)
	if l == revision.Proposed {
		return r
	}
	r, err = s.Approve(ctx, catalog.ApproveParams{Ref: r.Ref(), Version: r.Version, Approver: "ana"})
	require.NoError(t, err)
	if l == revision.Published {
		return r
	}
	r, err = s.ProposeDelete(ctx, at(r))
	require.NoError(t, err)
	return r
}

// serviceOp is one service operation as the table calls it; it returns the
// revision after the call (zero when deleted).
type serviceOp struct {
	name string
	call func(ctx context.Context, s *catalog.Service, r ports.Revision) (ports.Revision, error)
}

var serviceOps = []serviceOp{
	{"propose", func(ctx context.Context, s *catalog.Service, r ports.Revision) (ports.Revision, error) {
		return s.Propose(ctx, at(r))
	}},
	{"unpropose", func(ctx context.Context, s *catalog.Service, r ports.Revision) (ports.Revision, error) {
		return s.Unpropose(ctx, at(r))
	}},
	{"reject", func(ctx context.Context, s *catalog.Service, r ports.Revision) (ports.Revision, error) {
		return s.Reject(ctx, catalog.RejectParams{Ref: r.Ref(), Version: r.Version, Reason: "no"})
	}},
	{"approve", func(ctx context.Context, s *catalog.Service, r ports.Revision) (ports.Revision, error) {
		return s.Approve(ctx, catalog.ApproveParams{Ref: r.Ref(), Version: r.Version, Approver: "ana"})
	}},
	{"propose-delete", func(ctx context.Context, s *catalog.Service, r ports.Revision) (ports.Revision, error) {
		return s.ProposeDelete(ctx, at(r))
	}},
	{"undo-propose-delete", func(ctx context.Context, s *catalog.Service, r ports.Revision) (ports.Revision, error) {
		return s.UndoProposeDelete(ctx, at(r))
	}},
	{"delete", func(ctx context.Context, s *catalog.Service, r ports.Revision) (ports.Revision, error) {
		return ports.Revision{}, s.Delete(ctx, at(r))
	}},
	{"edit", func(ctx context.Context, s *catalog.Service, r ports.Revision) (ports.Revision, error) {
		return s.Edit(ctx, catalog.EditParams{Ref: r.Ref(), Version: r.Version, Content: doc(42)})
	}},
	{"update-metadata", func(ctx context.Context, s *catalog.Service, r ports.Revision) (ports.Revision, error) {
		return s.UpdateMetadata(ctx, catalog.MetadataParams{Ref: r.Ref(), Version: r.Version, Labels: map[string]string{"l": "v"}})
	}},
}

// TestTransitionTable calls every operation on a revision in every
// lifecycle. The expected outcome of each pair is written out from the
// issue's rules: the result lifecycle, revision.Absent for a deletion, or
// the refusal.
func TestTransitionTable(t *testing.T) {
	t.Parallel()
	const (
		invalid   = "invalid-transition"
		immutable = "immutable"
	)
	gone := string(revision.Absent)
	want := map[revision.Lifecycle]map[string]string{
		revision.Draft: {
			"propose": "proposed", "unpropose": invalid, "reject": invalid, "approve": invalid,
			"propose-delete": invalid, "undo-propose-delete": invalid, "delete": gone,
			"edit": "draft", "update-metadata": "draft",
		},
		revision.Proposed: {
			"propose": invalid, "unpropose": "draft", "reject": "draft", "approve": "published",
			"propose-delete": invalid, "undo-propose-delete": invalid, "delete": gone,
			"edit": "proposed", "update-metadata": "proposed",
		},
		revision.Published: {
			"propose": invalid, "unpropose": invalid, "reject": invalid, "approve": invalid,
			"propose-delete": "deletion-proposed", "undo-propose-delete": invalid, "delete": invalid,
			"edit": immutable, "update-metadata": "published",
		},
		revision.DeletionProposed: {
			"propose": invalid, "unpropose": invalid, "reject": invalid, "approve": invalid,
			"propose-delete": invalid, "undo-propose-delete": "published", "delete": gone,
			"edit": immutable, "update-metadata": "deletion-proposed",
		},
	}
	for _, from := range revision.Lifecycles {
		for _, op := range serviceOps {
			t.Run(fmt.Sprintf("%s/%s", from, op.name), func(t *testing.T) {
				s, _ := setup(t, schemaOnly)
				ctx := t.Context()
				r := reach(t, s, wt("obj"), from)
				expect := want[from][op.name]
				got, err := op.call(ctx, s, r)
				switch expect {
				case invalid, immutable:
					if expect == invalid {
						require.ErrorIs(t, err, revision.ErrInvalidTransition)
					} else {
						require.ErrorIs(t, err, revision.ErrImmutable)
					}
					requireSame(t, s, r)
				case gone:
					require.NoError(t, err)
					_, err := s.Get(ctx, r.Ref())
					require.ErrorIs(t, err, ports.ErrNotFound)
				default:
					require.NoError(t, err)
					require.Equal(t, revision.Lifecycle(expect), got.Lifecycle)
					require.Equal(t, r.Version+1, got.Version)
					require.True(t, got.Lifecycle == from || revision.Allowed(from, got.Lifecycle),
						"%s → %s is an edge of the table", from, got.Lifecycle)
					if got.Lifecycle.IsPublished() {
						require.Equal(t, 1, got.Revision)
						require.Equal(t, "ana", got.ApprovedBy)
					} else {
						require.Zero(t, got.Revision)
					}
				}
			})
		}
	}
}
