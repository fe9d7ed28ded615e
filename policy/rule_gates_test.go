package policy

import (
	"testing"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/stretchr/testify/require"
)

func TestVersionCooldown(t *testing.T) {
	t.Parallel()
	rule := VersionCooldown{IntervalSeconds: 3600}
	tests := []struct {
		name   string
		mutate func(*Input)
		want   Status
		until  time.Time
	}{
		{"no reference version", nil, Allowed, time.Time{}},
		{"the candidate is the reference", func(in *Input) { in.SuccessfulVersion = version("v2", at(-time.Minute)) }, Allowed, time.Time{}},
		{"latest successful version is the reference", func(in *Input) {
			in.SuccessfulVersion = version("v1", at(-10*time.Minute))
		}, Pending, at(50 * time.Minute)},
		{"the active job's version wins over the successful one", func(in *Input) {
			in.SuccessfulVersion = version("v0", at(-10*time.Hour))
			in.ActiveVersion = version("v1", at(-30*time.Minute))
		}, Pending, at(30 * time.Minute)},
		{"cooldown elapsed", func(in *Input) { in.SuccessfulVersion = version("v1", at(-time.Hour)) }, Allowed, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := setup(t)
			if tt.mutate != nil {
				tt.mutate(&in)
			}
			v := rule.Evaluate(&in)
			require.Equal(t, tt.want, v.Status, v.Message)
			require.Equal(t, tt.until, v.Until)
		})
	}
}

func TestVersionSelector(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		selector string
		want     Status
	}{
		{"true allows", `version.tag.startsWith("2.")`, Allowed},
		{"false denies", `version.tag.startsWith("3.")`, Denied},
		{"sees the target", `environment.name == "prod" && resource.kind == "cluster" && deployment.slug == "api"`, Allowed},
		{"sees the creation time", `version.created_at > timestamp("2026-01-01T00:00:00Z")`, Allowed},
		{"evaluation error denies", `version.metadata.missing == "x"`, Denied},
		{"non-boolean denies", `version.tag`, Denied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := setup(t)
			v := VersionSelector{Selector: tt.selector}.Evaluate(&in)
			require.Equal(t, tt.want, v.Status, v.Message)
		})
	}
}

func TestDeploymentDependency(t *testing.T) {
	t.Parallel()
	db := release.Deployment{ID: "db", SystemID: "sys", Name: "db", Slug: "db"}
	cache := release.Deployment{ID: "cache", SystemID: "sys", Name: "cache", Slug: "cache"}
	rule := DeploymentDependency{DependsOn: DependsOn{DeploymentSelector: `deployment.slug == "db"`, VersionSelector: `version.tag.startsWith("5.")`}}
	tests := []struct {
		name string
		rule DeploymentDependency
		deps []DependencyState
		want Status
	}{
		{"matching deployment runs a matching version", rule, []DependencyState{{Deployment: cache, Version: version("c1", t0)}, {Deployment: db, Version: &release.DeploymentVersion{ID: "d5", Tag: "5.1"}}}, Allowed},
		{"matching deployment runs another version", rule, []DependencyState{{Deployment: db, Version: &release.DeploymentVersion{ID: "d4", Tag: "4.9"}}}, Pending},
		{"matching deployment has no successful job", rule, []DependencyState{{Deployment: db}}, Pending},
		{"no deployment matches", rule, []DependencyState{{Deployment: cache, Version: &release.DeploymentVersion{ID: "c5", Tag: "5.0"}}}, Pending},
		{"no dependencies at all", rule, nil, Pending},
		{"empty version selector accepts any version", DeploymentDependency{DependsOn: DependsOn{DeploymentSelector: `deployment.slug == "db"`}},
			[]DependencyState{{Deployment: db, Version: &release.DeploymentVersion{ID: "d1", Tag: "1.0"}}}, Allowed},
		{"the deployment itself is not a dependency", DeploymentDependency{DependsOn: DependsOn{DeploymentSelector: "true"}},
			[]DependencyState{{Deployment: release.Deployment{ID: "api"}, Version: version("v1", t0)}}, Pending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := setup(t)
			in.Dependencies = tt.deps
			v := tt.rule.Evaluate(&in)
			require.Equal(t, tt.want, v.Status, v.Message)
			if v.Status == Pending {
				require.True(t, v.Until.IsZero(), "only the dependency's job can change this")
			}
		})
	}
}
