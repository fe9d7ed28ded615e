package porttest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// relTargetsAll lists every stored target.
func relTargetsAll(t testT, e *relEnv) []release.ReleaseTarget {
	t.Helper()
	out, err := e.s.TargetList(e.ctx, ports.TargetListParams{})
	require.NoError(t, err)
	return out
}

// relReplace replaces scope's targets and fails the test on error.
func relReplace(t testT, e *relEnv, scope ports.TargetScope, ts ...release.ReleaseTarget) ports.TargetsDiff {
	t.Helper()
	d, err := e.s.TargetsReplace(e.ctx, ports.TargetsReplaceParams{Scope: scope, Targets: ts})
	require.NoError(t, err)
	return d
}

func relTargetsReplace(t *testing.T, e *relEnv) {
	relWorld(t, e)
	scopeD1 := ports.TargetScope{DeploymentID: relD1}
	d := relReplace(t, e, scopeD1, tgt(relD1, relE2, relR1), tgt(relD1, relE1, relR2), tgt(relD1, relE1, relR1))
	require.Equal(t, ports.TargetsDiff{Added: []release.ReleaseTarget{tgt(relD1, relE1, relR1), tgt(relD1, relE1, relR2), tgt(relD1, relE2, relR1)}}, d, "added, sorted by key")

	d = relReplace(t, e, ports.TargetScope{DeploymentID: relD2}, tgt(relD2, relE1, relR1))
	require.Equal(t, []release.ReleaseTarget{tgt(relD2, relE1, relR1)}, d.Added)
	require.Empty(t, d.Removed)

	d = relReplace(t, e, scopeD1, tgt(relD1, relE1, relR2), tgt(relD1, relE1, relR1), tgt(relD1, relE2, relR1))
	require.Equal(t, ports.TargetsDiff{}, d, "an unchanged replacement changes nothing")

	d = relReplace(t, e, scopeD1, tgt(relD1, relE2, relR2), tgt(relD1, relE1, relR1))
	require.Equal(t, ports.TargetsDiff{
		Added:   []release.ReleaseTarget{tgt(relD1, relE2, relR2)},
		Removed: []release.ReleaseTarget{tgt(relD1, relE1, relR2), tgt(relD1, relE2, relR1)},
	}, d)

	// An environment scope touches only that environment's targets, of
	// every deployment.
	d = relReplace(t, e, ports.TargetScope{EnvironmentID: relE1}, tgt(relD2, relE1, relR3))
	require.Equal(t, ports.TargetsDiff{
		Added:   []release.ReleaseTarget{tgt(relD2, relE1, relR3)},
		Removed: []release.ReleaseTarget{tgt(relD1, relE1, relR1), tgt(relD2, relE1, relR1)},
	}, d)
	require.Equal(t, []release.ReleaseTarget{tgt(relD1, relE2, relR2), tgt(relD2, relE1, relR3)}, relTargetsAll(t, e))

	// An empty replacement clears the scope.
	d = relReplace(t, e, ports.TargetScope{SystemID: relSys1})
	require.Equal(t, ports.TargetsDiff{Removed: []release.ReleaseTarget{tgt(relD1, relE2, relR2), tgt(relD2, relE1, relR3)}}, d)
	require.Empty(t, relTargetsAll(t, e))
}

