package live

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// recompute makes the stored targets of scope (one deployment, environment
// or resource; systemID is its system, "" for a resource) what the stored
// objects select now, and enqueues desired-release for every target of
// the scope: the new ones, and the others, which read the changed object.
func (s *Store) recompute(ctx context.Context, scope ports.TargetScope, systemID string) error {
	targets, err := s.computeScope(ctx, scope, systemID)
	if err != nil {
		return fmt.Errorf("recompute targets: %w", err)
	}
	if _, err := s.TargetsReplace(ctx, ports.TargetsReplaceParams{Scope: scope, Targets: targets}); err != nil {
		return fmt.Errorf("recompute targets: %w", err)
	}
	return s.evaluate(ctx, targets)
}

// computeScope computes the targets of scope from the stored objects.
// Selectors that fail to evaluate match nothing (as chain.SyncTargets).
func (s *Store) computeScope(ctx context.Context, scope ports.TargetScope, systemID string) ([]release.ReleaseTarget, error) {
	var systems []ports.Stored[release.System]
	if systemID != "" {
		sys, err := s.ReleaseStore.Systems().Get(ctx, systemID)
		if err != nil {
			return nil, err
		}
		systems = append(systems, sys)
	} else {
		r, err := s.ReleaseStore.Resources().Get(ctx, scope.ResourceID)
		if err != nil {
			return nil, err
		}
		if systems, err = ports.ListAll(ctx, s.ReleaseStore.Systems(), r.Value.WorkspaceID); err != nil {
			return nil, err
		}
	}
	var out []release.ReleaseTarget
	for _, sys := range systems {
		deps, err := ports.ListAll(ctx, s.ReleaseStore.Deployments(), sys.Value.ID)
		if err != nil {
			return nil, err
		}
		envs, err := ports.ListAll(ctx, s.ReleaseStore.Environments(), sys.Value.ID)
		if err != nil {
			return nil, err
		}
		var res []ports.Stored[release.Resource]
		if scope.ResourceID != "" {
			r, err := s.ReleaseStore.Resources().Get(ctx, scope.ResourceID)
			if err != nil {
				return nil, err
			}
			res = append(res, r)
		} else if res, err = ports.ListAll(ctx, s.ReleaseStore.Resources(), sys.Value.WorkspaceID); err != nil {
			return nil, err
		}
		ts, err := release.ComputeTargets([]release.System{sys.Value}, values(deps), values(envs), values(res), release.CEL{})
		var se *release.SelectorError
		if err != nil && !errors.As(err, &se) {
			return nil, err
		}
		for _, t := range ts {
			if scope.Contains(t, sys.Value.ID) {
				out = append(out, t)
			}
		}
	}
	return out, nil
}

// variableSetChanged enqueues the targets of the set's system whose
// resolved variables differ between the system's sets with before and with
// after (nil: absent).
func (s *Store) variableSetChanged(ctx context.Context, before, after *release.VariableSet) error {
	vs := after
	if vs == nil {
		vs = before
	}
	if reflect.DeepEqual(before, after) {
		return nil
	}
	targets, err := s.TargetList(ctx, ports.TargetListParams{Scope: ports.TargetScope{SystemID: vs.SystemID}})
	if err != nil {
		return err
	}
	var affected []release.ReleaseTarget
	for _, t := range targets {
		det, err := s.TargetGet(ctx, t)
		if err != nil {
			return err
		}
		// The stored sets are after the write; put before back in.
		prev := slices.DeleteFunc(slices.Clone(det.VariableSets), func(x release.VariableSet) bool { return x.ID == vs.ID })
		if before != nil {
			prev = append(prev, *before)
			slices.SortFunc(prev, func(a, b release.VariableSet) int { return strings.Compare(a.ID, b.ID) })
		}
		sub := release.Subject{Deployment: &det.Deployment, Environment: &det.Environment, Resource: &det.Resource}
		old, _, errOld := release.ResolveVariables(&sub, prev, release.CEL{})
		now, _, errNow := release.ResolveVariables(&sub, det.VariableSets, release.CEL{})
		if errOld != nil || errNow != nil || !reflect.DeepEqual(old, now) {
			affected = append(affected, t)
		}
	}
	return s.evaluate(ctx, affected)
}

// relatedChanged enqueues, when the workspace has relationship rules, every
// target of a resource of the workspace: a resource's change may change
// what another resource's reference variables resolve to.
func (s *Store) relatedChanged(ctx context.Context, workspaceID string) error {
	rules, err := s.ReleaseStore.RelationshipRules().List(ctx, ports.ListParams{Workspace: workspaceID, Limit: 1})
	if err != nil {
		return fmt.Errorf("relationship rules of %s: %w", workspaceID, err)
	}
	if len(rules.Items) == 0 {
		return nil
	}
	return s.workspaceTargets(ctx, workspaceID)
}

