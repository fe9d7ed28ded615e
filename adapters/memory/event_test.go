package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestEventsUndoneWithTheirTransaction: a transaction that fails takes
// back the events of its writes with the writes; one that commits keeps
// them.
func TestEventsUndoneWithTheirTransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := porttest.NewFakeClock(time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC))
	s := memory.NewReleaseStore(clock)
	tx := memory.NewTransactor(s, memory.NewQueue(clock))
	_, err := s.Workspaces().Put(ctx, release.Workspace{ID: "ws", Name: "ws"}, 0)
	require.NoError(t, err)
	_, err = s.Systems().Put(ctx, release.System{ID: "s", WorkspaceID: "ws", Name: "s"}, 0)
	require.NoError(t, err)
	_, err = s.Deployments().Put(ctx, release.Deployment{ID: "d", SystemID: "s", Name: "d", Slug: "d", ResourceSelector: "true"}, 0)
	require.NoError(t, err)
	_, err = s.Environments().Put(ctx, release.Environment{ID: "e", SystemID: "s", Name: "e", ResourceSelector: "true"}, 0)
	require.NoError(t, err)
	_, err = s.Resources().Put(ctx, release.Resource{ID: "r", WorkspaceID: "ws", Kind: "k", Identifier: "r", Name: "r"}, 0)
	require.NoError(t, err)
	target := release.ReleaseTarget{DeploymentID: "d", EnvironmentID: "e", ResourceID: "r"}
	_, err = s.TargetsReplace(ctx, ports.TargetsReplaceParams{Scope: ports.TargetScope{SystemID: "s"}, Targets: []release.ReleaseTarget{target}})
	require.NoError(t, err)
	require.NoError(t, s.VersionCreate(ctx, release.DeploymentVersion{ID: "v", DeploymentID: "d", Tag: "1", Status: release.VersionReady, CreatedAt: clock.Now()}))
	setup, err := s.EventsPending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, setup, 1, "the resource's resource.created")
	require.NoError(t, s.EventsDone(ctx, []int64{setup[0].Seq}))

	boom := errors.New("boom")
	err = tx.InTx(ctx, func(ctx context.Context) error {
		_, created, err := s.ReleaseUpsert(ctx, release.NewRelease(target, "v", nil, time.Time{}))
		require.NoError(t, err)
		require.True(t, created)
		return boom
	})
	require.ErrorIs(t, err, boom)
	evs, err := s.EventsPending(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, evs, "the failed transaction's release.created is gone with the release")

	require.NoError(t, tx.InTx(ctx, func(ctx context.Context) error {
		_, _, err := s.ReleaseUpsert(ctx, release.NewRelease(target, "v", nil, time.Time{}))
		return err
	}))
	evs, err = s.EventsPending(ctx, 10)
	require.NoError(t, err)
	require.Len(t, evs, 1, "a committed release keeps its event")
}
