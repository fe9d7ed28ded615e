package porttest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// ReleaseStoreDeps is what the release suites hand their factory: the clock
// the store must stamp writes with, and the hook its VersionsNewestFirst
// must call with the row count of every page it reads (the adapters'
// WithVersionPageHook), so the suite can count page reads.
type ReleaseStoreDeps struct {
	Clock  ports.Clock
	OnPage func(rows int)
}

// ReleaseStoreFactory returns an empty release store wired to deps. Each
// suite of the release chain's ports (Objects, Targets, Versions, Releases,
// Jobs, TargetFacts) calls it once per subtest, and subtests run in
// parallel. The suites take the whole store because their fixtures need
// the objects a port's rows point at (a job needs its release, version,
// target and deployment).
type ReleaseStoreFactory func(t *testing.T, deps ReleaseStoreDeps) ports.ReleaseStore

// relSetup returns the per-subtest setup of a release suite.
func relSetup(newStore ReleaseStoreFactory) func(t *testing.T) (*testing.T, *relEnv) {
	return func(t *testing.T) (*testing.T, *relEnv) {
		t.Helper()
		t.Parallel()
		env := &relEnv{ctx: t.Context(), clock: NewFakeClock(relT0)}
		env.s = newStore(t, ReleaseStoreDeps{Clock: env.clock, OnPage: func(rows int) {
			env.pages.Add(1)
			env.rows.Add(int64(rows))
		}})
		return t, env
	}
}

// Objects is the conformance suite of ports.ObjectStore and ports.Objects:
// every invariant of their doc comments, for every kind.
func Objects(t *testing.T, newStore ReleaseStoreFactory) {
	t.Helper()
	setup := relSetup(newStore)
	t.Run("CompareAndSwap", func(t *testing.T) { relCatalogCAS(t, setup) })
	t.Run("RoundTrip", func(t *testing.T) { relCatalogRoundTrip(setup(t)) })
	t.Run("StoreChecks", func(t *testing.T) { relCatalogStoreChecks(setup(t)) })
	t.Run("SelectorPosition", func(t *testing.T) { relCatalogSelectorPosition(setup(t)) })
	t.Run("Lists", func(t *testing.T) { relCatalogLists(setup(t)) })
	t.Run("ListsByWorkspace", func(t *testing.T) { relCatalogListsByWorkspace(setup(t)) })
	t.Run("ListPages", func(t *testing.T) { objListPages(t, setup) })
	t.Run("ListRefused", func(t *testing.T) { objListRefused(setup(t)) })
	t.Run("Delete", func(t *testing.T) { objDelete(t, setup) })
	t.Run("DeleteRefusedWhileInUse", func(t *testing.T) { objDeleteInUse(setup(t)) })
	t.Run("DeleteConcurrentWithChild", func(t *testing.T) { objDeleteConcurrentChild(setup(t)) })
	t.Run("RefusesNUL", func(t *testing.T) { relRefusesNUL(setup(t)) })
	t.Run("ReadsAreCopies", func(t *testing.T) { relCatalogCopies(setup(t)) })
	t.Run("RelationshipRules", func(t *testing.T) { objRelationshipRules(setup(t)) })
}

// Targets is the conformance suite of ports.Targets.
func Targets(t *testing.T, newStore ReleaseStoreFactory) {
	t.Helper()
	setup := relSetup(newStore)
	t.Run("Replace", func(t *testing.T) { relTargetsReplace(setup(t)) })
	t.Run("ReplaceMoved", func(t *testing.T) { relTargetsMoved(setup(t)) })
	t.Run("ReplaceRefused", func(t *testing.T) { relTargetsRefused(setup(t)) })
	t.Run("ListAndGet", func(t *testing.T) { relTargetListGet(setup(t)) })
	t.Run("ScopeTargetsGeneration", func(t *testing.T) { relScopeTargetsGeneration(setup(t)) })
	t.Run("ScopeTargetsConcurrent", func(t *testing.T) { relScopeTargetsConcurrent(setup(t)) })
}

