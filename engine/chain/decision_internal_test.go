package chain

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestRecordedDecisionKeepsABoundedSnapshot: a decision keeps its
// snapshot while it holds at most ports.MaxDecisionSnapshotFacts facts,
// and says why it dropped a larger one (a rollout over every target of a
// large deployment), so the history does not grow with the square of the
// deployment's size. Its verdicts are kept either way.
func TestRecordedDecisionKeepsABoundedSnapshot(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, ports.MaxDecisionSnapshotFacts, ports.MaxDecisionSnapshotFacts + 1, 10_000} {
		snap := &policy.ChooseSnapshot{Kind: policy.SnapshotKind}
		for i := range n {
			snap.Base.DeploymentTargets = append(snap.Base.DeploymentTargets,
				release.ReleaseTarget{DeploymentID: "d", EnvironmentID: "e", ResourceID: fmt.Sprintf("r%d", i)})
		}
		require.Equal(t, n, snap.Facts())
		d := decisionOf(engine.Item{}, &facts{}, nil, &policy.Choice{}, "policy", snap, nil)
		if n <= ports.MaxDecisionSnapshotFacts {
			require.Same(t, snap, d.Snapshot, "%d facts are kept", n)
			require.Empty(t, d.SnapshotOmitted)
			continue
		}
		require.Nil(t, d.Snapshot, "%d facts are too many", n)
		require.Contains(t, d.SnapshotOmitted, fmt.Sprintf("%d facts", n))
	}
}
