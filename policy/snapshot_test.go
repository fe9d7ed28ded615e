package policy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestChooseSnapshotReplays: a snapshot recorded from Choose's stream
// replays, through its JSON, to the same choice; Verdicts are the chosen
// version's, or the newest examined one's when none is chosen; an
// override replays to its version; another kind is refused.
func TestChooseSnapshotReplays(t *testing.T) {
	base := setup(t)
	base.Version = release.DeploymentVersion{}
	approval := Policy{ID: "gate", Enabled: true, Rules: []Rule{{ID: "approval", Spec: AnyApproval{MinApprovals: 1}}}}
	v := func(id string, st release.VersionStatus) Candidate {
		return Candidate{Version: release.DeploymentVersion{ID: id, DeploymentID: "api", Tag: id, Status: st, CreatedAt: t0}}
	}
	approved := v("v2", release.VersionReady)
	approved.Approvals = []release.Approval{{VersionID: "v2", EnvironmentID: "prod", User: "alice", ApprovedAt: t0}}
	for _, tt := range []struct {
		name       string
		candidates []Candidate
		exclude    map[string]string
		want       string // the chosen version, "" for none
		verdicts   string // the version whose verdicts are kept
	}{
		{"the newest approved", []Candidate{v("v4", release.VersionBuilding), v("v3", release.VersionReady), approved, v("v1", release.VersionReady)}, nil, "v2", "v2"},
		{"none approved", []Candidate{v("v3", release.VersionReady), v("v1", release.VersionReady)}, nil, "", "v3"},
		{"excluded", []Candidate{approved, v("v1", release.VersionReady)}, map[string]string{"v2": "rolled back"}, "", "v1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := ChooseParams{Policies: []Policy{approval}, Base: base, Exclude: tt.exclude}
			var rec Recorder
			ch, err := Choose(p, rec.Wrap(func(yield func(Candidate, error) bool) {
				for _, c := range tt.candidates {
					if !yield(c, nil) {
						return
					}
				}
			}))
			require.NoError(t, err)
			snap := ChooseSnapshot{Kind: SnapshotKind, Policies: p.Policies, Base: base, Exclude: tt.exclude, Candidates: rec.Candidates}
			b, err := json.Marshal(snap)
			require.NoError(t, err)
			var back ChooseSnapshot
			require.NoError(t, json.Unmarshal(b, &back))
			got, err := back.Replay()
			require.NoError(t, err)
			require.Equal(t, ch.Reasons, got.Reasons)
			require.Equal(t, ch.Examined, got.Examined)
			gotID := ""
			if got.Version != nil {
				gotID = got.Version.ID
			}
			require.Equal(t, tt.want, gotID)
			vs := back.Verdicts(&got)
			require.Len(t, vs, 1)
			want := Explain(p.Policies, tt.candidates[0].Input(base))
			for _, c := range tt.candidates {
				if c.Version.ID == tt.verdicts {
					want = Explain(p.Policies, c.Input(base))
				}
			}
			require.Equal(t, want, vs)
		})
	}
	o := ChooseSnapshot{Kind: SnapshotKind, Override: &Override{How: "force-deploy", Version: v("v9", release.VersionReady).Version, Reason: "hotfix"}}
	ch, err := o.Replay()
	require.NoError(t, err)
	require.Equal(t, "v9", ch.Version.ID)
	require.Equal(t, []string{"hotfix"}, ch.Reasons)
	require.Nil(t, o.Verdicts(&ch))
	_, err = (&ChooseSnapshot{Kind: "repo"}).Replay()
	require.ErrorContains(t, err, "kind")
}
