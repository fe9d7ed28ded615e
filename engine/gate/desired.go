package gate

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/reconcilerhq/reconciler/policy/plan"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Decider decides release targets' desired releases over the store as ctx
// reads it, as the release chain does, writing nothing; a target that is
// not stored is left out (chain.Chain.DecideMany).
type Decider func(ctx context.Context, ts []release.ReleaseTarget) (map[release.ReleaseTarget]plan.Desired, error)

// worldFacts are the facts of a plan with the variable sets, which change
// releases but not targets or gates.
type worldFacts struct {
	plan.Facts
	variableSets []release.VariableSet
}

// readWorld reads the facts and the variable sets.
func readWorld(ctx context.Context, s ports.ReleaseStore) (worldFacts, error) {
	f, err := Read(ctx, s)
	if err != nil {
		return worldFacts{}, err
	}
	vs, err := values(ports.ListAll(ctx, s.VariableSets(), ""))
	if err != nil {
		return worldFacts{}, fmt.Errorf("read facts: variable sets: %w", err)
	}
	return worldFacts{Facts: f, variableSets: vs}, nil
}

// syncTargets makes the stored targets those of after (the write's
// transaction only: a dry run rolls it back), as the chain's SyncTargets
// computes them (release.ComputeTargets), system by system; a system gone
// keeps no target.
func syncTargets(ctx context.Context, s ports.ReleaseStore, before, after *plan.Facts) (map[string]release.ReleaseTarget, error) {
	targets, err := release.ComputeTargets(after.Systems, after.Deployments, after.Environments, after.Resources, release.CEL{})
	var se *release.SelectorError
	if err != nil && !errors.As(err, &se) {
		return nil, err
	}
	systemOf := map[string]string{}
	for i := range after.Deployments {
		systemOf[after.Deployments[i].ID] = after.Deployments[i].SystemID
	}
	bySystem := map[string][]release.ReleaseTarget{}
	keys := make(map[string]release.ReleaseTarget, len(targets))
	for _, t := range targets {
		bySystem[systemOf[t.DeploymentID]] = append(bySystem[systemOf[t.DeploymentID]], t)
		keys[t.Key()] = t
	}
	systems := map[string]bool{}
	for _, f := range []*plan.Facts{before, after} {
		for i := range f.Systems {
			systems[f.Systems[i].ID] = true
		}
	}
	for id := range systems {
		if _, err := s.TargetsReplace(ctx, ports.TargetsReplaceParams{Scope: ports.TargetScope{SystemID: id}, Targets: bySystem[id]}); err != nil {
			return nil, fmt.Errorf("sync targets of system %s: %w", id, err)
		}
	}
	return keys, nil
}

// affected are the keys of the targets (of after) whose decision the
// change may move: those of a system whose system, deployment, environment
// or variable set changed (an environment's name or a set's value reaches
// every target of the system through progression rules and variables),
// those on a changed resource, and those sharing a deployment and an
// environment with a target created or removed (rollout positions), besides
// the targets d lists.
func affected(before, after *worldFacts, targets map[string]release.ReleaseTarget, d *plan.Diff) map[string]bool {
	systems := map[string]bool{}
	mark := func(changed map[string]bool) {
		for sys := range changed {
			systems[sys] = true
		}
	}
	mark(changedBy(before.Systems, after.Systems, func(x *release.System) (string, string) { return x.ID, x.ID }))
	mark(changedBy(before.Deployments, after.Deployments, func(x *release.Deployment) (string, string) { return x.ID, x.SystemID }))
	mark(changedBy(before.Environments, after.Environments, func(x *release.Environment) (string, string) { return x.ID, x.SystemID }))
	mark(changedBy(before.variableSets, after.variableSets, func(x *release.VariableSet) (string, string) { return x.ID, x.SystemID }))
	resources := changedBy(before.Resources, after.Resources, func(x *release.Resource) (string, string) { return x.ID, x.ID })
	systemOf := map[string]string{}
	for i := range after.Deployments {
		systemOf[after.Deployments[i].ID] = after.Deployments[i].SystemID
	}
	type scope struct{ deployment, environment string }
	moved := map[scope]bool{}
	out := map[string]bool{}
	for _, t := range d.Targets {
		out[t.Key] = true
		if t.Created || t.Removed {
			moved[scope{t.Target.DeploymentID, t.Target.EnvironmentID}] = true
		}
	}
	for k, t := range targets {
		if systems[systemOf[t.DeploymentID]] || resources[t.ResourceID] || moved[scope{t.DeploymentID, t.EnvironmentID}] {
			out[k] = true
		}
	}
	return out
}

// changedBy is the scopes (system ids, or resource ids) of every object
// added, removed or changed between before and after: an object that moves
// counts in both.
func changedBy[T any](before, after []T, key func(*T) (id, scope string)) map[string]bool {
	out := map[string]bool{}
	b := make(map[string]*T, len(before))
	for i := range before {
		id, _ := key(&before[i])
		b[id] = &before[i]
	}
	for i := range after {
		id, sc := key(&after[i])
		old, ok := b[id]
		delete(b, id)
		if !ok || !reflect.DeepEqual(*old, after[i]) {
			out[sc] = true
			if ok {
				_, osc := key(old)
				out[osc] = true
			}
		}
	}
	for _, old := range b {
		_, sc := key(old)
		out[sc] = true
	}
	return out
}

// decideAfter decides, in the write's transaction after the write, every
// affected target's desired release (Decider), its targets recomputed
// first; a removed target's After is nil. It returns the changes by key
// with their targets.
func decideAfter(ctx context.Context, s ports.ReleaseStore, decide Decider, before, after *worldFacts, d *plan.Diff) (map[string]plan.DesiredChange, map[string]release.ReleaseTarget, error) {
	targets, err := syncTargets(ctx, s, &before.Facts, &after.Facts)
	if err != nil {
		return nil, nil, err
	}
	keys := affected(before, after, targets, d)
	all := make(map[string]release.ReleaseTarget, len(keys))
	var present []release.ReleaseTarget
	for k := range keys {
		t, ok := targets[k]
		if !ok {
			if t, err = release.ParseTargetKey(k); err != nil {
				return nil, nil, err
			}
		} else {
			present = append(present, t)
		}
		all[k] = t
	}
	decided, err := decide(ctx, present)
	if err != nil {
		return nil, nil, err
	}
	out := make(map[string]plan.DesiredChange, len(keys))
	for k, t := range all {
		var c plan.DesiredChange
		if a, ok := decided[t]; ok {
			c.After = &a
		}
		out[k] = c
	}
	return out, all, nil
}

// decideBefore fills in each change's Before: the target's desired release
// decided over the store as it is (a target that does not exist yet keeps
// nil), in one transaction rolled back.
func decideBefore(ctx context.Context, tx ports.Transactor, decide Decider, changes map[string]plan.DesiredChange, targets map[string]release.ReleaseTarget) error {
	err := tx.InTx(ctx, func(ctx context.Context) error {
		ts := make([]release.ReleaseTarget, 0, len(changes))
		for k := range changes {
			ts = append(ts, targets[k])
		}
		decided, err := decide(ctx, ts)
		if err != nil {
			return err
		}
		for k, c := range changes {
			if b, ok := decided[targets[k]]; ok {
				c.Before = &b
				changes[k] = c
			}
		}
		return errRollback
	})
	if errors.Is(err, errRollback) {
		return nil
	}
	return err
}
