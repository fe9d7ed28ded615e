package chain_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// replay decodes a recorded decision's snapshot from its JSON, as
// reconciler decide reads it, and decides it again.
func replay(t *testing.T, d *ports.TargetDecision) policy.Choice {
	t.Helper()
	require.NotNil(t, d.Snapshot, "decision %d has its snapshot", d.Seq)
	b, err := json.Marshal(d.Snapshot)
	require.NoError(t, err)
	var snap policy.ChooseSnapshot
	require.NoError(t, json.Unmarshal(b, &snap))
	ch, err := snap.Replay()
	require.NoError(t, err)
	return ch
}

// TestDecisionHistoryReplays: every desired-release decision that changes a
// target's decision is kept in its history with the chosen version, the
// rules' verdicts and the policy revisions, and replays from its recorded
// snapshot to the same choice.
func TestDecisionHistoryReplays(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		progressionPolicies(h, false)
		h.drain()
		h.version("v1")
		h.drain()
		h.finish(release.JobSuccessful, "dev")
		h.drain()
		h.finish(release.JobSuccessful, "staging")
		h.drain()
		_, err := h.chain.Approve(h.ctx, release.Approval{VersionID: "v1", EnvironmentID: "prod", User: "alice"})
		require.NoError(t, err)
		h.drain()

		hist, err := h.store.TargetDecisions(h.ctx, target("prod", "c1"), 0)
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(hist), 2)
		require.Equal(t, "newest-allowed", hist[0].How)
		require.Equal(t, "v1", hist[0].VersionID)
		require.NotEmpty(t, hist[0].ReleaseID)
		require.Len(t, hist[0].Verdicts, 2, "every prod rule's verdict on v1")
		require.Equal(t, []release.PolicyRevision{{ID: "prod-gate", Revision: 1}}, hist[0].Policies)
		require.NotEmpty(t, hist[0].Trigger)
		// Staging's decision reads dev through its progression summary,
		// not dev's targets: the snapshot stays the same size however many
		// targets dev has, and replays below to the same choice.
		staged, err := h.store.TargetDecisions(h.ctx, target("staging", "c1"), 1)
		require.NoError(t, err)
		require.NotNil(t, staged[0].Snapshot)
		require.NotEmpty(t, staged[0].Snapshot.Candidates)
		summarized := 0
		for _, es := range staged[0].Snapshot.Candidates[0].Environments {
			require.Empty(t, es.Targets, "environment %s", es.Environment.ID)
			if es.Progression != nil {
				summarized++
				require.Equal(t, 2, es.Progression.Targets, "dev's targets")
			}
		}
		require.Equal(t, 1, summarized, "dev, the one upstream environment, is summarized")
		waited := hist[1]
		require.Equal(t, "no-release", waited.How)
		require.Contains(t, waited.Reasons[0], "approval")
		require.Greater(t, hist[0].Seq, waited.Seq)

		for _, env := range []string{"dev", "staging", "prod"} {
			for _, res := range []string{"c1", "c2"} {
				hist, err := h.store.TargetDecisions(h.ctx, target(env, res), 0)
				require.NoError(t, err)
				require.NotEmpty(t, hist, "%s/%s", env, res)
				for i := range hist {
					d := &hist[i]
					ch := replay(t, d)
					got := ""
					if ch.Version != nil {
						got = ch.Version.ID
					}
					require.Equal(t, d.VersionID, got, "%s/%s decision %d", env, res, d.Seq)
					require.Equal(t, d.Reasons, ch.Reasons, "%s/%s decision %d", env, res, d.Seq)
					require.True(t, d.NextCheckAt.Equal(ch.NextCheckAt), "%s/%s decision %d", env, res, d.Seq)
				}
			}
		}
	})
}