// Versions is the conformance suite of ports.Versions.
func Versions(t *testing.T, newStore ReleaseStoreFactory) {
	t.Helper()
	setup := relSetup(newStore)
	t.Run("CreateGet", func(t *testing.T) { relVersionCreateGet(setup(t)) })
	t.Run("UpdateStatus", func(t *testing.T) { relVersionUpdateStatus(setup(t)) })
	t.Run("NewestFirstOrder", func(t *testing.T) { relVersionsOrder(setup(t)) })
	t.Run("NewestFirstLazy", func(t *testing.T) { relVersionsLazy(setup(t)) })
	t.Run("NewestFirstCursor", func(t *testing.T) { relVersionsCursor(setup(t)) })
	t.Run("NewestFirstError", func(t *testing.T) { relVersionsError(setup(t)) })
	t.Run("Page", func(t *testing.T) { relVersionsPage(setup(t)) })
	t.Run("Approvals", func(t *testing.T) { relApprovals(setup(t)) })
	t.Run("PolicySkips", func(t *testing.T) { relPolicySkips(setup(t)) })
}

// Releases is the conformance suite of ports.Releases.
func Releases(t *testing.T, newStore ReleaseStoreFactory) {
	t.Helper()
	setup := relSetup(newStore)
	t.Run("Upsert", func(t *testing.T) { relReleaseUpsert(setup(t)) })
	t.Run("UpsertRefused", func(t *testing.T) { relReleaseRefused(setup(t)) })
	t.Run("Desired", func(t *testing.T) { relDesired(setup(t)) })
	t.Run("DesiredMany", func(t *testing.T) { relDesiredMany(t, newStore) })
	t.Run("Decisions", func(t *testing.T) { relDecisions(setup(t)) })
}

// Jobs is the conformance suite of ports.Jobs.
func Jobs(t *testing.T, newStore ReleaseStoreFactory) {
	t.Helper()
	setup := relSetup(newStore)
	t.Run("CreateIdempotent", func(t *testing.T) { relJobCreate(setup(t)) })
	t.Run("CreateRefused", func(t *testing.T) { relJobCreateRefused(setup(t)) })
	t.Run("CreateConcurrent", func(t *testing.T) { relJobCreateConcurrent(setup(t)) })
	t.Run("CreateEnvironmentCap", func(t *testing.T) { relJobCreateEnvironmentCap(setup(t)) })
	t.Run("CreateMany", func(t *testing.T) { relJobCreateMany(t, newStore) })
	t.Run("UpdateCompareAndSwap", func(t *testing.T) { relJobUpdateCAS(setup(t)) })
	t.Run("UpdateMany", func(t *testing.T) { relJobUpdateMany(setup(t)) })
	t.Run("UpdateConcurrent", func(t *testing.T) { relJobUpdateConcurrent(setup(t)) })
	t.Run("UpdateEdges", func(t *testing.T) { relJobUpdateEdges(setup(t)) })
	t.Run("UpdateImmutable", func(t *testing.T) { relJobUpdateImmutable(setup(t)) })
	t.Run("RoundTripAndCopies", func(t *testing.T) { relJobRoundTrip(setup(t)) })
	t.Run("ByExternalID", func(t *testing.T) { relJobByExternalID(setup(t)) })
	t.Run("ByTarget", func(t *testing.T) { relJobsByTarget(setup(t)) })
	t.Run("List", func(t *testing.T) { relJobList(setup(t)) })
	t.Run("Active", func(t *testing.T) { relJobsActive(setup(t)) })
	t.Run("Latest", func(t *testing.T) { relJobsLatest(setup(t)) })
	t.Run("TargetJobState", func(t *testing.T) { relTargetJobState(setup(t)) })
	t.Run("ProgressionSummary", func(t *testing.T) { relProgressionSummary(setup(t)) })
	t.Run("ProgressionSummaryProperty", func(t *testing.T) { relProgressionProperty(setup(t)) })
	t.Run("ProgressionSummaryConcurrent", func(t *testing.T) { relProgressionConcurrent(setup(t)) })
}

// TargetFacts is the conformance suite of ports.TargetFactsReader.
func TargetFacts(t *testing.T, newStore ReleaseStoreFactory) {
	t.Helper()
	setup := relSetup(newStore)
	t.Run("OneRead", func(t *testing.T) { relTargetFacts(setup(t)) })
	t.Run("Stamp", func(t *testing.T) { relTargetStamp(setup(t)) })
}

// relT0 is the suite's clock start: nanoseconds in a non-UTC zone, so every
// stamp checks the UTC microsecond normalisation.
var relT0 = time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 5*3600))

