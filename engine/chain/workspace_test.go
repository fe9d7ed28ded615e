package chain_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestHugeWorkspaceDoesNotStarveSmallOne: a workspace whose deployment
// has 300 targets waiting is synced first, so all its items come before the
// small workspace's in lease order; a lease of one batch still takes every
// one of the small workspace's 6 targets, because the chain enqueues each
// item in its deployment's workspace and the lease shares fairly.
func TestHugeWorkspaceDoesNotStarveSmallOne(t *testing.T) {
	for name := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, name)
			ctx, s, r := h.ctx, h.store, require.New(t)
			h.drain()
			_, err := s.Workspaces().Put(ctx, release.Workspace{ID: "big", Name: "big"}, 0)
			r.NoError(err)
			_, err = s.Systems().Put(ctx, release.System{ID: "bigsys", WorkspaceID: "big", Name: "big"}, 0)
			r.NoError(err)
			_, err = s.Environments().Put(ctx, release.Environment{ID: "bigenv", SystemID: "bigsys", Name: "bigenv", ResourceSelector: "true"}, 0)
			r.NoError(err)
			for i := range 300 {
				id := fmt.Sprintf("b%03d", i)
				_, err = s.Resources().Put(ctx, release.Resource{ID: id, WorkspaceID: "big", Kind: "cluster", Identifier: id, Name: id}, 0)
				r.NoError(err)
			}
			_, err = s.Deployments().Put(ctx, release.Deployment{ID: "aaa", SystemID: "bigsys", Name: "aaa", Slug: "aaa",
				JobAgentID: "fake-agent", ResourceSelector: "true"}, 0)
			r.NoError(err)
			_, err = h.chain.SyncTargets(ctx, "bigsys")
			r.NoError(err)
			h.version("v1") // six targets of "api", in workspace ws, a minute later

			ls, err := h.q.WorkLease(ctx, ports.LeaseParams{Kinds: []string{chain.KindDesiredRelease}, Limit: chain.BatchSize,
				Duration: time.Minute, Owner: "test"})
			r.NoError(err)
			small := 0
			for _, l := range ls {
				if strings.HasPrefix(l.Key.ScopeID, "api:") {
					small++
				}
			}
			r.Len(ls, chain.BatchSize)
			r.Equal(6, small, "every target of the small workspace in the first batch")
			it, err := h.q.WorkGet(ctx, chain.TargetKey(chain.KindDesiredRelease, release.ReleaseTarget{DeploymentID: "aaa", EnvironmentID: "bigenv", ResourceID: "b299"}))
			r.NoError(err)
			r.Equal("big", it.Workspace)
		})
	}
}
