package policy

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestMatchMemoKeepsTheMatches: over any inputs in which one id names one
// object (as in a batch read together), the policies an input matches are
// the same with a shared MatchMemo as without, whatever each selector reads
// (deployment, environment, resource, version, several or none) and in
// whatever order the inputs come; with a memo of many inputs, a selector
// that reads the resource still tells the resources apart.
func TestMatchMemoKeepsTheMatches(t *testing.T) {
	t.Parallel()
	selectors := []string{
		``, `true`, `environment.name == "prod"`, `resource.kind == "cluster"`,
		`deployment.name == "api" && environment.name != "dev"`, `version.tag.startsWith("v2")`,
		`resource.metadata.region == "eu" || version.tag == "v1"`, `resource.nosuch == "x"`,
	}
	deployments := map[string]release.Deployment{"api": {ID: "api", Name: "api"}, "web": {ID: "web", Name: "web"}}
	environments := map[string]release.Environment{"dev": {ID: "dev", Name: "dev"}, "prod": {ID: "prod", Name: "prod"}}
	resources := map[string]release.Resource{
		"a": {ID: "a", WorkspaceID: "ws", Kind: "cluster", Metadata: map[string]string{"region": "eu"}},
		"b": {ID: "b", WorkspaceID: "ws", Kind: "vm", Metadata: map[string]string{"region": "us"}},
		"c": {ID: "c", WorkspaceID: "ws", Kind: "cluster"},
	}
	versions := map[string]release.DeploymentVersion{"1": {ID: "1", Tag: "v1"}, "2": {ID: "2", Tag: "v2.0"}}
	rapid.Check(t, func(rt *rapid.T) {
		var policies []Policy
		for i, sel := range rapid.SliceOfN(rapid.SampledFrom(selectors), 1, 4).Draw(rt, "selectors") {
			policies = append(policies, Policy{ID: string(rune('p' + i)), WorkspaceID: "ws", Selector: sel, Enabled: true})
		}
		memo := NewMatchMemo()
		for range rapid.IntRange(1, 12).Draw(rt, "inputs") {
			in := Input{
				Deployment:  deployments[rapid.SampledFrom([]string{"api", "web"}).Draw(rt, "deployment")],
				Environment: environments[rapid.SampledFrom([]string{"dev", "prod"}).Draw(rt, "environment")],
				Resource:    resources[rapid.SampledFrom([]string{"a", "b", "c"}).Draw(rt, "resource")],
				Version:     versions[rapid.SampledFrom([]string{"1", "2"}).Draw(rt, "version")],
			}
			want := Matching(policies, in)
			in.Matches = memo
			require.Equal(rt, want, Matching(policies, in), "%s/%s/%s/%s", in.Deployment.ID, in.Environment.ID, in.Resource.ID, in.Version.ID)
			_, wantErr := MatchingRules(policies, Input{Deployment: in.Deployment, Environment: in.Environment, Resource: in.Resource, Version: in.Version}, TypeGradualRollout)
			_, err := MatchingRules(policies, in, TypeGradualRollout)
			require.Equal(rt, wantErr, err)
		}
	})
}