// relTargetsMoved: a target whose deployment and environment moved to
// another system is re-filed under it by the new system's replacement,
// neither added nor removed, and keeps its creation time.
func relTargetsMoved(t *testing.T, e *relEnv) {
	relWorld(t, e)
	t0 := e.clock.Now()
	moved, kept := tgt(relD2, relE2, relR1), tgt(relD1, relE1, relR1)
	relReplace(t, e, ports.TargetScope{SystemID: relSys1}, moved, kept)
	e.clock.Advance(time.Hour)
	_, err := e.s.Deployments().Put(e.ctx, release.Deployment{ID: relD2, SystemID: relSys2, Name: "moved", Slug: "d2"}, 1)
	require.NoError(t, err)
	_, err = e.s.Environments().Put(e.ctx, release.Environment{ID: relE2, SystemID: relSys2, Name: "moved"}, 1)
	require.NoError(t, err)

	d := relReplace(t, e, ports.TargetScope{SystemID: relSys2}, moved, tgt(relD3, relE3, relR1))
	require.Equal(t, ports.TargetsDiff{Added: []release.ReleaseTarget{tgt(relD3, relE3, relR1)}}, d, "the moved target is neither added nor removed")
	list := func(sys string) []release.ReleaseTarget {
		t.Helper()
		out, err := e.s.TargetList(e.ctx, ports.TargetListParams{Scope: ports.TargetScope{SystemID: sys}})
		require.NoError(t, err)
		return out
	}
	require.Equal(t, []release.ReleaseTarget{kept}, list(relSys1))
	require.Equal(t, []release.ReleaseTarget{moved, tgt(relD3, relE3, relR1)}, list(relSys2))
	got, err := e.s.TargetGet(e.ctx, moved)
	require.NoError(t, err)
	require.Equal(t, relSys2, got.System.ID)
	require.Equal(t, relNorm(t0), got.CreatedAt)

	d = relReplace(t, e, ports.TargetScope{SystemID: relSys1}, kept)
	require.Equal(t, ports.TargetsDiff{}, d, "the old system no longer holds the moved target")
	require.Len(t, relTargetsAll(t, e), 3)
}

func relTargetsRefused(t *testing.T, e *relEnv) {
	relWorld(t, e)
	relReplace(t, e, ports.TargetScope{DeploymentID: relD1}, tgt(relD1, relE1, relR1))
	before := relTargetsAll(t, e)
	for _, c := range []struct {
		name     string
		p        ports.TargetsReplaceParams
		notFound bool
		field    string
	}{
		{"zero scope", ports.TargetsReplaceParams{Targets: []release.ReleaseTarget{tgt(relD1, relE1, relR2)}}, false, "scope"},
		{"outside scope", ports.TargetsReplaceParams{Scope: ports.TargetScope{DeploymentID: relD1}, Targets: []release.ReleaseTarget{tgt(relD2, relE1, relR2)}}, false, "targets[0]"},
		{"duplicate", ports.TargetsReplaceParams{Scope: ports.TargetScope{DeploymentID: relD1}, Targets: []release.ReleaseTarget{tgt(relD1, relE1, relR2), tgt(relD1, relE1, relR2)}}, false, "targets[1]"},
		{"bad key", ports.TargetsReplaceParams{Scope: ports.TargetScope{DeploymentID: relD1}, Targets: []release.ReleaseTarget{tgt(relD1, "", relR2)}}, false, "targets[0]"},
		{"systems differ", ports.TargetsReplaceParams{Scope: ports.TargetScope{DeploymentID: relD1}, Targets: []release.ReleaseTarget{tgt(relD1, relE1, relR2), tgt(relD1, relE3, relR2)}}, false, "environment_id"},
		{"other system's scope", ports.TargetsReplaceParams{Scope: ports.TargetScope{SystemID: relSys2}, Targets: []release.ReleaseTarget{tgt(relD1, relE1, relR2)}}, false, "targets[0]"},
		{"missing deployment", ports.TargetsReplaceParams{Scope: ports.TargetScope{EnvironmentID: relE1}, Targets: []release.ReleaseTarget{tgt(relD1, relE1, relR2), tgt("d-none", relE1, relR2)}}, true, ""},
		{"missing environment", ports.TargetsReplaceParams{Scope: ports.TargetScope{DeploymentID: relD1}, Targets: []release.ReleaseTarget{tgt(relD1, "e-none", relR2)}}, true, ""},
		{"missing resource", ports.TargetsReplaceParams{Scope: ports.TargetScope{DeploymentID: relD1}, Targets: []release.ReleaseTarget{tgt(relD1, relE1, "r-none")}}, true, ""},
	} {
		_, err := e.s.TargetsReplace(e.ctx, c.p)
		if c.notFound {
			require.ErrorIs(t, err, ports.ErrNotFound, c.name)
		} else {
			requireInvalid(t, err, c.field)
		}
		require.Equal(t, before, relTargetsAll(t, e), "%s: a refused replacement changes nothing", c.name)
	}
}

