package porttest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// relStoreRelease upserts the release of version on target (no variables)
// and fails the test on error.
func relStoreRelease(t testT, e *relEnv, target release.ReleaseTarget, versionID string) release.Release {
	t.Helper()
	r, _, err := e.s.ReleaseUpsert(e.ctx, release.NewRelease(target, versionID, nil, time.Time{}))
	require.NoError(t, err)
	return r
}

func relReleaseUpsert(t *testing.T, e *relEnv) {
	relWorld(t, e)
	relCreateVersions(t, e, relVersion("v1", relD1, relAt(1)))
	target := tgt(relD1, relE1, relR1)
	vars := map[string]release.Value{
		"replicas": {Literal: 3},
		"ratio":    {Literal: 0.5},
		"obj":      {Literal: map[string]any{"a": []any{1, "x"}}},
		"region":   {Reference: &release.Reference{Relation: "vpc", Path: []string{"metadata", "region"}}},
		"token":    {Sensitive: &release.SecretRef{Ciphertext: "c1ph3r"}},
	}
	stamp := e.clock.Advance(time.Second)
	r := release.NewRelease(target, "v1", vars, time.Time{})
	got, created, err := e.s.ReleaseUpsert(e.ctx, r)
	require.NoError(t, err)
	require.True(t, created)
	want := r
	want.CreatedAt = relNorm(stamp)
	want.Variables = map[string]release.Value{
		"replicas": {Literal: int64(3)},
		"ratio":    {Literal: 0.5},
		"obj":      {Literal: map[string]any{"a": []any{int64(1), "x"}}},
		"region":   vars["region"],
		"token":    vars["token"],
	}
	require.Equal(t, want, got, "a zero created_at is stamped by the store; literals read back as from JSON")
	read, err := e.s.ReleaseGet(e.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, want, read)

	// The same content again, later and with its own creation time: the
	// stored release comes back unchanged.
	e.clock.Advance(time.Hour)
	again := release.NewRelease(target, "v1", vars, relAt(30))
	got, created, err = e.s.ReleaseUpsert(e.ctx, again)
	require.NoError(t, err)
	require.False(t, created, "identical content is stored once")
	require.Equal(t, want, got)

	// A caller's creation time is kept, normalised.
	other := release.NewRelease(tgt(relD1, relE1, relR2), "v1", nil, relAt(7))
	got, created, err = e.s.ReleaseUpsert(e.ctx, other)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, relNorm(relAt(7)), got.CreatedAt)
	require.NotEqual(t, r.ID, got.ID, "another target is another release")

	read.Variables["replicas"] = release.Value{Literal: "changed"}
	read.Variables["region"].Reference.Path[0] = "changed"
	again2, err := e.s.ReleaseGet(e.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, want, again2, "reads are copies")
}

func relReleaseRefused(t *testing.T, e *relEnv) {
	relWorld(t, e)
	relCreateVersions(t, e, relVersion("v1", relD1, relAt(1)), relVersion("v2", relD2, relAt(1)))
	target := tgt(relD1, relE1, relR1)

	bad := release.NewRelease(target, "v1", nil, time.Time{})
	bad.ID = "not-the-hash"
	_, _, err := e.s.ReleaseUpsert(e.ctx, bad)
	requireInvalid(t, err, "id")

	missing := release.NewRelease(target, "v-none", nil, time.Time{})
	_, _, err = e.s.ReleaseUpsert(e.ctx, missing)
	require.ErrorIs(t, err, ports.ErrNotFound, "a missing version")

	foreign := release.NewRelease(target, "v2", nil, time.Time{})
	_, _, err = e.s.ReleaseUpsert(e.ctx, foreign)
	requireInvalid(t, err, "version_id")

	for _, id := range []string{bad.ID, missing.ID, foreign.ID} {
		_, err = e.s.ReleaseGet(e.ctx, id)
		require.ErrorIs(t, err, ports.ErrNotFound, "refused upserts stored nothing")
	}
}

