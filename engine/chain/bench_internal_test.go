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

// benchVersions is how many versions the desired-release benchmark's
// deployment has.
const benchVersions = 100_000

// benchChain returns a chain on the memory adapters with one target whose
// deployment has benchVersions versions, v1 oldest, and the given policies.
func benchChain(b *testing.B, policies ...policy.Policy) (*Chain, release.ReleaseTarget) {
	b.Helper()
	c, targets := versionsChain(b, benchVersions, []string{"c1"}, policies...)
	return c, targets[0]
}

// versionsChain returns a chain on the memory adapters with one target per
// resource whose deployment has n versions, v1 oldest, one second apart,
// and the given policies.
func versionsChain(tb testing.TB, n int, resources []string, policies ...policy.Policy) (*Chain, []release.ReleaseTarget) {
	tb.Helper()
	ctx := context.Background()
	clock := ports.SystemClock
	s := memory.NewReleaseStore(clock)
	c := &Chain{Store: s, Queue: memory.NewQueue(clock), Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	_, err := s.Workspaces().Put(ctx, release.Workspace{ID: "ws", Name: "ws"}, 0)
	require.NoError(tb, err)
	_, err = s.Systems().Put(ctx, release.System{ID: "sys", WorkspaceID: "ws", Name: "sys"}, 0)
	require.NoError(tb, err)
	_, err = s.Environments().Put(ctx, release.Environment{ID: "prod", SystemID: "sys", Name: "prod", ResourceSelector: "true"}, 0)
	require.NoError(tb, err)
	var targets []release.ReleaseTarget
	for _, r := range resources {
		_, err = s.Resources().Put(ctx, release.Resource{ID: r, WorkspaceID: "ws", Kind: "cluster", Identifier: r, Name: r}, 0)
		require.NoError(tb, err)
		targets = append(targets, release.ReleaseTarget{DeploymentID: "api", EnvironmentID: "prod", ResourceID: r})
	}
	_, err = s.Deployments().Put(ctx, release.Deployment{ID: "api", SystemID: "sys", Name: "api", Slug: "api", ResourceSelector: "true"}, 0)
	require.NoError(tb, err)
	for _, p := range policies {
		_, err = catalog.New(s, catalog.Config{}).Policies("bench").Put(ctx, p, 0)
		require.NoError(tb, err)
	}
	_, err = c.SyncTargets(ctx, "sys")
	require.NoError(tb, err)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 1; i <= n; i++ {
		require.NoError(tb, s.VersionCreate(ctx, release.DeploymentVersion{ID: fmt.Sprint("v", i), DeploymentID: "api",
			Tag: fmt.Sprint("v", i), Status: release.VersionReady, CreatedAt: t0.Add(time.Duration(i) * time.Second)}))
	}
	return c, targets
}

// BenchmarkDesiredRelease measures one desired-release pass of a target
// among 100,000 versions: when the newest passes (the pass reads one page
// of versions) and when only the 50,000th newest does (the pass streams
// half of them, a page at a time).
func BenchmarkDesiredRelease(b *testing.B) {
	cases := []struct {
		name     string
		policies []policy.Policy
	}{
		{"newest-passes", nil},
		{"50000th-passes", []policy.Policy{{ID: "pin", Name: "pin", Enabled: true, Rules: []policy.Rule{
			{ID: "pin", Spec: policy.VersionSelector{Selector: fmt.Sprintf(`version.tag == "v%d"`, benchVersions-50_000+1)}}}}}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			c, t := benchChain(b, tc.policies...)
			ctx := context.Background()
			it := engine.Item{Key: TargetKey(KindDesiredRelease, t), Attempt: 1}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if out := c.desiredRelease(ctx, it); out.Err() != nil {
					b.Fatal(out.Err())
				}
			}
			b.StopTimer()
			d, err := c.Store.DesiredGet(ctx, t)
			require.NoError(b, err)
			rel, err := c.Store.ReleaseGet(ctx, d.ReleaseID)
			require.NoError(b, err)
			want := fmt.Sprint("v", benchVersions)
			if tc.policies != nil {
				want = fmt.Sprint("v", benchVersions-50_000+1)
			}
			require.Equal(b, want, rel.VersionID)
		})
	}
}