func relTargetListGet(t *testing.T, e *relEnv) {
	relWorld(t, e)
	t0 := e.clock.Now()
	relReplace(t, e, ports.TargetScope{SystemID: relSys1},
		tgt(relD1, relE1, relR1), tgt(relD1, relE1, relR2), tgt(relD1, relE2, relR1), tgt(relD2, relE2, relR3))
	e.clock.Advance(time.Hour)
	relReplace(t, e, ports.TargetScope{SystemID: relSys2}, tgt(relD3, relE3, relR1))
	all := []release.ReleaseTarget{tgt(relD1, relE1, relR1), tgt(relD1, relE1, relR2), tgt(relD1, relE2, relR1), tgt(relD2, relE2, relR3), tgt(relD3, relE3, relR1)}
	require.Equal(t, all, relTargetsAll(t, e), "key order")
	for _, c := range []struct {
		p    ports.TargetListParams
		want []release.ReleaseTarget
	}{
		{ports.TargetListParams{Scope: ports.TargetScope{SystemID: relSys1}}, all[:4]},
		{ports.TargetListParams{Scope: ports.TargetScope{DeploymentID: relD1}}, all[:3]},
		{ports.TargetListParams{Scope: ports.TargetScope{EnvironmentID: relE2}}, all[2:4]},
		{ports.TargetListParams{Scope: ports.TargetScope{ResourceID: relR1}}, []release.ReleaseTarget{all[0], all[2], all[4]}},
		{ports.TargetListParams{Scope: ports.TargetScope{DeploymentID: relD1, ResourceID: relR1}}, []release.ReleaseTarget{all[0], all[2]}},
		{ports.TargetListParams{Scope: ports.TargetScope{ResourceID: relR1}, Limit: 2}, []release.ReleaseTarget{all[0], all[2]}},
		{ports.TargetListParams{Scope: ports.TargetScope{ResourceID: relR1}, AfterKey: all[0].Key(), Limit: 1}, []release.ReleaseTarget{all[2]}},
		{ports.TargetListParams{AfterKey: all[1].Key(), Limit: 2}, all[2:4]},
		{ports.TargetListParams{AfterKey: "d1:e1:r15"}, all[1:]},
		{ports.TargetListParams{AfterKey: all[4].Key()}, nil},
		{ports.TargetListParams{Scope: ports.TargetScope{ResourceID: "r-none"}}, nil},
	} {
		got, err := e.s.TargetList(e.ctx, c.p)
		require.NoError(t, err)
		require.Equal(t, c.want, got, "%+v", c.p)
	}

	got, err := e.s.TargetGet(e.ctx, all[2])
	require.NoError(t, err)
	require.Equal(t, all[2], got.Target)
	require.Equal(t, relSys1, got.System.ID)
	require.Equal(t, relD1, got.Deployment.ID)
	require.Equal(t, "Environment "+relE2, got.Environment.Name)
	require.Equal(t, "Resource "+relR1, got.Resource.Name)
	require.Equal(t, relNorm(t0), got.CreatedAt, "created_at in UTC at microsecond precision")

	// The detail reads the catalog as it is now.
	_, err = e.s.Resources().Put(e.ctx, release.Resource{ID: relR1, WorkspaceID: relWS, Kind: "Cluster", Identifier: "x", Name: "renamed"}, 1)
	require.NoError(t, err)
	got, err = e.s.TargetGet(e.ctx, all[2])
	require.NoError(t, err)
	require.Equal(t, "renamed", got.Resource.Name)
	require.Equal(t, relNorm(t0), got.CreatedAt, "a kept target keeps its creation time")

	_, err = e.s.TargetGet(e.ctx, tgt(relD2, relE1, relR1))
	require.ErrorIs(t, err, ports.ErrNotFound)
}

