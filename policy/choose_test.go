package policy

import (
	"errors"
	"fmt"
	"iter"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// stream yields cs in order, counting how many were read.
func stream(cs []Candidate, read *int) iter.Seq2[Candidate, error] {
	return func(yield func(Candidate, error) bool) {
		for _, c := range cs {
			*read++
			if !yield(c, nil) {
				return
			}
		}
	}
}

func cand(id string, s release.VersionStatus, approvers ...string) Candidate {
	c := Candidate{Version: release.DeploymentVersion{ID: id, DeploymentID: "api", Tag: id, Status: s, CreatedAt: t0}}
	for _, u := range approvers {
		c.Approvals = append(c.Approvals, release.Approval{VersionID: id, EnvironmentID: "prod", User: u, ApprovedAt: t0})
	}
	return c
}

func TestChoose(t *testing.T) {
	t.Parallel()
	approve := pol("gate", 0, Rule{ID: "approve", Spec: AnyApproval{MinApprovals: 1}})
	window := pol("cool", 0, Rule{ID: "cool", Spec: VersionCooldown{IntervalSeconds: 3600}})
	tests := []struct {
		name     string
		policies []Policy
		base     func(*Input)
		exclude  map[string]string
		cs       []Candidate
		want     string // chosen version id, "" for none
		read     int    // candidates read from the stream
		reasons  []string
		next     time.Time
	}{
		{name: "no policies: the newest ready version", cs: []Candidate{cand("v3", release.VersionReady), cand("v2", release.VersionReady)},
			want: "v3", read: 1},
		{name: "not ready versions are passed over", cs: []Candidate{cand("v4", release.VersionBuilding), cand("v3", release.VersionPaused),
			cand("v2", release.VersionReady)}, want: "v2", read: 3,
			reasons: []string{"v4: version is building", "v3: version is paused"}},
		{name: "a blocked newest version is skipped for the newest passing one", policies: []Policy{approve},
			cs:   []Candidate{cand("v3", release.VersionReady), cand("v2", release.VersionReady, "alice"), cand("v1", release.VersionReady, "bob")},
			want: "v2", read: 2, reasons: []string{"v3: approve pending: 0 of 1 required approvals for environment prod"}},
		{name: "none passes: no version, every reason", policies: []Policy{approve},
			cs:   []Candidate{cand("v2", release.VersionReady), cand("v1", release.VersionReady)},
			read: 2, reasons: []string{"v2: approve pending: 0 of 1 required approvals for environment prod", "v1: approve pending: 0 of 1 required approvals for environment prod"}},
		{name: "a paused version stays where it already runs", base: func(in *Input) {
			in.SuccessfulVersion = &release.DeploymentVersion{ID: "v3", DeploymentID: "api", Tag: "v3", Status: release.VersionPaused, CreatedAt: t0}
		}, cs: []Candidate{cand("v4", release.VersionPaused), cand("v3", release.VersionPaused), cand("v2", release.VersionReady)},
			want: "v3", read: 2, reasons: []string{"v4: version is paused"}},
		{name: "a paused version stays where its job is active", base: func(in *Input) {
			in.Jobs = []JobRecord{job("j", "v3", release.JobInProgress, t0)}
		}, cs: []Candidate{cand("v3", release.VersionPaused), cand("v2", release.VersionReady)}, want: "v3", read: 1},
		{name: "a paused version where it runs still answers to the policies", policies: []Policy{approve}, base: func(in *Input) {
			in.SuccessfulVersion = &release.DeploymentVersion{ID: "v3", DeploymentID: "api", Tag: "v3", Status: release.VersionPaused, CreatedAt: t0}
		}, cs: []Candidate{cand("v3", release.VersionPaused), cand("v2", release.VersionReady, "alice")}, want: "v2", read: 2,
			reasons: []string{"v3: approve pending: 0 of 1 required approvals for environment prod"}},
		{name: "a rejected version leaves even where it runs", base: func(in *Input) {
			in.SuccessfulVersion = &release.DeploymentVersion{ID: "v3", DeploymentID: "api", Tag: "v3", Status: release.VersionRejected, CreatedAt: t0}
		}, cs: []Candidate{cand("v3", release.VersionRejected), cand("v2", release.VersionReady)}, want: "v2", read: 2,
			reasons: []string{"v3: version is rejected"}},
		{name: "excluded versions are passed over with their reason", exclude: map[string]string{"v2": "rolled back"},
			cs: []Candidate{cand("v2", release.VersionReady), cand("v1", release.VersionReady)}, want: "v1", read: 2,
			reasons: []string{"v2: rolled back"}},
		{name: "a pending version's Until is the next check", policies: []Policy{window},
			base: func(in *Input) {
				in.SuccessfulVersion = &release.DeploymentVersion{ID: "v0", DeploymentID: "api", Tag: "v0", Status: release.VersionReady, CreatedAt: t0.Add(-30 * time.Minute)}
			},
			cs:   []Candidate{cand("v1", release.VersionReady)},
			read: 1, next: t0.Add(30 * time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := setup(t)
			if tt.base != nil {
				tt.base(&base)
			}
			read := 0
			got, err := Choose(ChooseParams{Policies: tt.policies, Base: base, Exclude: tt.exclude}, stream(tt.cs, &read))
			require.NoError(t, err)
			if tt.want == "" {
				require.Nil(t, got.Version)
			} else {
				require.NotNil(t, got.Version)
				require.Equal(t, tt.want, got.Version.ID)
			}
			require.Equal(t, tt.read, read, "the stream is read only up to the chosen version")
			if tt.reasons != nil {
				require.Equal(t, tt.reasons, got.Reasons)
			}
			require.Equal(t, tt.next, got.NextCheckAt)
		})
	}
}

func TestChooseStreamError(t *testing.T) {
	t.Parallel()
	boom := errors.New("page read failed")
	seq := func(yield func(Candidate, error) bool) {
		if yield(cand("v2", release.VersionBuilding), nil) {
			yield(Candidate{}, boom)
		}
	}
	_, err := Choose(ChooseParams{Base: setup(t)}, seq)
	require.ErrorIs(t, err, boom)
}

func TestChooseReasonsAreCapped(t *testing.T) {
	t.Parallel()
	var cs []Candidate
	for i := range 3 * MaxChoiceReasons {
		cs = append(cs, cand(fmt.Sprint("v", i), release.VersionRejected))
	}
	read := 0
	got, err := Choose(ChooseParams{Base: setup(t)}, stream(cs, &read))
	require.NoError(t, err)
	require.Nil(t, got.Version)
	require.Len(t, got.Reasons, MaxChoiceReasons)
	require.Equal(t, len(cs), read)
}

// TestChooseProperties: over generated version lists (random statuses and
// approvals) and policies, the chosen version is the newest that is ready,
// not excluded and allowed by Evaluate; no version is chosen only when none
// is; the stream is read exactly up to the choice; a denied version is never
// chosen; the same input always gives the same choice.
func TestChooseProperties(t *testing.T) {
	t.Parallel()
	statuses := []release.VersionStatus{release.VersionReady, release.VersionReady, release.VersionReady,
		release.VersionBuilding, release.VersionPaused, release.VersionRejected, release.VersionFailed}
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 12).Draw(rt, "versions")
		var policies []Policy
		if rapid.Bool().Draw(rt, "approval") {
			policies = append(policies, pol("gate", 0, Rule{ID: "approve", Spec: AnyApproval{MinApprovals: rapid.IntRange(0, 2).Draw(rt, "min")}}))
		}
		if rapid.Bool().Draw(rt, "selector") {
			policies = append(policies, pol("sel", 1, Rule{ID: "even", Spec: VersionSelector{Selector: `int(version.tag.substring(1)) % 2 == 0`}}))
		}
		cs := make([]Candidate, n)
		exclude := map[string]string{}
		for i := range cs {
			id := fmt.Sprint("v", n-i) // newest first
			var users []string
			for u := range rapid.IntRange(0, 2).Draw(rt, "approvers") {
				users = append(users, fmt.Sprint("user", u))
			}
			cs[i] = cand(id, rapid.SampledFrom(statuses).Draw(rt, "status"), users...)
			if rapid.IntRange(0, 5).Draw(rt, "exclude") == 0 {
				exclude[id] = "excluded"
			}
		}
		base := Input{Now: t0, Deployment: release.Deployment{ID: "api", SystemID: "sys", Name: "api", Slug: "api"},
			Environment: release.Environment{ID: "prod", SystemID: "sys", Name: "prod"},
			Resource:    release.Resource{ID: "r1", WorkspaceID: "ws", Kind: "cluster", Identifier: "c1", Name: "c1"}}
		p := ChooseParams{Policies: policies, Base: base, Exclude: exclude}

		want := -1
		for i, c := range cs {
			in := base
			in.Version, in.Approvals = c.Version, c.Approvals
			if _, ex := exclude[c.Version.ID]; c.Version.Status == release.VersionReady && !ex && Evaluate(policies, in).Status == Allowed {
				want = i
				break
			}
		}
		read := 0
		got, err := Choose(p, stream(cs, &read))
		require.NoError(rt, err)
		again, err := Choose(p, stream(cs, new(int)))
		require.NoError(rt, err)
		require.Equal(rt, got, again, "same input, same choice")
		if want < 0 {
			require.Nil(rt, got.Version)
			require.Equal(rt, n, read)
			return
		}
		require.NotNil(rt, got.Version)
		require.Equal(rt, cs[want].Version.ID, got.Version.ID)
		require.Equal(rt, want+1, read)
	})
}