func relDesired(t *testing.T, e *relEnv) {
	relWorld(t, e)
	relCreateVersions(t, e, relVersion("v1", relD1, relAt(1)), relVersion("v2", relD1, relAt(2)))
	target := tgt(relD1, relE1, relR1)
	r1 := relStoreRelease(t, e, target, "v1")
	r2 := relStoreRelease(t, e, target, "v2")
	rOther := relStoreRelease(t, e, tgt(relD1, relE2, relR1), "v1")
	set := func(d ports.DesiredRelease) bool {
		t.Helper()
		changed, err := e.s.DesiredSet(e.ctx, d)
		require.NoError(t, err)
		return changed
	}
	get := func() ports.DesiredRelease {
		t.Helper()
		d, err := e.s.DesiredGet(e.ctx, target)
		require.NoError(t, err)
		return d
	}

	_, err := e.s.DesiredGet(e.ctx, target)
	require.ErrorIs(t, err, ports.ErrNotFound)

	t0 := e.clock.Now()
	d := ports.DesiredRelease{Target: target, ReleaseID: r1.ID, Reasons: []string{"newest ready"}, NextCheckAt: relAt(90)}
	require.True(t, set(d))
	want := d
	want.NextCheckAt = relNorm(d.NextCheckAt)
	want.UpdatedAt = relNorm(t0)
	require.Equal(t, want, get())

	e.clock.Advance(time.Minute)
	require.False(t, set(d), "an unchanged decision")
	same := d
	same.NextCheckAt = relNorm(d.NextCheckAt).In(time.FixedZone("Y", -3600))
	same.UpdatedAt = relAt(500)
	require.False(t, set(same), "the same instant in another zone; UpdatedAt is the store's")
	require.Equal(t, want, get(), "an unchanged decision is not rewritten")

	for i, next := range []ports.DesiredRelease{
		{Target: target, ReleaseID: r2.ID, Reasons: []string{"newest ready"}, NextCheckAt: relAt(90)},
		{Target: target, ReleaseID: r2.ID, Reasons: []string{"newest ready", "approved"}, NextCheckAt: relAt(90)},
		{Target: target, ReleaseID: r2.ID, Reasons: []string{"newest ready", "approved"}},
		{Target: target, Reasons: []string{"blocked by window"}, NextCheckAt: relAt(120)},
		{Target: target},
	} {
		at := e.clock.Advance(time.Minute)
		require.True(t, set(next), "change %d", i)
		w := next
		w.NextCheckAt = relNorm(next.NextCheckAt)
		if next.NextCheckAt.IsZero() {
			w.NextCheckAt = time.Time{}
		}
		w.UpdatedAt = relNorm(at)
		require.Equal(t, w, get(), "change %d", i)
	}
	e.clock.Advance(time.Minute)
	require.False(t, set(ports.DesiredRelease{Target: target, Reasons: []string{}}), "no reasons, empty or nil, is the same decision")

	before := get()
	_, err = e.s.DesiredSet(e.ctx, ports.DesiredRelease{Target: target, ReleaseID: "r-none"})
	require.ErrorIs(t, err, ports.ErrNotFound, "a missing release")
	_, err = e.s.DesiredSet(e.ctx, ports.DesiredRelease{Target: target, ReleaseID: rOther.ID})
	requireInvalid(t, err, "release_id")
	_, err = e.s.DesiredSet(e.ctx, ports.DesiredRelease{Target: tgt(relD1, "", relR1)})
	requireInvalid(t, err, "target")
	require.Equal(t, before, get(), "refused decisions changed nothing")

	// Another target's decision is its own.
	other := ports.DesiredRelease{Target: rOther.Target, ReleaseID: rOther.ID}
	require.True(t, set(other))
	require.Equal(t, before, get())
	got, err := e.s.DesiredGet(e.ctx, rOther.Target)
	require.NoError(t, err)
	require.Equal(t, rOther.ID, got.ReleaseID)
	got.Reasons = append(got.Reasons, "changed")
	again, err := e.s.DesiredGet(e.ctx, rOther.Target)
	require.NoError(t, err)
	require.Nil(t, again.Reasons, "reads are copies")

	if b, ok := e.s.(ports.JobStateBatcher); ok {
		// Many targets in one call: each as DesiredGet reads it, a target
		// without a decision left out.
		none := tgt(relD1, relE1, "no-decision")
		many, err := b.DesiredGetMany(e.ctx, []release.ReleaseTarget{target, rOther.Target, none})
		require.NoError(t, err)
		require.Len(t, many, 2)
		for _, x := range []release.ReleaseTarget{target, rOther.Target} {
			one, err := e.s.DesiredGet(e.ctx, x)
			require.NoError(t, err)
			require.Equal(t, one, many[x], "DesiredGetMany of %s", x)
		}
		require.NotContains(t, many, none)
	}
}

