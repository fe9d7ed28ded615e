package chain

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
)

// TestBatchVersionsBeyondTheFirstPage: a batch reads a deployment's first
// page of versions once for all its items, and an item whose allowed
// version lies below that page streams on from just below it: at the
// page's edge, past it, and at the oldest version, every version is
// reached once.
func TestBatchVersionsBeyondTheFirstPage(t *testing.T) {
	const n = 2*ports.DefaultVersionPageSize + 50
	for _, v := range []int{n - ports.DefaultVersionPageSize + 1, n - ports.DefaultVersionPageSize, 1} {
		t.Run(fmt.Sprint("v", v), func(t *testing.T) {
			pin := policy.Policy{ID: "pin", WorkspaceID: "ws", Name: "pin", Enabled: true,
				Rules: []policy.Rule{{ID: "pin", Spec: policy.VersionSelector{Selector: fmt.Sprintf(`version.tag == "v%d"`, v)}}}}
			c, targets := versionsChain(t, n, []string{"c1", "c2", "c3"}, pin)
			ctx, s := context.Background(), c.Store
			var items []engine.Item
			for _, tg := range targets {
				items = append(items, engine.Item{Key: TargetKey(KindDesiredRelease, tg), Attempt: 1})
			}
			outs := c.runBatch(ctx, items, c.desiredRelease)
			for i, tg := range targets {
				require.NoError(t, outs[i].Err())
				d, err := s.DesiredGet(ctx, tg)
				require.NoError(t, err)
				rel, err := s.ReleaseGet(ctx, d.ReleaseID)
				require.NoError(t, err)
				require.Equal(t, fmt.Sprint("v", v), rel.VersionID, tg.Key())
			}
		})
	}
}