// workspaceTargets enqueues desired-release for every target of a resource
// of the workspace.
func (s *Store) workspaceTargets(ctx context.Context, workspaceID string) error {
	res, err := ports.ListAll(ctx, s.ReleaseStore.Resources(), workspaceID)
	if err != nil {
		return err
	}
	in := make(map[string]bool, len(res))
	for _, r := range res {
		in[r.Value.ID] = true
	}
	var affected []release.ReleaseTarget
	afterKey := ""
	for len(in) > 0 {
		page, err := s.TargetList(ctx, ports.TargetListParams{AfterKey: afterKey, Limit: ports.MaxListLimit})
		if err != nil {
			return err
		}
		for _, t := range page {
			if in[t.ResourceID] {
				affected = append(affected, t)
			}
		}
		if len(page) < ports.MaxListLimit {
			break
		}
		afterKey = page[len(page)-1].Key()
	}
	return s.evaluate(ctx, affected)
}

// PolicyChanged enqueues desired-release for every target the policy
// applies to before or after a change (nil: absent, or no revision
// published); a disabled policy applies to nothing. A selector that fails
// to evaluate on a target counts as applying (the policy denies there).
// It is the catalog's catalog.Config.PolicyChanged hook.
func (s *Store) PolicyChanged(ctx context.Context, before, after *policy.Policy) error {
	var ps []*policy.Policy
	for _, p := range []*policy.Policy{before, after} {
		if p != nil && p.Enabled {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	deps, err := byID(ctx, s.ReleaseStore.Deployments(), func(v *release.Deployment) string { return v.ID })
	if err != nil {
		return err
	}
	envs, err := byID(ctx, s.ReleaseStore.Environments(), func(v *release.Environment) string { return v.ID })
	if err != nil {
		return err
	}
	res, err := byID(ctx, s.ReleaseStore.Resources(), func(v *release.Resource) string { return v.ID })
	if err != nil {
		return err
	}
	var affected []release.ReleaseTarget
	afterKey := ""
	for {
		page, err := s.TargetList(ctx, ports.TargetListParams{AfterKey: afterKey, Limit: ports.MaxListLimit})
		if err != nil {
			return err
		}
		for _, t := range page {
			in := policy.Input{Deployment: deps[t.DeploymentID], Environment: envs[t.EnvironmentID], Resource: res[t.ResourceID]}
			for _, p := range ps {
				if ok, err := p.AppliesTo(in); ok || err != nil {
					affected = append(affected, t)
					break
				}
			}
		}
		if len(page) < ports.MaxListLimit {
			break
		}
		afterKey = page[len(page)-1].Key()
	}
	return s.evaluate(ctx, affected)
}

// SetVersionStatus changes a version's status and enqueues desired-release
// for its deployment's targets, in one transaction.
func (s *Store) SetVersionStatus(ctx context.Context, versionID string, status release.VersionStatus) error {
	return s.Tx.InTx(ctx, func(ctx context.Context) error {
		v, err := s.VersionGet(ctx, versionID)
		if err != nil {
			return err
		}
		if err := s.VersionUpdateStatus(ctx, versionID, status); err != nil {
			return err
		}
		targets, err := s.TargetList(ctx, ports.TargetListParams{Scope: ports.TargetScope{DeploymentID: v.DeploymentID}})
		if err != nil {
			return err
		}
		return s.evaluate(ctx, targets)
	})
}

// evaluate enqueues desired-release for each target with ctx, so a
// transaction ctx carries holds the enqueues.
func (s *Store) evaluate(ctx context.Context, targets []release.ReleaseTarget) error {
	if len(targets) == 0 {
		return nil
	}
	items := make([]ports.EnqueueParams, len(targets))
	for i, t := range targets {
		items[i] = ports.EnqueueParams{Key: chain.TargetKey(chain.KindDesiredRelease, t)}
	}
	for len(items) > 0 {
		n := min(len(items), 1000)
		if err := s.Queue.WorkEnqueue(ctx, items[:n]...); err != nil {
			return fmt.Errorf("enqueue desired releases: %w", err)
		}
		items = items[n:]
	}
	return nil
}

// byID reads every object of a kind into a map by id.
func byID[T any](ctx context.Context, objs ports.Objects[T], id func(*T) string) (map[string]T, error) {
	all, err := ports.ListAll(ctx, objs, "")
	if err != nil {
		return nil, err
	}
	out := make(map[string]T, len(all))
	for i := range all {
		out[id(&all[i].Value)] = all[i].Value
	}
	return out, nil
}

// values unwraps stored objects.
func values[T any](s []ports.Stored[T]) []T {
	out := make([]T, len(s))
	for i := range s {
		out[i] = s[i].Value
	}
	return out
}