// relDesiredMany: a store that is a ports.DesiredBatcher writes a call's
// decisions as ReleaseUpsert then DesiredSet would, one write at a time
// (ports.DesiredSetEach on a twin store with the same objects and clock):
// the same results, releases and decisions, over calls that store new
// releases, name stored ones, leave decisions unchanged, fail some writes
// (a version of another deployment, a release of another target, a
// missing release, an invalid decision) among good ones, and name a
// target twice.
func relDesiredMany(t *testing.T, newStore ReleaseStoreFactory) {
	t.Parallel()
	env := func() *relEnv {
		e := &relEnv{ctx: t.Context(), clock: NewFakeClock(relT0)}
		e.s = newStore(t, ReleaseStoreDeps{Clock: e.clock})
		relWorld(t, e)
		relCreateVersions(t, e, relVersion("v1", relD1, relAt(1)), relVersion("v2", relD1, relAt(2)), relVersion("w1", relD2, relAt(3)))
		return e
	}
	e, twin := env(), env()
	b, ok := e.s.(ports.DesiredBatcher)
	if !ok {
		t.Skip("the store is no ports.DesiredBatcher")
	}
	tA, tB, tC, tD, tE := tgt(relD1, relE1, relR1), tgt(relD1, relE2, relR1), tgt(relD1, relE1, relR2), tgt(relD2, relE1, relR2),
		tgt(relD2, relE2, relR3)
	targets := []release.ReleaseTarget{tA, tB, tC, tD, tE}
	rel := func(target release.ReleaseTarget, version string) *release.Release {
		r := release.NewRelease(target, version, map[string]release.Value{"n": {Literal: 1}}, time.Time{})
		return &r
	}
	with := func(r *release.Release, reasons ...string) ports.DesiredWrite {
		return ports.DesiredWrite{Release: r, Desired: ports.DesiredRelease{Target: r.Target, ReleaseID: r.ID, Reasons: reasons}}
	}
	none := func(target release.ReleaseTarget, next time.Time, reasons ...string) ports.DesiredWrite {
		return ports.DesiredWrite{Desired: ports.DesiredRelease{Target: target, Reasons: reasons, NextCheckAt: next}}
	}
	a1, a2 := rel(tA, "v1"), rel(tA, "v2")
	wrongVersion := rel(tB, "w1") // w1 is d2's; tB is d1's
	otherTarget := ports.DesiredWrite{Desired: ports.DesiredRelease{Target: tC, ReleaseID: a1.ID}}
	missing := ports.DesiredWrite{Desired: ports.DesiredRelease{Target: tD, ReleaseID: "r-none"}}
	invalid := ports.DesiredWrite{Desired: ports.DesiredRelease{Target: release.ReleaseTarget{DeploymentID: relD1}}}
	calls := [][]ports.DesiredWrite{
		{with(a1, "newest"), with(rel(tB, "v1")), none(tC, relAt(90), "blocked by window"), with(rel(tD, "w1"))},
		{with(a1, "newest"), with(rel(tB, "v1")), none(tC, relAt(90), "blocked by window"), with(rel(tD, "w1"))},
		{with(a2), with(wrongVersion), otherTarget, missing, with(rel(tE, "w1")), invalid},
		{{Desired: ports.DesiredRelease{Target: tA, ReleaseID: a1.ID}}, none(tC, time.Time{})},
		{none(tA, time.Time{}, "first"), with(a2, "second")},
	}
	for n, writes := range calls {
		e.clock.Advance(time.Minute)
		twin.clock.Advance(time.Minute)
		got := b.DesiredSetMany(e.ctx, writes)
		want := ports.DesiredSetEach(twin.ctx, twin.s, writes)
		require.Len(t, got, len(writes), "call %d", n)
		for i := range writes {
			require.Equal(t, want[i].Changed, got[i].Changed, "call %d, write %d", n, i)
			if want[i].Err == nil {
				require.NoError(t, got[i].Err, "call %d, write %d", n, i)
				continue
			}
			require.Error(t, got[i].Err, "call %d, write %d: %v", n, i, want[i].Err)
			for _, kind := range []error{release.ErrInvalid, ports.ErrNotFound} {
				require.Equal(t, errors.Is(want[i].Err, kind), errors.Is(got[i].Err, kind), "call %d, write %d: %v, %v", n, i, want[i].Err, got[i].Err)
			}
		}
		for _, target := range targets {
			wd, werr := twin.s.DesiredGet(twin.ctx, target)
			gd, gerr := e.s.DesiredGet(e.ctx, target)
			require.Equal(t, werr == nil, gerr == nil, "call %d, %s", n, target)
			require.Equal(t, wd, gd, "call %d, %s", n, target)
		}
		for _, w := range writes {
			if w.Release == nil {
				continue
			}
			wr, werr := twin.s.ReleaseGet(twin.ctx, w.Release.ID)
			gr, gerr := e.s.ReleaseGet(e.ctx, w.Release.ID)
			require.Equal(t, werr == nil, gerr == nil, "call %d, release of %s", n, w.Release.Target)
			require.Equal(t, wr, gr, "call %d, release of %s", n, w.Release.Target)
		}
	}
}
