package main

import (
	"context"
	"fmt"
	"time"

	"github.com/reconcilerhq/reconciler/adapters/testrunner"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// seedReleaseDemo stores the demo workspace of the release chain and pushes
// two versions: dev, staging and prod on three clusters; staging follows
// dev, prod follows staging and needs one approval. v1 is approved for
// prod, v2 is not, so v1 rolls out to every environment while v2 stops
// before prod, and the log says why. Jobs run on the built-in test runner.
func seedReleaseDemo(ctx context.Context, ch *chain.Chain) error {
	s := ch.Store
	step := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("demo %s: %w", what, err)
		}
		return nil
	}
	if _, err := s.WorkspacePut(ctx, release.Workspace{ID: "demo", Name: "Demo"}, 0); err != nil {
		return step("workspace", err)
	}
	if _, err := s.SystemPut(ctx, release.System{ID: "shop", WorkspaceID: "demo", Name: "Shop"}, 0); err != nil {
		return step("system", err)
	}
	for _, env := range []string{"dev", "staging", "prod"} {
		e := release.Environment{ID: env, SystemID: "shop", Name: env, ResourceSelector: `resource.kind == "KubernetesCluster"`}
		if _, err := s.EnvironmentPut(ctx, e, 0); err != nil {
			return step("environment "+env, err)
		}
	}
	for _, c := range []string{"eu-1", "us-1", "ap-1"} {
		r := release.Resource{ID: c, WorkspaceID: "demo", Kind: "KubernetesCluster", Identifier: "k8s/" + c, Name: c,
			Metadata: map[string]string{"region": c}}
		if _, err := s.ResourcePut(ctx, r, 0); err != nil {
			return step("resource "+c, err)
		}
	}
	agent := release.JobAgent{ID: "runner", Name: "Test runner", Type: testrunner.Type, Config: map[string]any{"delay": "3s"}}
	if _, err := s.JobAgentPut(ctx, agent, 0); err != nil {
		return step("job agent", err)
	}
	dep := release.Deployment{ID: "web", SystemID: "shop", Name: "Web", Slug: "web", JobAgentID: "runner",
		ResourceSelector: `resource.kind == "KubernetesCluster"`,
		Variables: []release.DeploymentVariable{{Key: "replicas", Default: &release.Value{Literal: 2.0},
			Values: []release.VariableValue{{Selector: `environment.name == "prod"`, Priority: 1, Value: release.Value{Literal: 5.0}}}}}}
	if _, err := s.DeploymentPut(ctx, dep, 0); err != nil {
		return step("deployment", err)
	}
	policies := []policy.Policy{
		{ID: "staging-after-dev", Name: "Staging after dev", Selector: `environment.name == "staging"`, Enabled: true, Rules: []policy.Rule{
			{ID: "after-dev", Spec: policy.EnvironmentProgression{DependsOnEnvironmentSelector: `environment.name == "dev"`, MinimumSuccessPercentage: 100}}}},
		{ID: "prod-gate", Name: "Prod gate", Selector: `environment.name == "prod"`, Enabled: true, Rules: []policy.Rule{
			{ID: "after-staging", Spec: policy.EnvironmentProgression{DependsOnEnvironmentSelector: `environment.name == "staging"`, MinimumSuccessPercentage: 100}},
			{ID: "approval", Spec: policy.AnyApproval{MinApprovals: 1}}}},
	}
	for _, p := range policies {
		if _, err := s.PolicyPut(ctx, p, 0); err != nil {
			return step("policy "+p.ID, err)
		}
	}
	if _, err := ch.SyncTargets(ctx, "shop"); err != nil {
		return step("targets", err)
	}
	if err := ch.CreateVersion(ctx, release.DeploymentVersion{ID: "web-v1", DeploymentID: "web", Tag: "v1"}); err != nil {
		return step("version v1", err)
	}
	if _, err := ch.Approve(ctx, release.Approval{VersionID: "web-v1", EnvironmentID: "prod", User: "demo-approver"}); err != nil {
		return step("approval", err)
	}
	// v2 comes once v1 had time to reach prod; it stops before prod.
	go func() {
		select {
		case <-ctx.Done():
		case <-time.After(demoV2After):
			if err := ch.CreateVersion(ctx, release.DeploymentVersion{ID: "web-v2", DeploymentID: "web", Tag: "v2"}); err != nil && ctx.Err() == nil {
				ch.Logger.Error("demo version v2", "error", err)
			}
		}
	}()
	return nil
}

// demoV2After is when the demo pushes its second version.
const demoV2After = 15 * time.Second