// relNorm is t as stores keep it: UTC at microsecond precision.
func relNorm(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// relAt is a time i minutes after relT0 in the caller's zone, with
// sub-microsecond noise.
func relAt(i int) time.Time { return relT0.Add(time.Duration(i)*time.Minute + 789) }

// relEnv is one subtest's store with its collaborators.
type relEnv struct {
	ctx   context.Context
	s     ports.ReleaseStore
	clock *FakeClock
	// pages and rows count the version pages read and their rows.
	pages, rows atomic.Int64
}

// The world the fixtures build: workspace ws1; systems sys1 (deployments
// d1, d2; environments e1, e2) and sys2 (d3, e3); resources r1..r3; job
// agent agent1.
const (
	relWS                 = "ws1"
	relSys1, relSys2      = "sys1", "sys2"
	relD1, relD2, relD3   = "d1", "d2", "d3"
	relE1, relE2, relE3   = "e1", "e2", "e3"
	relR1, relR2, relR3   = "r1", "r2", "r3"
	relAgent              = "agent1"
	relSelectorBad        = "resource.name == \n  )"
	relSelectorBadLine    = 2
	relSelectorAllMatched = "true"
)

// tgt builds a target.
func tgt(d, e, r string) release.ReleaseTarget {
	return release.ReleaseTarget{DeploymentID: d, EnvironmentID: e, ResourceID: r}
}

// must fails the test on err.
func must(t testT, err error, msgAndArgs ...any) {
	t.Helper()
	require.NoError(t, err, msgAndArgs...)
}

// requireInvalid asserts err is a *release.FieldError naming field.
func requireInvalid(t testT, err error, field string) {
	t.Helper()
	require.ErrorIs(t, err, release.ErrInvalid)
	var fe *release.FieldError
	require.True(t, errors.As(err, &fe), "want a *release.FieldError, got %T: %v", err, err)
	require.Equal(t, field, fe.Field, "field of %v", err)
}

// relWorld stores the fixture catalog.
func relWorld(t testT, e *relEnv) {
	t.Helper()
	ctx, s := e.ctx, e.s
	_, err := s.Workspaces().Put(ctx, release.Workspace{ID: relWS, Name: "Workspace"}, 0)
	must(t, err)
	for _, sys := range []string{relSys1, relSys2} {
		_, err = s.Systems().Put(ctx, release.System{ID: sys, WorkspaceID: relWS, Name: sys}, 0)
		must(t, err)
	}
	for _, d := range []struct{ id, sys string }{{relD1, relSys1}, {relD2, relSys1}, {relD3, relSys2}} {
		_, err = s.Deployments().Put(ctx, release.Deployment{ID: d.id, SystemID: d.sys, Name: "Deployment " + d.id, Slug: d.id,
			JobAgentID: relAgent, ResourceSelector: relSelectorAllMatched}, 0)
		must(t, err)
	}
	for _, en := range []struct{ id, sys string }{{relE1, relSys1}, {relE2, relSys1}, {relE3, relSys2}} {
		_, err = s.Environments().Put(ctx, release.Environment{ID: en.id, SystemID: en.sys, Name: "Environment " + en.id,
			ResourceSelector: relSelectorAllMatched}, 0)
		must(t, err)
	}
	for _, r := range []string{relR1, relR2, relR3} {
		_, err = s.Resources().Put(ctx, release.Resource{ID: r, WorkspaceID: relWS, Kind: "Cluster", Identifier: "id-" + r, Name: "Resource " + r}, 0)
		must(t, err)
	}
	_, err = s.JobAgents().Put(ctx, release.JobAgent{ID: relAgent, Name: "Agent", Type: "test"}, 0)
	must(t, err)
}

// relCatalogKind drives the compare-and-swap checks of one catalog kind
// through closures: put writes object id labelled label under the kind's
// fixture parent (or under parent when not empty), get reads its label.
type relCatalogKind struct {
	name string
	// parent is the fixture parent; missingParent names none.
	parent, missingParent string
	put                   func(e *relEnv, id, parent, label string, expected int64) (int64, error)
	get                   func(e *relEnv, id string) (label string, version int64, updatedAt time.Time, err error)
	// putInvalid writes an invalid object; invalidField is the field named.
	putInvalid   func(e *relEnv, id, parent string, expected int64) (int64, error)
	invalidField string
	// del deletes; list reads one page's ids and its continue token.
	del  func(e *relEnv, id string, expected int64) error
	list func(e *relEnv, p ports.ListParams) ([]string, string, error)
}

// deleter adapts a kind's Delete to relCatalogKind.del.
func deleter[T any](objs func(ports.ReleaseStore) ports.Objects[T]) func(*relEnv, string, int64) error {
	return func(e *relEnv, id string, exp int64) error { return objs(e.s).Delete(e.ctx, id, exp) }
}

// lister adapts a kind's List to relCatalogKind.list.
func lister[T any](objs func(ports.ReleaseStore) ports.Objects[T], id func(*T) string) func(*relEnv, ports.ListParams) ([]string, string, error) {
	return func(e *relEnv, p ports.ListParams) ([]string, string, error) {
		page, err := objs(e.s).List(e.ctx, p)
		if err != nil {
			return nil, "", err
		}
		ids := make([]string, len(page.Items))
		for i := range page.Items {
			ids[i] = id(&page.Items[i].Value)
		}
		return ids, page.Continue, nil
	}
}

// getter adapts a typed Get to relCatalogKind.get.
func getter[T any](read func(context.Context, string) (ports.Stored[T], error), label func(*T) string) func(context.Context, string) (string, int64, time.Time, error) {
	return func(ctx context.Context, id string) (string, int64, time.Time, error) {
		st, err := read(ctx, id)
		if err != nil {
			return "", 0, time.Time{}, err
		}
		return label(&st.Value), st.Version, st.UpdatedAt, nil
	}
}

// relCatalogKinds lists every catalog kind.
func relCatalogKinds() []relCatalogKind {
	get := func(f func(s ports.ReleaseStore) func(context.Context, string) (string, int64, time.Time, error)) func(e *relEnv, id string) (string, int64, time.Time, error) {
		return func(e *relEnv, id string) (string, int64, time.Time, error) { return f(e.s)(e.ctx, id) }
	}
	return []relCatalogKind{
		{
			name: "workspace",
			put: func(e *relEnv, id, _, label string, exp int64) (int64, error) {
				return e.s.Workspaces().Put(e.ctx, release.Workspace{ID: id, Name: label}, exp)
			},
			get: get(func(s ports.ReleaseStore) func(context.Context, string) (string, int64, time.Time, error) {
				return getter(s.Workspaces().Get, func(v *release.Workspace) string { return v.Name })
			}),
			putInvalid: func(e *relEnv, id, _ string, exp int64) (int64, error) {
				return e.s.Workspaces().Put(e.ctx, release.Workspace{ID: id, Name: "  "}, exp)
			},
			invalidField: "name",
			del:          deleter(ports.ReleaseStore.Workspaces),
			list:         lister(ports.ReleaseStore.Workspaces, func(v *release.Workspace) string { return v.ID }),
		},
		{
			name: "system", parent: relWS, missingParent: "ws-missing",
			put: func(e *relEnv, id, parent, label string, exp int64) (int64, error) {
				return e.s.Systems().Put(e.ctx, release.System{ID: id, WorkspaceID: parent, Name: label}, exp)
			},
			get: get(func(s ports.ReleaseStore) func(context.Context, string) (string, int64, time.Time, error) {
				return getter(s.Systems().Get, func(v *release.System) string { return v.Name })
			}),
			putInvalid: func(e *relEnv, id, parent string, exp int64) (int64, error) {
				return e.s.Systems().Put(e.ctx, release.System{ID: id, WorkspaceID: parent, Name: ""}, exp)
			},
			invalidField: "name",
			del:          deleter(ports.ReleaseStore.Systems),
			list:         lister(ports.ReleaseStore.Systems, func(v *release.System) string { return v.ID }),
		},
		{
			name: "deployment", parent: relSys1, missingParent: "sys-missing",
			put: func(e *relEnv, id, parent, label string, exp int64) (int64, error) {
				return e.s.Deployments().Put(e.ctx, release.Deployment{ID: id, SystemID: parent, Name: label, Slug: "slug"}, exp)
			},
			get: get(func(s ports.ReleaseStore) func(context.Context, string) (string, int64, time.Time, error) {
				return getter(s.Deployments().Get, func(v *release.Deployment) string { return v.Name })
			}),
			putInvalid: func(e *relEnv, id, parent string, exp int64) (int64, error) {
				return e.s.Deployments().Put(e.ctx, release.Deployment{ID: id, SystemID: parent, Name: "n", Slug: "Not A Slug"}, exp)
			},
			invalidField: "slug",
			del:          deleter(ports.ReleaseStore.Deployments),
			list:         lister(ports.ReleaseStore.Deployments, func(v *release.Deployment) string { return v.ID }),
		},
		{
			name: "environment", parent: relSys1, missingParent: "sys-missing",
			put: func(e *relEnv, id, parent, label string, exp int64) (int64, error) {
				return e.s.Environments().Put(e.ctx, release.Environment{ID: id, SystemID: parent, Name: label}, exp)
			},
			get: get(func(s ports.ReleaseStore) func(context.Context, string) (string, int64, time.Time, error) {
				return getter(s.Environments().Get, func(v *release.Environment) string { return v.Name })
			}),
			putInvalid: func(e *relEnv, id, parent string, exp int64) (int64, error) {
				return e.s.Environments().Put(e.ctx, release.Environment{ID: id, SystemID: parent, Name: "n", ResourceSelector: relSelectorBad}, exp)
			},
			invalidField: "resource_selector",
			del:          deleter(ports.ReleaseStore.Environments),
			list:         lister(ports.ReleaseStore.Environments, func(v *release.Environment) string { return v.ID }),
		},
		{
			name: "variable set", parent: relSys1, missingParent: "sys-missing",
			put: func(e *relEnv, id, parent, label string, exp int64) (int64, error) {
				return e.s.VariableSets().Put(e.ctx, release.VariableSet{ID: id, SystemID: parent, Name: label}, exp)
			},
			get: get(func(s ports.ReleaseStore) func(context.Context, string) (string, int64, time.Time, error) {
				return getter(s.VariableSets().Get, func(v *release.VariableSet) string { return v.Name })
			}),
			putInvalid: func(e *relEnv, id, parent string, exp int64) (int64, error) {
				return e.s.VariableSets().Put(e.ctx, release.VariableSet{ID: id, SystemID: parent, Name: "n", Selector: relSelectorBad}, exp)
			},
			invalidField: "selector",
			del:          deleter(ports.ReleaseStore.VariableSets),
			list:         lister(ports.ReleaseStore.VariableSets, func(v *release.VariableSet) string { return v.ID }),
		},
		{
			name: "resource", parent: relWS, missingParent: "ws-missing",
			put: func(e *relEnv, id, parent, label string, exp int64) (int64, error) {
				return e.s.Resources().Put(e.ctx, release.Resource{ID: id, WorkspaceID: parent, Kind: "Cluster", Identifier: id, Name: label}, exp)
			},
			get: get(func(s ports.ReleaseStore) func(context.Context, string) (string, int64, time.Time, error) {
				return getter(s.Resources().Get, func(v *release.Resource) string { return v.Name })
			}),
			putInvalid: func(e *relEnv, id, parent string, exp int64) (int64, error) {
				return e.s.Resources().Put(e.ctx, release.Resource{ID: id, WorkspaceID: parent, Kind: "", Identifier: id, Name: "n"}, exp)
			},
			invalidField: "kind",
			del:          deleter(ports.ReleaseStore.Resources),
			list:         lister(ports.ReleaseStore.Resources, func(v *release.Resource) string { return v.ID }),
		},
		{
			name: "relationship rule", parent: relWS, missingParent: "ws-missing",
			put: func(e *relEnv, id, parent, label string, exp int64) (int64, error) {
				return e.s.RelationshipRules().Put(e.ctx, release.RelationshipRule{ID: id, WorkspaceID: parent, Name: "vpc", Description: label,
					Match: `from.metadata.vpc == to.id && to.kind == "VPC"`}, exp)
			},
			get: get(func(s ports.ReleaseStore) func(context.Context, string) (string, int64, time.Time, error) {
				return getter(s.RelationshipRules().Get, func(v *release.RelationshipRule) string { return v.Description })
			}),
			putInvalid: func(e *relEnv, id, parent string, exp int64) (int64, error) {
				return e.s.RelationshipRules().Put(e.ctx, release.RelationshipRule{ID: id, WorkspaceID: parent, Name: "vpc", Match: "from.id =="}, exp)
			},
			invalidField: "match",
			del:          deleter(ports.ReleaseStore.RelationshipRules),
			list:         lister(ports.ReleaseStore.RelationshipRules, func(v *release.RelationshipRule) string { return v.ID }),
		},
		{
			name: "job agent",
			put: func(e *relEnv, id, _, label string, exp int64) (int64, error) {
				return e.s.JobAgents().Put(e.ctx, release.JobAgent{ID: id, Name: label, Type: "test"}, exp)
			},
			get: get(func(s ports.ReleaseStore) func(context.Context, string) (string, int64, time.Time, error) {
				return getter(s.JobAgents().Get, func(v *release.JobAgent) string { return v.Name })
			}),
			putInvalid: func(e *relEnv, id, _ string, exp int64) (int64, error) {
				return e.s.JobAgents().Put(e.ctx, release.JobAgent{ID: id, Name: "n"}, exp)
			},
			invalidField: "type",
			del:          deleter(ports.ReleaseStore.JobAgents),
			list:         lister(ports.ReleaseStore.JobAgents, func(v *release.JobAgent) string { return v.ID }),
		},
	}
}

// relCatalogCAS runs the compare-and-swap checks for every catalog kind.
func relCatalogCAS(t *testing.T, setup func(*testing.T) (*testing.T, *relEnv)) {
	for _, k := range relCatalogKinds() {
		t.Run(k.name, func(t *testing.T) {
			t, e := setup(t)
			relWorld(t, e)
			const id = "obj1"
			requireLabel := func(want string, wantVersion int64, wantAt time.Time) {
				t.Helper()
				label, v, at, err := k.get(e, id)
				require.NoError(t, err)
				require.Equal(t, want, label)
				require.Equal(t, wantVersion, v, "version")
				require.Equal(t, relNorm(wantAt), at, "updated_at in UTC at microsecond precision")
			}

			_, _, _, err := k.get(e, id)
			require.ErrorIs(t, err, ports.ErrNotFound, "get before create")
			_, err = k.putInvalid(e, id, k.parent, 0)
			requireInvalid(t, err, k.invalidField)
			_, _, _, err = k.get(e, id)
			require.ErrorIs(t, err, ports.ErrNotFound, "a refused create stores nothing")

			t0 := e.clock.Now()
			v, err := k.put(e, id, k.parent, "first", 0)
			require.NoError(t, err)
			require.Equal(t, int64(1), v, "expected 0 creates at version 1")
			requireLabel("first", 1, t0)

			e.clock.Advance(time.Minute)
			_, err = k.put(e, id, k.parent, "again", 0)
			require.ErrorIs(t, err, ports.ErrConflict, "creating an existing id")
			requireLabel("first", 1, t0)

			t1 := e.clock.Advance(time.Minute)
			v, err = k.put(e, id, k.parent, "second", 1)
			require.NoError(t, err)
			require.Equal(t, int64(2), v, "every write bumps the version")
			requireLabel("second", 2, t1)

			e.clock.Advance(time.Minute)
			for _, stale := range []int64{1, 3} {
				_, err = k.put(e, id, k.parent, "stale", stale)
				require.ErrorIs(t, err, ports.ErrConflict, "write at version %d of a version-2 object", stale)
			}
			_, err = k.put(e, id, k.parent, "neg", -1)
			require.ErrorIs(t, err, release.ErrInvalid, "negative expected version")
			_, err = k.putInvalid(e, id, k.parent, 2)
			requireInvalid(t, err, k.invalidField)
			requireLabel("second", 2, t1)

			_, err = k.put(e, "obj-missing", k.parent, "x", 1)
			require.ErrorIs(t, err, ports.ErrNotFound, "update of a missing object")
			_, _, _, err = k.get(e, "obj-missing")
			require.ErrorIs(t, err, ports.ErrNotFound)

			t3 := e.clock.Advance(time.Minute)
			v, err = k.put(e, id, k.parent, "third", 2)
			require.NoError(t, err)
			require.Equal(t, int64(3), v)
			requireLabel("third", 3, t3)

			if k.missingParent == "" {
				return
			}
			_, err = k.put(e, "obj2", k.missingParent, "orphan", 0)
			require.ErrorIs(t, err, ports.ErrNotFound, "create under a missing parent")
			_, _, _, err = k.get(e, "obj2")
			require.ErrorIs(t, err, ports.ErrNotFound, "the orphan was not stored")
			_, err = k.put(e, id, k.missingParent, "moved", 3)
			require.ErrorIs(t, err, ports.ErrNotFound, "update onto a missing parent")
			requireLabel("third", 3, t3)
		})
	}
}
