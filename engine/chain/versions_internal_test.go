package chain

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestBatchVersionsBeyondTheFirstPage: a batch reads a deployment's first
// page of versions once for all its items, and an item whose allowed
// version lies below that page streams on from just below it: at the
// page's edge, past it, and at the oldest version, every version is
// reached once.
func TestBatchVersionsBeyondTheFirstPage(t *testing.T) {
	const n = 2*ports.DefaultVersionPageSize + 50
	for _, pin := range []int{n - ports.DefaultVersionPageSize + 1, n - ports.DefaultVersionPageSize, 1} {
		t.Run(fmt.Sprint("v", pin), func(t *testing.T) {
			ctx := context.Background()
			clock := ports.SystemClock
			s := memory.NewReleaseStore(clock)
			c := &Chain{Store: s, Queue: memory.NewQueue(clock), Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			_, err := s.Workspaces().Put(ctx, release.Workspace{ID: "ws", Name: "ws"}, 0)
			require.NoError(t, err)
			_, err = s.Systems().Put(ctx, release.System{ID: "sys", WorkspaceID: "ws", Name: "sys"}, 0)
			require.NoError(t, err)
			_, err = s.Environments().Put(ctx, release.Environment{ID: "prod", SystemID: "sys", Name: "prod", ResourceSelector: "true"}, 0)
			require.NoError(t, err)
			var items []engine.Item
			for _, r := range []string{"c1", "c2", "c3"} {
				_, err = s.Resources().Put(ctx, release.Resource{ID: r, WorkspaceID: "ws", Kind: "cluster", Identifier: r, Name: r}, 0)
				require.NoError(t, err)
				items = append(items, engine.Item{Key: TargetKey(KindDesiredRelease, release.ReleaseTarget{DeploymentID: "api", EnvironmentID: "prod", ResourceID: r}), Attempt: 1})
			}
			_, err = s.Deployments().Put(ctx, release.Deployment{ID: "api", SystemID: "sys", Name: "api", Slug: "api", ResourceSelector: "true"}, 0)
			require.NoError(t, err)
			_, err = catalog.New(s, catalog.Config{}).Policies("test").Put(ctx, policy.Policy{ID: "pin", Name: "pin", Enabled: true,
				Rules: []policy.Rule{{ID: "pin", Spec: policy.VersionSelector{Selector: fmt.Sprintf(`version.tag == "v%d"`, pin)}}}}, 0)
			require.NoError(t, err)
			_, err = c.SyncTargets(ctx, "sys")
			require.NoError(t, err)
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i := 1; i <= n; i++ {
				require.NoError(t, s.VersionCreate(ctx, release.DeploymentVersion{ID: fmt.Sprint("v", i), DeploymentID: "api",
					Tag: fmt.Sprint("v", i), Status: release.VersionReady, CreatedAt: t0.Add(time.Duration(i) * time.Second)}))
			}
			outs := c.runBatch(ctx, items, c.desiredRelease)
			for i, it := range items {
				require.NoError(t, outs[i].Err())
				tg, err := targetOf(it)
				require.NoError(t, err)
				d, err := s.DesiredGet(ctx, tg)
				require.NoError(t, err)
				rel, err := s.ReleaseGet(ctx, d.ReleaseID)
				require.NoError(t, err)
				require.Equal(t, fmt.Sprint("v", pin), rel.VersionID, tg.Key())
			}
		})
	}
}
