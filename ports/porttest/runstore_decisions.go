package porttest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// runDecisionsRecorded: a decision is recorded with the write that carries
// it, stamped with the version that write produced and the write's time,
// and read newest first; a write without one records nothing.
func runDecisionsRecorded(t *testing.T, ctx context.Context, s ports.RunStore) {
	row := mustCreate(t, ctx, s, baseRow(reconcile.KindRepo, "d", reconcile.RepoPending))
	got, err := s.RunDecisions(ctx, row.Ref, 10)
	require.NoError(t, err)
	require.Empty(t, got, "a new run has no decisions")

	moved := ports.RunDecision{Action: string(reconcile.TypeTransition), Reason: "no-dependencies", From: reconcile.RepoPending, To: reconcile.RepoQueued}
	v2, err := s.RunUpdate(ctx, ports.RunUpdateParams{Ref: row.Ref, ExpectedVersion: 1, State: reconcile.RepoQueued, Body: row.Body, Decision: &moved})
	require.NoError(t, err)
	// An observation and a plain write record nothing.
	v3, err := s.RunObserve(ctx, ports.RunObserveParams{Ref: row.Ref, Patch: map[string]any{"n": 1}})
	require.NoError(t, err)
	v4, err := s.RunUpdate(ctx, ports.RunUpdateParams{Ref: row.Ref, ExpectedVersion: v3, State: reconcile.RepoQueued, Body: row.Body})
	require.NoError(t, err)
	asked := ports.RunDecision{Action: "intent", Reason: "cancel", By: "alice"}
	v5, err := s.RunUpdate(ctx, ports.RunUpdateParams{Ref: row.Ref, ExpectedVersion: v4, State: reconcile.RepoQueued, Body: row.Body, Decision: &asked})
	require.NoError(t, err)

	got, err = s.RunDecisions(ctx, row.Ref, 10)
	require.NoError(t, err)
	require.Len(t, got, 2)
	after, err := s.RunGet(ctx, row.Ref)
	require.NoError(t, err)
	asked.Version, asked.At = v5, after.UpdatedAt
	require.Equal(t, asked, got[0], "newest first, stamped with its write's version and time")
	require.Equal(t, v2, got[1].Version)
	require.Equal(t, moved.Action, got[1].Action)
	require.Equal(t, moved.Reason, got[1].Reason)
	require.Equal(t, reconcile.RepoPending, got[1].From)
	require.Equal(t, reconcile.RepoQueued, got[1].To)
	require.Empty(t, got[1].By)
	require.False(t, got[1].At.IsZero())
	require.False(t, got[1].At.After(got[0].At))

	// A limit keeps the newest.
	got, err = s.RunDecisions(ctx, row.Ref, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, v5, got[0].Version)

	// Another run's history stays apart; a missing run is ErrNotFound.
	other := mustCreate(t, ctx, s, baseRow(reconcile.KindStandalone, "d", reconcile.StandaloneQueued))
	got, err = s.RunDecisions(ctx, other.Ref, 0)
	require.NoError(t, err)
	require.Empty(t, got)
	_, err = s.RunDecisions(ctx, refOf(reconcile.KindRepo, "missing"), 0)
	require.ErrorIs(t, err, ports.ErrNotFound)
}

// runDecisionsStaleWrite: a write that loses its compare-and-swap records
// nothing.
func runDecisionsStaleWrite(t *testing.T, ctx context.Context, s ports.RunStore) {
	row := mustCreate(t, ctx, s, baseRow(reconcile.KindPersistentAgent, "a", reconcile.AgentIdle))
	d := ports.RunDecision{Action: string(reconcile.TypeTransition), Reason: "pending-messages", From: reconcile.AgentIdle, To: reconcile.AgentQueued}
	_, err := s.RunUpdate(ctx, ports.RunUpdateParams{Ref: row.Ref, ExpectedVersion: 7, State: reconcile.AgentQueued, Body: row.Body, Decision: &d})
	require.ErrorIs(t, err, ports.ErrConflict)
	_, err = s.RunUpdate(ctx, ports.RunUpdateParams{Ref: refOf(reconcile.KindPersistentAgent, "nope"), ExpectedVersion: 1, State: reconcile.AgentQueued, Body: row.Body, Decision: &d})
	require.ErrorIs(t, err, ports.ErrNotFound)
	got, err := s.RunDecisions(ctx, row.Ref, 0)
	require.NoError(t, err)
	require.Empty(t, got, "a lost compare-and-swap records no decision")
	requireUnchanged(t, s, row)
}

// runDecisionsBounded: a store keeps only the newest RunDecisionsKept
// decisions of a run.
func runDecisionsBounded(t *testing.T, ctx context.Context, s ports.RunStore) {
	row := mustCreate(t, ctx, s, baseRow(reconcile.KindStandalone, "b", reconcile.StandaloneQueued))
	v := row.Version
	n := ports.RunDecisionsKept + 7
	for i := range n {
		d := ports.RunDecision{Action: string(reconcile.TypePatchStatus), Reason: fmt.Sprintf("r-%03d", i)}
		var err error
		v, err = s.RunUpdate(ctx, ports.RunUpdateParams{Ref: row.Ref, ExpectedVersion: v, State: reconcile.StandaloneQueued, Body: row.Body, Decision: &d})
		require.NoError(t, err)
	}
	for _, limit := range []int{0, -1, ports.RunDecisionsKept + 1} {
		got, err := s.RunDecisions(ctx, row.Ref, limit)
		require.NoError(t, err)
		require.Len(t, got, ports.RunDecisionsKept, "limit %d", limit)
		require.Equal(t, fmt.Sprintf("r-%03d", n-1), got[0].Reason, "newest first")
		require.Equal(t, fmt.Sprintf("r-%03d", n-ports.RunDecisionsKept), got[len(got)-1].Reason, "the oldest kept")
		for i := 1; i < len(got); i++ {
			require.Less(t, got[i].Version, got[i-1].Version)
		}
	}
}

// runListByState: State keeps only the runs in that state, with paging.
func runListByState(t *testing.T, ctx context.Context, s ports.RunStore) {
	for i := range 5 {
		mustCreate(t, ctx, s, baseRow(reconcile.KindRepo, fmt.Sprintf("q%d", i), reconcile.RepoQueued))
		mustCreate(t, ctx, s, baseRow(reconcile.KindRepo, fmt.Sprintf("r%d", i), reconcile.RepoRunning))
	}
	mustCreate(t, ctx, s, baseRow(reconcile.KindStandalone, "q9", reconcile.StandaloneQueued))
	var ids []string
	after := ""
	for {
		page, err := s.RunList(ctx, ports.RunListParams{Kind: reconcile.KindRepo, State: reconcile.RepoRunning, AfterID: after, Limit: 2})
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			require.Equal(t, reconcile.RepoRunning, r.State)
			ids = append(ids, r.Ref.ID)
		}
		after = page[len(page)-1].Ref.ID
	}
	require.Equal(t, []string{"r0", "r1", "r2", "r3", "r4"}, ids)
	page, err := s.RunList(ctx, ports.RunListParams{Kind: reconcile.KindRepo, State: reconcile.RepoCompleted})
	require.NoError(t, err)
	require.Empty(t, page)
}