// relVersion is a valid version of deployment dep created at at.
func relVersion(id, dep string, at time.Time) release.DeploymentVersion {
	return release.DeploymentVersion{ID: id, DeploymentID: dep, Tag: "tag-" + id, Status: release.VersionReady, CreatedAt: at}
}

// relCreateVersions stores versions and fails the test on error.
func relCreateVersions(t testT, e *relEnv, vs ...release.DeploymentVersion) {
	t.Helper()
	for _, v := range vs {
		require.NoError(t, e.s.VersionCreate(e.ctx, v), "create version %s", v.ID)
	}
}

// relStream reads a whole version stream.
func relStream(t testT, e *relEnv, dep string, pageSize int) []string {
	t.Helper()
	var out []string
	for v, err := range e.s.VersionsNewestFirst(e.ctx, dep, pageSize) {
		require.NoError(t, err)
		out = append(out, v.ID)
	}
	return out
}

func relVersionCreateGet(t *testing.T, e *relEnv) {
	relWorld(t, e)
	v := release.DeploymentVersion{
		ID: "v1", DeploymentID: relD1, Tag: "v1.0.0", Name: "first",
		Config: map[string]any{"image": "x:1", "n": 3}, JobAgentConfig: map[string]any{"ref": "main"},
		Metadata: map[string]string{"sha": "abc"}, Status: release.VersionBuilding, CreatedAt: relAt(1),
	}
	require.NoError(t, e.s.VersionCreate(e.ctx, v))
	got, err := e.s.VersionGet(e.ctx, v.ID)
	require.NoError(t, err)
	want := v
	want.Config = map[string]any{"image": "x:1", "n": float64(3)}
	want.CreatedAt = relNorm(v.CreatedAt)
	require.Equal(t, want, got, "round trip; created_at in UTC at microsecond precision")

	got.Config["image"], got.Metadata["sha"] = "changed", "changed"
	again, err := e.s.VersionGet(e.ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, want, again, "reads are copies")

	dup := relVersion(v.ID, relD1, relAt(2))
	require.ErrorIs(t, e.s.VersionCreate(e.ctx, dup), ports.ErrConflict, "an existing id")
	require.ErrorIs(t, e.s.VersionCreate(e.ctx, relVersion("v2", "d-none", relAt(2))), ports.ErrNotFound, "missing deployment")
	bad := relVersion("v3", relD1, relAt(3))
	bad.Tag = ""
	requireInvalid(t, e.s.VersionCreate(e.ctx, bad), "tag")
	bad = relVersion("v3", relD1, relAt(3))
	bad.Status = "shipped"
	requireInvalid(t, e.s.VersionCreate(e.ctx, bad), "status")
	for _, id := range []string{"v2", "v3"} {
		_, err = e.s.VersionGet(e.ctx, id)
		require.ErrorIs(t, err, ports.ErrNotFound, "refused %s stored nothing", id)
	}
	again, err = e.s.VersionGet(e.ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, want, again, "the refused duplicate changed nothing")
	require.Equal(t, []string{v.ID}, relStream(t, e, relD1, 0))
}

