package chain

import (
	"context"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// progression holds the environment-progression facts of one deployment,
// read once and shared by every target that reads them: the system's
// environments (one read), and per upstream environment and version the
// store's progression summary (policy.ProgressionSummary: the count of the
// deployment's targets there and of their newest terminal jobs of the
// version per status and verification, kept by each job's own write; one
// statement). A pass's batch keeps one per deployment, so the facts cost
// O(1) statements and O(1) rows per batch, environment and version
// whatever the deployment's size, where reading the targets and their
// newest jobs cost O(targets) per batch (N²/B over a rollout).
type progression struct {
	envs   []release.Environment // nil until loaded
	states map[envVersion]policy.EnvironmentState
}

// envVersion keys an upstream environment's state for a version.
type envVersion struct{ env, version string }

// progressionOf is the progression facts of deploymentID: the batch's when
// in a batch pass, else a fresh one (one target's read, e.g. explain).
func progressionOf(ctx context.Context, deploymentID string) *progression {
	b := batchOf(ctx)
	if b == nil {
		return &progression{}
	}
	if b.progression == nil {
		b.progression = map[string]*progression{}
	}
	p := b.progression[deploymentID]
	if p == nil {
		p = &progression{}
		b.progression[deploymentID] = p
	}
	return p
}

// environments returns the system's environments for version versionID
// as f's target's progression rules read them: the upstream ones
// (policy.Upstream) with the deployment's targets there, each with its
// newest terminal job of the version; the others, which no rule of the
// target reads, without targets. The result is never nil.
func (p *progression) environments(ctx context.Context, c *Chain, f *facts, versionID string) ([]policy.EnvironmentState, error) {
	depID := f.Detail.Deployment.ID
	if p.envs == nil {
		envs, err := ports.ListAll(ctx, c.Store.Environments(), f.Detail.System.ID)
		if err != nil {
			return nil, err
		}
		p.envs = make([]release.Environment, 0, len(envs))
		for _, e := range envs {
			p.envs = append(p.envs, e.Value)
		}
	}
	upstream := map[string]bool{}
	for _, id := range policy.Upstream(f.policies, f.base, p.envs) {
		upstream[id] = true
	}
	out := make([]policy.EnvironmentState, 0, len(p.envs))
	for _, e := range p.envs {
		if !upstream[e.ID] {
			out = append(out, policy.EnvironmentState{Environment: e})
			continue
		}
		es, err := p.state(ctx, c, depID, e, versionID)
		if err != nil {
			return nil, err
		}
		out = append(out, es)
	}
	return out, nil
}

// state is upstream environment e's state for the version, read once: the
// store's progression summary (one statement, whatever the environment's
// size), which the rule judges the same as the targets it counts.
func (p *progression) state(ctx context.Context, c *Chain, depID string, e release.Environment, versionID string) (policy.EnvironmentState, error) {
	key := envVersion{e.ID, versionID}
	if es, ok := p.states[key]; ok {
		return es, nil
	}
	sum, err := c.Store.ProgressionSummary(ctx, ports.ProgressionSummaryParams{DeploymentID: depID, EnvironmentID: e.ID, VersionID: versionID})
	if err != nil {
		return policy.EnvironmentState{}, err
	}
	es := policy.EnvironmentState{Environment: e, Progression: &sum}
	if p.states == nil {
		p.states = map[envVersion]policy.EnvironmentState{}
	}
	p.states[key] = es
	return es, nil
}

// readsProgression reports whether an environment-progression rule applies
// to f's target: only then are progression facts read for it. A policy
// whose selector fails to evaluate denies the target anyway.
func (f *facts) readsProgression() bool {
	rules, _ := policy.MatchingRules(f.policies, f.base, policy.TypeEnvironmentProgression)
	return len(rules) > 0
}
