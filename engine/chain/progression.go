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
// deployment's targets there with the newest terminal job of each (one
// TargetList per environment and one JobsLatest statement per environment
// and version). A pass's batch keeps one per deployment, so the facts cost
// O(1) statements per batch, environment and version whatever the
// deployment's size, where reading every target's job history cost one
// statement per target for every target (quadratic). Each state's
// progression counts are shared too (policy.NewEnvironmentState), so the
// targets' evaluations count each environment once.
type progression struct {
	envs    []release.Environment // nil until loaded
	targets map[string][]release.ReleaseTarget
	states  map[envVersion]policy.EnvironmentState
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

// state is upstream environment e's state for the version, read once.
func (p *progression) state(ctx context.Context, c *Chain, depID string, e release.Environment, versionID string) (policy.EnvironmentState, error) {
	key := envVersion{e.ID, versionID}
	if es, ok := p.states[key]; ok {
		return es, nil
	}
	targets, ok := p.targets[e.ID]
	if !ok {
		var err error
		if targets, err = c.Store.TargetList(ctx, ports.TargetListParams{Scope: ports.TargetScope{DeploymentID: depID, EnvironmentID: e.ID}}); err != nil {
			return policy.EnvironmentState{}, err
		}
		if p.targets == nil {
			p.targets = map[string][]release.ReleaseTarget{}
		}
		p.targets[e.ID] = targets
	}
	jobs, err := c.Store.JobsLatest(ctx, ports.JobsLatestParams{DeploymentID: depID, EnvironmentID: e.ID, VersionID: versionID, Statuses: ports.TerminalJobStatuses()})
	if err != nil {
		return policy.EnvironmentState{}, err
	}
	newest := make(map[string]*ports.JobRow, len(jobs))
	for i := range jobs {
		newest[jobs[i].TargetKey] = &jobs[i]
	}
	states := make([]policy.TargetState, 0, len(targets))
	for _, t := range targets {
		ts := policy.TargetState{Target: t}
		if j := newest[t.Key()]; j != nil {
			ts.Jobs = []policy.JobRecord{j.Record()}
		}
		states = append(states, ts)
	}
	es := policy.NewEnvironmentState(e, states)
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