func relVersionUpdateStatus(t *testing.T, e *relEnv) {
	relWorld(t, e)
	relCreateVersions(t, e, relVersion("v1", relD1, relAt(1)), relVersion("v2", relD1, relAt(2)))
	require.NoError(t, e.s.VersionUpdateStatus(e.ctx, "v1", release.VersionPaused))
	got, err := e.s.VersionGet(e.ctx, "v1")
	require.NoError(t, err)
	require.Equal(t, release.VersionPaused, got.Status)
	require.Equal(t, relNorm(relAt(1)), got.CreatedAt, "only the status changed")
	require.Equal(t, "tag-v1", got.Tag)

	statuses := map[string]release.VersionStatus{}
	for v, err := range e.s.VersionsNewestFirst(e.ctx, relD1, 1) {
		require.NoError(t, err)
		statuses[v.ID] = v.Status
	}
	require.Equal(t, map[string]release.VersionStatus{"v1": release.VersionPaused, "v2": release.VersionReady}, statuses, "streams see the new status")
	require.Equal(t, []string{"v2", "v1"}, relStream(t, e, relD1, 1), "the order is kept")

	requireInvalid(t, e.s.VersionUpdateStatus(e.ctx, "v1", "shipped"), "status")
	require.ErrorIs(t, e.s.VersionUpdateStatus(e.ctx, "v-none", release.VersionReady), ports.ErrNotFound)
	got, err = e.s.VersionGet(e.ctx, "v1")
	require.NoError(t, err)
	require.Equal(t, release.VersionPaused, got.Status)
}

func relVersionsOrder(t *testing.T, e *relEnv) {
	relWorld(t, e)
	// Created out of order; vb and va share a creation time (id breaks
	// the tie, descending); d2's version never shows in d1's stream.
	relCreateVersions(t, e,
		relVersion("vc", relD1, relAt(3)),
		relVersion("va", relD1, relAt(5)),
		relVersion("vz", relD1, relAt(1)),
		relVersion("other", relD2, relAt(4)),
		relVersion("vb", relD1, relAt(5)),
		relVersion("vd", relD1, relAt(4)),
		relVersion("vE", relD1, relAt(2).Add(time.Second)),
	)
	want := []string{"vb", "va", "vd", "vc", "vE", "vz"}
	for _, size := range []int{0, 1, 2, 3, 6, 7, ports.MaxVersionPageSize + 1} {
		require.Equal(t, want, relStream(t, e, relD1, size), "page size %d", size)
	}
	// A page boundary inside a run of equal creation times.
	relCreateVersions(t, e, relVersion("vb2", relD1, relAt(5)), relVersion("va2", relD1, relAt(5)))
	require.Equal(t, []string{"vb2", "vb", "va2", "va", "vd", "vc", "vE", "vz"}, relStream(t, e, relD1, 3))
	require.Empty(t, relStream(t, e, "d-none", 0))
}

func relVersionsLazy(t *testing.T, e *relEnv) {
	relWorld(t, e)
	for i := range 5 {
		relCreateVersions(t, e, relVersion("v"+string(rune('0'+i)), relD1, relAt(i)))
	}
	reads := func(body func(), wantPages int64, msg string) {
		t.Helper()
		e.pages.Store(0)
		body()
		require.Equal(t, wantPages, e.pages.Load(), msg)
	}
	reads(func() {}, 0, "building the stream reads nothing")
	seq := e.s.VersionsNewestFirst(e.ctx, relD1, 2)
	reads(func() {}, 0, "nothing is read before the loop asks")
	reads(func() {
		for range seq {
			break
		}
	}, 1, "breaking at the first version reads one page")
	reads(func() {
		n := 0
		for v, err := range seq {
			require.NoError(t, err)
			n++
			if v.ID == "v3" {
				break
			}
		}
		require.Equal(t, 2, n)
	}, 1, "breaking at the last version of a page reads no further page")
	reads(func() {
		n := 0
		for range seq {
			n++
			if n == 3 {
				break
			}
		}
	}, 2, "the third version needs the second page")
	e.rows.Store(0)
	reads(func() { require.Len(t, relStream(t, e, relD1, 2), 5) }, 3, "the whole stream reads pages of 2, 2 and 1")
	require.Equal(t, int64(5), e.rows.Load(), "each version read once")
}

