package porttest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// relDecisions: a decision's history entry is recorded by the write that
// changes the decision (DesiredSet, and DesiredSetMany on a batcher),
// stamped with the write's time and the next sequence number, read newest
// first and cut to ports.TargetDecisionsKept; an unchanged or refused
// write, and a write without an entry, record nothing.
func relDecisions(t *testing.T, e *relEnv) {
	relWorld(t, e)
	relCreateVersions(t, e, relVersion("v1", relD1, relAt(1)), relVersion("v2", relD1, relAt(2)))
	target, other := tgt(relD1, relE1, relR1), tgt(relD1, relE2, relR1)
	r1 := relStoreRelease(t, e, target, "v1")
	history := func(tg release.ReleaseTarget, limit int) []ports.TargetDecision {
		t.Helper()
		got, err := e.s.TargetDecisions(e.ctx, tg, limit)
		require.NoError(t, err)
		return got
	}
	require.Empty(t, history(target, 0), "a target never decided has no history")

	entry := func(i int) *ports.TargetDecision {
		return &ports.TargetDecision{How: "newest-allowed", ReleaseID: r1.ID, VersionID: "v1", Tag: "v1",
			Reasons: []string{fmt.Sprintf("reason %d", i)}, Trigger: "event", Policies: []release.PolicyRevision{{ID: "p", Revision: 2}},
			Verdicts: []policy.RuleVerdict{{PolicyID: "p", RuleID: "r", Type: policy.TypeAnyApproval, Verdict: policy.Verdict{Status: policy.Allowed, Message: "ok"}}}}
	}
	at := e.clock.Advance(time.Minute)
	d := ports.DesiredRelease{Target: target, ReleaseID: r1.ID, Reasons: []string{"reason 0"}, Decision: entry(0)}
	changed, err := e.s.DesiredSet(e.ctx, d)
	require.NoError(t, err)
	require.True(t, changed)
	got := history(target, 0)
	require.Len(t, got, 1)
	want := *entry(0)
	want.Seq, want.At = 1, relNorm(at)
	require.Equal(t, want, got[0], "stamped with the write's time and sequence number 1")
	stored, err := e.s.DesiredGet(e.ctx, target)
	require.NoError(t, err)
	require.Nil(t, stored.Decision, "the entry is not read back with the decision")

	// Unchanged, refused, or without an entry: nothing recorded.
	e.clock.Advance(time.Minute)
	changed, err = e.s.DesiredSet(e.ctx, d)
	require.NoError(t, err)
	require.False(t, changed)
	_, err = e.s.DesiredSet(e.ctx, ports.DesiredRelease{Target: target, ReleaseID: "r-none", Decision: entry(9)})
	require.Error(t, err)
	changed, err = e.s.DesiredSet(e.ctx, ports.DesiredRelease{Target: target, Reasons: []string{"plain"}})
	require.NoError(t, err)
	require.True(t, changed)
	require.Len(t, history(target, 0), 1)

	// More than kept: the newest stay, newest first, numbered on.
	n := ports.TargetDecisionsKept + 3
	for i := 1; i <= n; i++ {
		e.clock.Advance(time.Second)
		_, err := e.s.DesiredSet(e.ctx, ports.DesiredRelease{Target: target, ReleaseID: r1.ID, Reasons: []string{fmt.Sprintf("reason %d", i)}, Decision: entry(i)})
		require.NoError(t, err)
	}
	got = history(target, 0)
	require.Len(t, got, ports.TargetDecisionsKept)
	for i, g := range got {
		require.Equal(t, int64(n+1-i), g.Seq)
		require.Equal(t, []string{fmt.Sprintf("reason %d", n-i)}, g.Reasons)
		if i > 0 {
			require.False(t, g.At.After(got[i-1].At))
		}
	}
	require.Len(t, history(target, 2), 2, "a limit keeps the newest")
	require.Equal(t, got[:2], history(target, 2))
	require.Len(t, history(target, 1000), ports.TargetDecisionsKept)
	require.Empty(t, history(other, 0), "another target's history stays apart")

	// A batcher records as DesiredSet does.
	b, ok := e.s.(ports.DesiredBatcher)
	if !ok {
		return
	}
	rOther := release.NewRelease(other, "v2", nil, time.Time{})
	at = e.clock.Advance(time.Minute)
	res := b.DesiredSetMany(e.ctx, []ports.DesiredWrite{
		{Release: &rOther, Desired: ports.DesiredRelease{Target: other, ReleaseID: rOther.ID, Decision: entry(100)}},
		{Desired: ports.DesiredRelease{Target: target, Reasons: []string{"none"}, Decision: &ports.TargetDecision{How: "no-release", Reasons: []string{"none"}}}},
	})
	require.NoError(t, res[0].Err)
	require.NoError(t, res[1].Err)
	got = history(other, 0)
	require.Len(t, got, 1)
	want = *entry(100)
	want.Seq, want.At = 1, relNorm(at)
	require.Equal(t, want, got[0])
	got = history(target, 1)
	require.Equal(t, ports.TargetDecision{Seq: int64(n + 2), At: relNorm(at), How: "no-release", Reasons: []string{"none"}}, got[0])
	require.Len(t, history(target, 0), ports.TargetDecisionsKept)
}
