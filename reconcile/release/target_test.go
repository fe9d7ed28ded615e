package release

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

type catalog struct {
	systems      []System
	deployments  []Deployment
	environments []Environment
	resources    []Resource
}

func setup(t *testing.T) catalog {
	t.Helper()
	return catalog{
		systems: []System{
			{ID: "sys", WorkspaceID: "ws", Name: "payments"},
			{ID: "other", WorkspaceID: "ws", Name: "other"},
		},
		deployments: []Deployment{
			{ID: "api", SystemID: "sys", Name: "api", Slug: "api", ResourceSelector: `resource.kind == "cluster"`},
			{ID: "worker", SystemID: "sys", Name: "worker", Slug: "worker", ResourceSelector: `resource.metadata.team == "pay"`},
			{ID: "none", SystemID: "sys", Name: "none", Slug: "none"},
			{ID: "elsewhere", SystemID: "other", Name: "x", Slug: "x", ResourceSelector: "true"},
		},
		environments: []Environment{
			{ID: "staging", SystemID: "sys", Name: "staging", ResourceSelector: `resource.metadata.env == "staging"`},
			{ID: "prod", SystemID: "sys", Name: "prod", ResourceSelector: `resource.metadata.env == "prod"`},
		},
		resources: []Resource{
			{ID: "r1", WorkspaceID: "ws", Kind: "cluster", Identifier: "c1", Name: "c1", Metadata: map[string]string{"env": "staging", "team": "pay"}},
			{ID: "r2", WorkspaceID: "ws", Kind: "cluster", Identifier: "c2", Name: "c2", Metadata: map[string]string{"env": "prod"}},
			{ID: "r3", WorkspaceID: "ws", Kind: "vm", Identifier: "v3", Name: "v3", Metadata: map[string]string{"env": "prod", "team": "pay"}},
			{ID: "r4", WorkspaceID: "other-ws", Kind: "cluster", Identifier: "c4", Name: "c4", Metadata: map[string]string{"env": "prod"}},
		},
	}
}

func TestComputeTargets(t *testing.T) {
	t.Parallel()
	c := setup(t)
	got, err := ComputeTargets(c.systems, c.deployments, c.environments, c.resources, CEL{})
	// worker's selector fails on r2 (no "team" key): it does not match r2 and is reported.
	var se *SelectorError
	require.ErrorAs(t, err, &se)
	require.Len(t, se.Failures, 1)
	require.Contains(t, se.Failures[0], "deployment worker")
	require.Equal(t, []ReleaseTarget{
		{"api", "prod", "r2"},    // cluster in prod
		{"api", "staging", "r1"}, // cluster in staging
		{"worker", "prod", "r3"}, // team pay in prod
		{"worker", "staging", "r1"},
	}, got, "sorted by key; r4 is in another workspace; 'none' has an empty selector; 'elsewhere' has no environments")
}

func TestComputeTargetsRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(*catalog)
		want   []ReleaseTarget
	}{
		{"empty deployment selector matches nothing", func(c *catalog) {
			c.deployments = []Deployment{{ID: "d", SystemID: "sys", Name: "d", Slug: "d"}}
		}, nil},
		{"empty environment selector matches nothing", func(c *catalog) {
			c.environments = []Environment{{ID: "e", SystemID: "sys", Name: "e"}}
		}, nil},
		{"deployment and environment must share a system", func(c *catalog) {
			c.deployments = []Deployment{{ID: "d", SystemID: "other", Name: "d", Slug: "d", ResourceSelector: "true"}}
		}, nil},
		{"resource must match both selectors", func(c *catalog) {
			c.deployments = []Deployment{{ID: "d", SystemID: "sys", Name: "d", Slug: "d", ResourceSelector: `resource.kind == "vm"`}}
		}, []ReleaseTarget{{"d", "prod", "r3"}}},
		{"resource must be in the system's workspace", func(c *catalog) {
			c.deployments = []Deployment{{ID: "d", SystemID: "sys", Name: "d", Slug: "d", ResourceSelector: `resource.id == "r4"`}}
		}, nil},
		{"unknown system is ignored", func(c *catalog) {
			c.systems = nil
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := setup(t)
			tt.mutate(&c)
			got, err := ComputeTargets(c.systems, c.deployments, c.environments, c.resources, CEL{})
			var se *SelectorError
			if err != nil {
				require.ErrorAs(t, err, &se)
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestComputeTargetsNilSelector(t *testing.T) {
	t.Parallel()
	c := setup(t)
	_, err := ComputeTargets(c.systems, c.deployments, c.environments, c.resources, nil)
	require.Error(t, err)
}

func TestTargetKeyRoundTrip(t *testing.T) {
	t.Parallel()
	tgt := ReleaseTarget{DeploymentID: "d-1", EnvironmentID: "e.2", ResourceID: "r_3"}
	got, err := ParseTargetKey(tgt.Key())
	require.NoError(t, err)
	require.Equal(t, tgt, got)
	for _, bad := range []string{"", "a:b", "a::c", "a:b:c:d"} {
		_, err := ParseTargetKey(bad)
		require.Error(t, err, bad)
	}
}

// TestComputeTargetsProperty checks ComputeTargets against the definition,
// enumerated by brute force over generated catalogs.
func TestComputeTargetsProperty(t *testing.T) {
	t.Parallel()
	kinds := []string{"a", "b", "c"}
	selectors := []string{"", "true", "false", `resource.kind == "a"`, `resource.kind != "b"`, `resource.metadata.x == "1"`}
	rapid.Check(t, func(t *rapid.T) {
		var c catalog
		nSys := rapid.IntRange(1, 3).Draw(t, "systems")
		for i := range nSys {
			c.systems = append(c.systems, System{ID: fmt.Sprint("s", i), WorkspaceID: fmt.Sprint("w", i%2), Name: "s"})
		}
		for i := range rapid.IntRange(0, 4).Draw(t, "deployments") {
			c.deployments = append(c.deployments, Deployment{ID: fmt.Sprint("d", i), SystemID: fmt.Sprint("s", rapid.IntRange(0, 3).Draw(t, "ds")),
				ResourceSelector: rapid.SampledFrom(selectors).Draw(t, "dsel")})
		}
		for i := range rapid.IntRange(0, 4).Draw(t, "environments") {
			c.environments = append(c.environments, Environment{ID: fmt.Sprint("e", i), SystemID: fmt.Sprint("s", rapid.IntRange(0, 3).Draw(t, "es")),
				ResourceSelector: rapid.SampledFrom(selectors).Draw(t, "esel")})
		}
		for i := range rapid.IntRange(0, 6).Draw(t, "resources") {
			r := Resource{ID: fmt.Sprint("r", i), WorkspaceID: fmt.Sprint("w", rapid.IntRange(0, 1).Draw(t, "rw")), Kind: rapid.SampledFrom(kinds).Draw(t, "kind")}
			if rapid.Bool().Draw(t, "hasX") {
				r.Metadata = map[string]string{"x": rapid.SampledFrom([]string{"1", "2"}).Draw(t, "x")}
			}
			c.resources = append(c.resources, r)
		}
		got, err := ComputeTargets(c.systems, c.deployments, c.environments, c.resources, CEL{})
		if err != nil {
			var se *SelectorError
			require.True(t, errors.As(err, &se))
		}
		matches := func(sel string, r *Resource) bool {
			ok, err := CEL{}.Match(sel, &Subject{Resource: r})
			return err == nil && ok
		}
		want := map[ReleaseTarget]bool{}
		for _, s := range c.systems {
			for _, d := range c.deployments {
				for _, e := range c.environments {
					for i := range c.resources {
						r := &c.resources[i]
						if d.SystemID == s.ID && e.SystemID == s.ID && r.WorkspaceID == s.WorkspaceID &&
							matches(d.ResourceSelector, r) && matches(e.ResourceSelector, r) {
							want[ReleaseTarget{d.ID, e.ID, r.ID}] = true
						}
					}
				}
			}
		}
		require.Len(t, got, len(want))
		for i, tg := range got {
			require.True(t, want[tg], "unexpected target %s", tg)
			if i > 0 {
				require.Less(t, got[i-1].Key(), tg.Key(), "sorted and unique")
			}
		}
	})
}

func BenchmarkComputeTargets(b *testing.B) {
	var c catalog
	c.systems = []System{{ID: "s", WorkspaceID: "w"}}
	for i := range 10 {
		c.deployments = append(c.deployments, Deployment{ID: fmt.Sprint("d", i), SystemID: "s", ResourceSelector: fmt.Sprintf(`resource.metadata.team == "t%d" || resource.kind == "shared"`, i%3)})
	}
	for i := range 3 {
		c.environments = append(c.environments, Environment{ID: fmt.Sprint("e", i), SystemID: "s", ResourceSelector: fmt.Sprintf(`resource.metadata.env == "e%d"`, i)})
	}
	for i := range 300 {
		c.resources = append(c.resources, Resource{ID: fmt.Sprint("r", i), WorkspaceID: "w", Kind: "k8s",
			Metadata: map[string]string{"team": fmt.Sprint("t", i%3), "env": fmt.Sprint("e", i%3)}})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ComputeTargets(c.systems, c.deployments, c.environments, c.resources, CEL{}); err != nil {
			b.Fatal(err)
		}
	}
}