func relVersionsCursor(t *testing.T, e *relEnv) {
	relWorld(t, e)
	relCreateVersions(t, e, relVersion("v1", relD1, relAt(10)), relVersion("v2", relD1, relAt(20)),
		relVersion("v3", relD1, relAt(30)), relVersion("v4", relD1, relAt(40)))
	var got []string
	for v, err := range e.s.VersionsNewestFirst(e.ctx, relD1, 2) {
		require.NoError(t, err)
		got = append(got, v.ID)
		if v.ID == "v3" {
			// Created while the stream stands at v3: one above the cursor
			// (never seen), one below it (seen in order).
			relCreateVersions(t, e, relVersion("top", relD1, relAt(50)), relVersion("mid", relD1, relAt(25)))
		}
	}
	require.Equal(t, []string{"v4", "v3", "mid", "v2", "v1"}, got)
}

func relVersionsError(t *testing.T, e *relEnv) {
	relWorld(t, e)
	relCreateVersions(t, e, relVersion("v1", relD1, relAt(1)), relVersion("v2", relD1, relAt(2)), relVersion("v3", relD1, relAt(3)))
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	var ids []string
	var errs []error
	for v, err := range e.s.VersionsNewestFirst(ctx, relD1, 2) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ids = append(ids, v.ID)
		if v.ID == "v2" {
			cancel()
		}
	}
	require.Equal(t, []string{"v3", "v2"}, ids, "the first page was read before the cancel")
	require.Len(t, errs, 1, "an error is yielded once, last")
	require.ErrorIs(t, errs[0], context.Canceled)
}

func relApprovals(t *testing.T, e *relEnv) {
	relWorld(t, e)
	relCreateVersions(t, e, relVersion("v1", relD1, relAt(1)), relVersion("v2", relD1, relAt(2)))
	add := func(a release.Approval) bool {
		t.Helper()
		ok, err := e.s.ApprovalAdd(e.ctx, a)
		require.NoError(t, err)
		return ok
	}
	ap := func(env, user string, at int) release.Approval {
		return release.Approval{VersionID: "v1", EnvironmentID: env, User: user, ApprovedAt: relAt(at)}
	}
	require.True(t, add(ap(relE1, "carol", 2)))
	require.True(t, add(ap(relE1, "alice", 2)))
	require.True(t, add(ap(relE2, "bob", 1)))
	require.True(t, add(ap(relE1, "bob", 2)))
	require.False(t, add(ap(relE1, "alice", 0)), "a second approval by the same user in the same environment")
	require.True(t, add(ap(relE2, "alice", 3)), "the same user in another environment")
	require.True(t, add(release.Approval{VersionID: "v2", EnvironmentID: relE1, User: "alice", ApprovedAt: relAt(9)}))

	norm := func(a release.Approval) release.Approval { a.ApprovedAt = relNorm(a.ApprovedAt); return a }
	list, err := e.s.ApprovalList(e.ctx, "v1", "")
	require.NoError(t, err)
	require.Equal(t, []release.Approval{norm(ap(relE2, "bob", 1)), norm(ap(relE1, "alice", 2)), norm(ap(relE1, "bob", 2)),
		norm(ap(relE1, "carol", 2)), norm(ap(relE2, "alice", 3))}, list, "by time, environment, user; the first approval kept")
	list, err = e.s.ApprovalList(e.ctx, "v1", relE2)
	require.NoError(t, err)
	require.Equal(t, []release.Approval{norm(ap(relE2, "bob", 1)), norm(ap(relE2, "alice", 3))}, list)
	list, err = e.s.ApprovalList(e.ctx, "v-none", "")
	require.NoError(t, err)
	require.Empty(t, list)

	_, err = e.s.ApprovalAdd(e.ctx, release.Approval{VersionID: "v-none", EnvironmentID: relE1, User: "u", ApprovedAt: relAt(1)})
	require.ErrorIs(t, err, ports.ErrNotFound, "approval of a missing version")
	_, err = e.s.ApprovalAdd(e.ctx, release.Approval{VersionID: "v2", EnvironmentID: relE1, User: "", ApprovedAt: relAt(1)})
	requireInvalid(t, err, "user")
	list, err = e.s.ApprovalList(e.ctx, "v2", "")
	require.NoError(t, err)
	require.Len(t, list, 1, "refused approvals stored nothing")
}

