package chain

import (
	"context"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// progression holds the environment-progression facts of one deployment,
// read once and shared by every target that reads them: the system's
// environments with the deployment's targets in each (one read each), and
// per version the newest terminal job of every target (one JobsLatest
// statement per version). A pass's batch keeps one per deployment, so the
// facts cost O(1) statements per batch and version whatever the
// deployment's size, where reading every target's job history cost one
// statement per target for every target (quadratic).
type progression struct {
	loaded    bool
	envs      []release.Environment
	targets   map[string][]release.ReleaseTarget // by environment id
	byVersion map[string][]policy.EnvironmentState
}

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

// environments returns the upstream state for version v of f's
// deployment: each environment of the system with the deployment's targets
// in it, each with its newest terminal job of v (none when it has none).
// The result is never nil.
func (p *progression) environments(ctx context.Context, c *Chain, f *facts, versionID string) ([]policy.EnvironmentState, error) {
	if out, ok := p.byVersion[versionID]; ok {
		return out, nil
	}
	depID := f.Detail.Deployment.ID
	if !p.loaded {
		envs, err := ports.ListAll(ctx, c.Store.Environments(), f.Detail.System.ID)
		if err != nil {
			return nil, err
		}
		targets, err := c.Store.TargetList(ctx, ports.TargetListParams{Scope: ports.TargetScope{DeploymentID: depID}})
		if err != nil {
			return nil, err
		}
		p.targets = map[string][]release.ReleaseTarget{}
		for _, t := range targets {
			p.targets[t.EnvironmentID] = append(p.targets[t.EnvironmentID], t)
		}
		for _, e := range envs {
			p.envs = append(p.envs, e.Value)
		}
		p.loaded = true
	}
	jobs, err := c.Store.JobsLatest(ctx, ports.JobsLatestParams{DeploymentID: depID, VersionID: versionID, Statuses: ports.TerminalJobStatuses()})
	if err != nil {
		return nil, err
	}
	newest := make(map[string]*ports.JobRow, len(jobs))
	for i := range jobs {
		newest[jobs[i].TargetKey] = &jobs[i]
	}
	out := make([]policy.EnvironmentState, 0, len(p.envs))
	for _, e := range p.envs {
		es := policy.EnvironmentState{Environment: e}
		for _, t := range p.targets[e.ID] {
			ts := policy.TargetState{Target: t}
			if j := newest[t.Key()]; j != nil {
				ts.Jobs = []policy.JobRecord{j.Record()}
			}
			es.Targets = append(es.Targets, ts)
		}
		out = append(out, es)
	}
	if p.byVersion == nil {
		p.byVersion = map[string][]policy.EnvironmentState{}
	}
	p.byVersion[versionID] = out
	return out, nil
}

// readsProgression reports whether an environment-progression rule applies
// to f's target: only then are progression facts read for it. A policy
// whose selector fails to evaluate denies the target anyway.
func (f *facts) readsProgression() bool {
	rules, _ := policy.MatchingRules(f.policies, f.base, policy.TypeEnvironmentProgression)
	return len(rules) > 0
}
