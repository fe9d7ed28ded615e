package policy_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestDownstream: a job ending in an environment wakes only the
// environments whose progression rules may read it; what a selector cannot
// decide without the resource or version counts as may.
func TestDownstream(t *testing.T) {
	dep := release.Deployment{ID: "api", SystemID: "sys", Name: "api"}
	env := func(name string) release.Environment {
		return release.Environment{ID: name, SystemID: "sys", Name: name}
	}
	envs := []release.Environment{env("dev"), env("staging"), env("prod"), {ID: "other", SystemID: "sys2", Name: "other"}}
	after := func(selector, upstream string) policy.Policy {
		return policy.Policy{ID: selector + upstream, Enabled: true, Selector: selector, Rules: []policy.Rule{
			{Spec: policy.EnvironmentProgression{DependsOnEnvironmentSelector: `environment.name == "` + upstream + `"`}}}}
	}
	chain := []policy.Policy{after(`environment.name == "staging"`, "dev"), after(`environment.name == "prod"`, "staging")}
	disabled := after(`environment.name == "prod"`, "dev")
	disabled.Enabled = false
	tests := []struct {
		name     string
		policies []policy.Policy
		upstream string
		want     []string
	}{
		{name: "no policies", upstream: "dev"},
		{name: "dev wakes staging only", policies: chain, upstream: "dev", want: []string{"staging"}},
		{name: "staging wakes prod only", policies: chain, upstream: "staging", want: []string{"prod"}},
		{name: "prod wakes nothing", policies: chain, upstream: "prod"},
		{name: "a disabled policy wakes nothing", policies: []policy.Policy{disabled}, upstream: "dev"},
		{name: "an empty policy selector: every other environment of the system", policies: []policy.Policy{after("", "dev")}, upstream: "dev", want: []string{"staging", "prod"}},
		{name: "a selector needing the resource may match", policies: []policy.Policy{after(`environment.name == "prod" && resource.kind == "cluster"`, "dev")},
			upstream: "dev", want: []string{"prod"}},
		{name: "a selector false whatever the resource does not", policies: []policy.Policy{after(`environment.name == "prod" && resource.kind == "cluster"`, "dev")},
			upstream: "staging"},
		{name: "an upstream selector needing the version may match", policies: []policy.Policy{{ID: "v", Enabled: true, Rules: []policy.Rule{
			{Spec: policy.EnvironmentProgression{DependsOnEnvironmentSelector: `version.tag == "v1"`}}}}}, upstream: "dev", want: []string{"staging", "prod"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, policy.Downstream(tc.policies, dep, env(tc.upstream), envs))
		})
	}
}

// TestUpstream: a target reads the environments its own progression rules
// select, and no other.
func TestUpstream(t *testing.T) {
	dep := release.Deployment{ID: "api", SystemID: "sys", Name: "api"}
	env := func(name string) release.Environment {
		return release.Environment{ID: name, SystemID: "sys", Name: name}
	}
	envs := []release.Environment{env("dev"), env("staging"), env("prod"), {ID: "other", SystemID: "sys2", Name: "dev"}}
	after := func(selector, upstream string) policy.Policy {
		return policy.Policy{ID: selector + upstream, Enabled: true, Selector: selector, Rules: []policy.Rule{
			{Spec: policy.EnvironmentProgression{DependsOnEnvironmentSelector: upstream}}}}
	}
	chain := []policy.Policy{after(`environment.name == "staging"`, `environment.name == "dev"`), after(`environment.name == "prod"`, `environment.name == "staging"`)}
	tests := []struct {
		name     string
		policies []policy.Policy
		target   string
		want     []string
	}{
		{name: "no policies", target: "prod"},
		{name: "staging reads dev", policies: chain, target: "staging", want: []string{"dev"}},
		{name: "prod reads staging", policies: chain, target: "prod", want: []string{"staging"}},
		{name: "dev reads nothing", policies: chain, target: "dev"},
		{name: "never its own environment", policies: []policy.Policy{after("", "true")}, target: "prod", want: []string{"dev", "staging"}},
		{name: "a failing selector reads nothing", policies: []policy.Policy{after("", `environment.metadata.missing == "x"`)}, target: "prod"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := policy.Input{Deployment: dep, Environment: env(tc.target)}
			require.Equal(t, tc.want, policy.Upstream(tc.policies, in, envs))
		})
	}
}