func relPolicySkips(t *testing.T, e *relEnv) {
	relWorld(t, e)
	relCreateVersions(t, e, relVersion("v1", relD1, relAt(1)), relVersion("v2", relD1, relAt(2)))
	list := func(v string) []release.PolicySkip {
		t.Helper()
		out, err := e.s.PolicySkipList(e.ctx, v)
		require.NoError(t, err)
		return out
	}
	s2 := release.PolicySkip{ID: "s2", VersionID: "v1", RuleID: "approval", EnvironmentID: relE1, ExpiresAt: relAt(60), Reason: "hotfix", CreatedBy: "ana"}
	s1 := release.PolicySkip{ID: "s1", VersionID: "v1", RuleID: "window"}
	s3 := release.PolicySkip{ID: "s3", VersionID: "v2", RuleID: "window", ResourceID: relR1}
	for _, sk := range []release.PolicySkip{s2, s1, s3} {
		require.NoError(t, e.s.PolicySkipPut(e.ctx, sk))
	}
	s2n := s2
	s2n.ExpiresAt = relNorm(s2.ExpiresAt)
	require.Equal(t, []release.PolicySkip{s1, s2n}, list("v1"), "by id; expires_at in UTC at microsecond precision")

	s1.RuleID, s1.Reason = "cooldown", "replaced"
	require.NoError(t, e.s.PolicySkipPut(e.ctx, s1), "a put replaces by id")
	require.Equal(t, []release.PolicySkip{s1, s2n}, list("v1"))

	requireInvalid(t, e.s.PolicySkipPut(e.ctx, release.PolicySkip{VersionID: "v1", RuleID: "x"}), "id")
	requireInvalid(t, e.s.PolicySkipPut(e.ctx, release.PolicySkip{ID: "s1", VersionID: "v1"}), "rule_id")
	require.ErrorIs(t, e.s.PolicySkipPut(e.ctx, release.PolicySkip{ID: "s1", VersionID: "v-none", RuleID: "x"}), ports.ErrNotFound)
	require.Equal(t, []release.PolicySkip{s1, s2n}, list("v1"), "refused puts changed nothing")

	// A put may move a skip to another version.
	s1moved := s1
	s1moved.VersionID = "v2"
	require.NoError(t, e.s.PolicySkipPut(e.ctx, s1moved))
	require.Equal(t, []release.PolicySkip{s2n}, list("v1"))
	require.Equal(t, []release.PolicySkip{s1moved, s3}, list("v2"))
	require.NoError(t, e.s.PolicySkipPut(e.ctx, s1))

	require.NoError(t, e.s.PolicySkipDelete(e.ctx, "s2"))
	require.ErrorIs(t, e.s.PolicySkipDelete(e.ctx, "s2"), ports.ErrNotFound)
	require.Equal(t, []release.PolicySkip{s1}, list("v1"))
	require.Equal(t, []release.PolicySkip{s3}, list("v2"))
	require.Empty(t, list("v-none"))
}

// relPageWalk reads a deployment's versions through VersionsPage, limit at
// a time, each page continuing after the last version of the one before;
// it checks that every call reads one page of exactly the rows it returns.
func relPageWalk(t testT, e *relEnv, dep string, limit int) []string {
	t.Helper()
	var out []string
	var after *ports.NewestKey
	for range 100 {
		e.pages.Store(0)
		e.rows.Store(0)
		page, err := e.s.VersionsPage(e.ctx, ports.VersionPageParams{DeploymentID: dep, After: after, Limit: limit})
		require.NoError(t, err)
		require.Equal(t, int64(1), e.pages.Load(), "one page read per call")
		require.Equal(t, int64(len(page)), e.rows.Load(), "only the page's rows are read, whatever the cursor's depth")
		require.LessOrEqual(t, len(page), ports.VersionPageSize(limit))
		for _, v := range page {
			out = append(out, v.ID)
		}
		if len(page) < ports.VersionPageSize(limit) {
			return out
		}
		last := page[len(page)-1]
		after = &ports.NewestKey{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	require.FailNow(t, "no last page after 100 pages")
	return nil
}

func relVersionsPage(t *testing.T, e *relEnv) {
	relWorld(t, e)
	// Ties on the creation time at every page boundary: a cursor that kept
	// only the time would skip or repeat versions; d2's version at the
	// same time never shows.
	relCreateVersions(t, e,
		relVersion("vc", relD1, relAt(3)),
		relVersion("va", relD1, relAt(5)),
		relVersion("vz", relD1, relAt(1)),
		relVersion("other", relD2, relAt(5)),
		relVersion("vb", relD1, relAt(5)),
		relVersion("vb2", relD1, relAt(5)),
		relVersion("vd", relD1, relAt(4)),
		relVersion("vE", relD1, relAt(2).Add(time.Second)),
	)
	want := []string{"vb2", "vb", "va", "vd", "vc", "vE", "vz"}
	for _, limit := range []int{1, 2, 3, 7, 0} {
		require.Equal(t, want, relPageWalk(t, e, relD1, limit), "limit %d", limit)
	}
	page := func(after *ports.NewestKey, limit int) []string {
		t.Helper()
		vs, err := e.s.VersionsPage(e.ctx, ports.VersionPageParams{DeploymentID: relD1, After: after, Limit: limit})
		require.NoError(t, err)
		ids := []string{}
		for _, v := range vs {
			require.Equal(t, relD1, v.DeploymentID)
			got, err := e.s.VersionGet(e.ctx, v.ID)
			require.NoError(t, err)
			require.Equal(t, got, v, "a page holds the stored versions")
			ids = append(ids, v.ID)
		}
		return ids
	}
	at5 := relNorm(relAt(5))
	require.Equal(t, []string{"va", "vd"}, page(&ports.NewestKey{CreatedAt: at5, ID: "vb"}, 2), "below vb: va shares its time")
	require.Equal(t, []string{"vb", "va"}, page(&ports.NewestKey{CreatedAt: at5, ID: "vb1"}, 2), "a key naming no version continues where it would sit")
	require.Equal(t, []string{"vd"}, page(&ports.NewestKey{CreatedAt: at5, ID: "a"}, 1), "below every version of that time")
	require.Empty(t, page(&ports.NewestKey{CreatedAt: relNorm(relAt(0)), ID: "zz"}, 5), "below the oldest")
	// A version created between two pages: above the cursor it is not on
	// the next page, below it it is.
	first := page(nil, 2)
	require.Equal(t, []string{"vb2", "vb"}, first)
	relCreateVersions(t, e, relVersion("top", relD1, relAt(9)), relVersion("mid", relD1, relAt(4).Add(time.Second)))
	require.Equal(t, []string{"va", "mid", "vd"}, page(&ports.NewestKey{CreatedAt: at5, ID: "vb"}, 3))
	empty, err := e.s.VersionsPage(e.ctx, ports.VersionPageParams{DeploymentID: "d-none"})
	require.NoError(t, err)
	require.Empty(t, empty)
	_, err = e.s.VersionsPage(e.ctx, ports.VersionPageParams{DeploymentID: relD1, After: &ports.NewestKey{CreatedAt: at5}})
	requireInvalid(t, err, "after.id")
}
