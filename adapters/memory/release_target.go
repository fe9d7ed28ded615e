package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// targetRec is one stored release target.
type targetRec struct {
	key       string
	t         release.ReleaseTarget
	systemID  string
	createdAt time.Time
}

// targetIndex keeps the targets in key-sorted slices: all of them, and per
// system, deployment, environment and resource, and each deployment's
// generation in each environment (ports.ScopeTargets).
type targetIndex struct {
	byTarget map[release.ReleaseTarget]*targetRec
	all      []*targetRec
	bySys    map[string][]*targetRec
	byDep    map[string][]*targetRec
	byEnv    map[string][]*targetRec
	byRes    map[string][]*targetRec
	// gen is the generation of each scope that ever held a target; lastGen
	// the last one given, so none is given twice, even by an undo.
	gen     map[envRef]int64
	lastGen int64
	// count is the number of targets of each scope.
	count map[envRef]int
}

func newTargetIndex() targetIndex {
	return targetIndex{
		byTarget: map[release.ReleaseTarget]*targetRec{},
		bySys:    map[string][]*targetRec{},
		byDep:    map[string][]*targetRec{},
		byEnv:    map[string][]*targetRec{},
		byRes:    map[string][]*targetRec{},
		gen:      map[envRef]int64{},
		count:    map[envRef]int{},
	}
}

func byKey(a, b *targetRec) int { return strings.Compare(a.key, b.key) }

// scoped returns the smallest sorted slice holding every target of scope;
// the caller still filters by the scope.
func (x *targetIndex) scoped(sc ports.TargetScope) []*targetRec {
	switch {
	case sc.DeploymentID != "":
		return x.byDep[sc.DeploymentID]
	case sc.ResourceID != "":
		return x.byRes[sc.ResourceID]
	case sc.EnvironmentID != "":
		return x.byEnv[sc.EnvironmentID]
	case sc.SystemID != "":
		return x.bySys[sc.SystemID]
	}
	return x.all
}

// apply removes and adds targets (both sorted by key) in every slice, by a
// linear merge per slice touched.
func (x *targetIndex) apply(added, removed []*targetRec) {
	touched := map[envRef]bool{}
	for _, r := range removed {
		delete(x.byTarget, r.t)
		k := envRef{r.t.DeploymentID, r.t.EnvironmentID}
		touched[k] = true
		if x.count[k]--; x.count[k] == 0 {
			delete(x.count, k)
		}
	}
	for _, a := range added {
		x.byTarget[a.t] = a
		k := envRef{a.t.DeploymentID, a.t.EnvironmentID}
		touched[k] = true
		x.count[k]++
	}
	for k := range touched {
		x.lastGen++
		x.gen[k] = x.lastGen
	}
	x.all = mergeTargets(x.all, added, removed)
	for _, ix := range []struct {
		m   map[string][]*targetRec
		key func(*targetRec) string
	}{
		{x.bySys, func(r *targetRec) string { return r.systemID }},
		{x.byDep, func(r *targetRec) string { return r.t.DeploymentID }},
		{x.byEnv, func(r *targetRec) string { return r.t.EnvironmentID }},
		{x.byRes, func(r *targetRec) string { return r.t.ResourceID }},
	} {
		add, rem := groupTargets(added, ix.key), groupTargets(removed, ix.key)
		for k := range add {
			ix.m[k] = mergeTargets(ix.m[k], add[k], rem[k])
		}
		for k := range rem {
			if _, done := add[k]; done {
				continue
			}
			ix.m[k] = mergeTargets(ix.m[k], nil, rem[k])
			if len(ix.m[k]) == 0 {
				delete(ix.m, k)
			}
		}
	}
}

// groupTargets splits sorted targets by key, keeping each group sorted.
func groupTargets(recs []*targetRec, key func(*targetRec) string) map[string][]*targetRec {
	out := map[string][]*targetRec{}
	for _, r := range recs {
		out[key(r)] = append(out[key(r)], r)
	}
	return out
}

// mergeTargets returns sorted s without rem and with add (both sorted).
func mergeTargets(s, add, rem []*targetRec) []*targetRec {
	out := make([]*targetRec, 0, len(s)+len(add))
	i, j, k := 0, 0, 0
	for i < len(s) || j < len(add) {
		if i < len(s) && k < len(rem) && s[i].key >= rem[k].key {
			if s[i].key == rem[k].key {
				i++
			}
			k++
			continue
		}
		switch {
		case j == len(add) || (i < len(s) && s[i].key < add[j].key):
			out = append(out, s[i])
			i++
		default:
			out = append(out, add[j])
			j++
		}
	}
	return out
}

// TargetsReplace makes the scope's targets exactly p.Targets.
func (s *ReleaseStore) TargetsReplace(ctx context.Context, p ports.TargetsReplaceParams) (ports.TargetsDiff, error) {
	const op = "replace targets"
	if err := ports.ValidateTargetsReplace(p); err != nil {
		return ports.TargetsDiff{}, fmt.Errorf("%s: %w", op, err)
	}
	defer s.lock(ctx)()
	want := make(map[release.ReleaseTarget]string, len(p.Targets))
	for i, t := range p.Targets {
		sys, err := s.targetSystem(t)
		if err != nil {
			return ports.TargetsDiff{}, fmt.Errorf("%s: %s: %w", op, release.Index("targets", i), err)
		}
		if p.Scope.SystemID != "" && p.Scope.SystemID != sys {
			return ports.TargetsDiff{}, fmt.Errorf("%s: %w", op, release.Invalid(release.Index("targets", i), "target "+t.Key()+" lies outside the scope"))
		}
		want[t] = sys
	}
	now := s.now()
	var added, removed []*targetRec
	for _, r := range s.targets.scoped(p.Scope) {
		if !p.Scope.Contains(r.t, r.systemID) {
			continue
		}
		if _, keep := want[r.t]; keep {
			delete(want, r.t)
			continue
		}
		removed = append(removed, r)
	}
	// A wanted target stored outside the scope as stored has moved system
	// with its deployment: it is re-indexed, but neither added nor removed.
	var diff ports.TargetsDiff
	for t, sys := range want {
		rec := &targetRec{key: t.Key(), t: t, systemID: sys, createdAt: now}
		if old, ok := s.targets.byTarget[t]; ok {
			removed = append(removed, old)
			rec.createdAt = old.createdAt
		} else {
			diff.Added = append(diff.Added, t)
		}
		added = append(added, rec)
	}
	for _, r := range removed {
		if _, moved := want[r.t]; !moved {
			diff.Removed = append(diff.Removed, r.t)
		}
	}
	slices.SortFunc(added, byKey)
	slices.SortFunc(removed, byKey)
	s.targets.apply(added, removed)
	s.refreshTargetProgression(added, removed)
	s.onUndo(ctx, func() {
		s.targets.apply(removed, added)
		s.refreshTargetProgression(added, removed)
	})
	sortTargets(diff.Added)
	sortTargets(diff.Removed)
	return diff, nil
}

// sortTargets sorts targets by key.
func sortTargets(ts []release.ReleaseTarget) {
	slices.SortFunc(ts, func(a, b release.ReleaseTarget) int { return strings.Compare(a.Key(), b.Key()) })
}

// targetSystem checks a target's deployment, environment and resource exist
// and agree, and returns the system; the caller holds the lock.
func (s *ReleaseStore) targetSystem(t release.ReleaseTarget) (string, error) {
	d, ok := s.deployments.rows[t.DeploymentID]
	if !ok {
		return "", fmt.Errorf("deployment %s: %w", t.DeploymentID, ports.ErrNotFound)
	}
	e, ok := s.environments.rows[t.EnvironmentID]
	if !ok {
		return "", fmt.Errorf("environment %s: %w", t.EnvironmentID, ports.ErrNotFound)
	}
	if _, ok := s.resources.rows[t.ResourceID]; !ok {
		return "", fmt.Errorf("resource %s: %w", t.ResourceID, ports.ErrNotFound)
	}
	if d.Value.SystemID != e.Value.SystemID {
		return "", release.Invalid("environment_id", "environment "+t.EnvironmentID+" is in system "+e.Value.SystemID+
			", deployment "+t.DeploymentID+" in "+d.Value.SystemID)
	}
	return d.Value.SystemID, nil
}

// TargetGet reads a target with its deployment, environment and resource.
func (s *ReleaseStore) TargetGet(ctx context.Context, t release.ReleaseTarget) (ports.TargetDetail, error) {
	defer s.rlock(ctx)()
	r, ok := s.targets.byTarget[t]
	if !ok {
		return ports.TargetDetail{}, fmt.Errorf("get target %s: %w", t, ports.ErrNotFound)
	}
	return ports.TargetDetail{
		Target:       t,
		System:       copySystem(&s.systems.rows[r.systemID].Value),
		VariableSets: s.systemVariableSets(r.systemID),
		Deployment:   copyDeployment(&s.deployments.rows[t.DeploymentID].Value),
		Environment:  copyEnvironment(&s.environments.rows[t.EnvironmentID].Value),
		Resource:     copyResource(&s.resources.rows[t.ResourceID].Value),
		CreatedAt:    r.createdAt,
	}, nil
}

// systemVariableSets copies the variable sets of a system in id order;
// the caller holds the lock.
func (s *ReleaseStore) systemVariableSets(systemID string) []release.VariableSet {
	ids := s.variableSets.byParent[systemID]
	if len(ids) == 0 {
		return nil
	}
	out := make([]release.VariableSet, 0, len(ids))
	for _, id := range ids {
		out = append(out, copyVariableSet(&s.variableSets.rows[id].Value))
	}
	return out
}

// TargetList lists the targets of a scope in key order.
func (s *ReleaseStore) TargetList(ctx context.Context, p ports.TargetListParams) ([]release.ReleaseTarget, error) {
	defer s.rlock(ctx)()
	recs := s.targets.scoped(p.Scope)
	if p.AfterKey != "" {
		i, found := slices.BinarySearchFunc(recs, p.AfterKey, func(r *targetRec, k string) int { return cmp.Compare(r.key, k) })
		if found {
			i++
		}
		recs = recs[i:]
	}
	var out []release.ReleaseTarget
	for _, r := range recs {
		if p.Limit > 0 && len(out) == p.Limit {
			break
		}
		if p.Scope.Contains(r.t, r.systemID) {
			out = append(out, r.t)
		}
	}
	return out, nil
}

// ScopeTargets reads the scope's generation and, when it is not p.Known,
// its targets, under one lock.
func (s *ReleaseStore) ScopeTargets(ctx context.Context, p ports.ScopeTargetsParams) (ports.ScopeTargets, error) {
	if err := p.Validate(); err != nil {
		return ports.ScopeTargets{}, fmt.Errorf("scope targets: %w", err)
	}
	defer s.rlock(ctx)()
	out := ports.ScopeTargets{Generation: s.targets.gen[envRef{p.DeploymentID, p.EnvironmentID}]}
	if out.Generation == p.Known {
		return out, nil
	}
	out.Changed = true
	for _, r := range s.targets.byDep[p.DeploymentID] {
		if r.t.EnvironmentID == p.EnvironmentID {
			out.Targets = append(out.Targets, r.t)
		}
	}
	return out, nil
}

// TargetFactsGet reads t's facts through the other reads, one after the
// other (each is consistent on its own; the chain recomputes anyway).
func (s *ReleaseStore) TargetFactsGet(ctx context.Context, t release.ReleaseTarget, jobLimit int) (ports.TargetFacts, error) {
	policies, err := ports.EnabledPolicies(ctx, s)
	if err != nil {
		return ports.TargetFacts{}, err
	}
	return s.targetFacts(ctx, t, jobLimit, policies)
}

// targetFacts is TargetFactsGet with the enabled policies read already.
func (s *ReleaseStore) targetFacts(ctx context.Context, t release.ReleaseTarget, jobLimit int, policies []ports.Stored[policy.Policy]) (ports.TargetFacts, error) {
	var f ports.TargetFacts
	var err error
	// The stamp is taken first: a change made between it and the reads
	// below leaves the facts newer than their stamp, never older.
	if f.Stamp, err = s.stamp(ctx, t, jobLimit, policies); err != nil {
		return ports.TargetFacts{}, err
	}
	if f.Detail, err = s.TargetGet(ctx, t); err != nil {
		return ports.TargetFacts{}, err
	}
	if f.Jobs, err = s.JobsByTarget(ctx, t, jobLimit); err != nil {
		return ports.TargetFacts{}, err
	}
	f.Policies = policies
	f.Forced = s.forced(ctx, t)
	if id := f.Detail.Deployment.JobAgentID; id != "" {
		if a, err := s.JobAgents().Get(ctx, id); err == nil {
			f.Agent = &a
		}
	}
	d, err := s.DesiredGet(ctx, t)
	if errors.Is(err, ports.ErrNotFound) {
		return f, nil
	}
	if err != nil {
		return ports.TargetFacts{}, err
	}
	f.Desired = &d
	if d.ReleaseID == "" {
		return f, nil
	}
	rel, err := s.ReleaseGet(ctx, d.ReleaseID)
	if err != nil {
		return ports.TargetFacts{}, err
	}
	v, err := s.VersionGet(ctx, rel.VersionID)
	if err != nil {
		return ports.TargetFacts{}, err
	}
	f.Release, f.Version = &rel, &v
	return f, nil
}

// TargetFactsGetMany reads the facts of each stored target of ts with
// TargetFactsGet.
func (s *ReleaseStore) TargetFactsGetMany(ctx context.Context, ts []release.ReleaseTarget, jobLimit int) (map[release.ReleaseTarget]ports.TargetFacts, error) {
	return eachTarget(ctx, s, ts, func(t release.ReleaseTarget, policies []ports.Stored[policy.Policy]) (ports.TargetFacts, error) {
		return s.targetFacts(ctx, t, jobLimit, policies)
	})
}

// eachTarget is read of each stored target of ts, keyed by target, over
// the enabled policies read once for them all, as on PostgreSQL's one
// statement.
func eachTarget[V any](ctx context.Context, s *ReleaseStore, ts []release.ReleaseTarget, read func(release.ReleaseTarget, []ports.Stored[policy.Policy]) (V, error)) (map[release.ReleaseTarget]V, error) {
	out := make(map[release.ReleaseTarget]V, len(ts))
	if len(ts) == 0 {
		return out, nil
	}
	policies, err := ports.EnabledPolicies(ctx, s)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		v, err := read(t, policies)
		if errors.Is(err, ports.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[t] = v
	}
	return out, nil
}

// TargetStampMany reads the stamp of each stored target of ts.
func (s *ReleaseStore) TargetStampMany(ctx context.Context, ts []release.ReleaseTarget, jobLimit int) (map[release.ReleaseTarget]ports.FactsStamp, error) {
	return eachTarget(ctx, s, ts, func(t release.ReleaseTarget, policies []ports.Stored[policy.Policy]) (ports.FactsStamp, error) {
		return s.stamp(ctx, t, jobLimit, policies)
	})
}

// stamp is t's ports.FactsStamp over the enabled policies read already.
func (s *ReleaseStore) stamp(ctx context.Context, t release.ReleaseTarget, jobLimit int, policies []ports.Stored[policy.Policy]) (ports.FactsStamp, error) {
	defer s.rlock(ctx)()
	r, ok := s.targets.byTarget[t]
	if !ok {
		return ports.FactsStamp{}, fmt.Errorf("get target %s: %w", t, ports.ErrNotFound)
	}
	var st ports.FactsStamp
	if d, ok := s.desired[t]; ok && d.ReleaseID != "" {
		st.ReleaseID = d.ReleaseID
		if rel, ok := s.releases[d.ReleaseID]; ok {
			st.ReleaseCreatedAt = rel.CreatedAt
		}
	}
	sys, dep := s.systems.rows[r.systemID], s.deployments.rows[t.DeploymentID]
	env, res := s.environments.rows[t.EnvironmentID], s.resources.rows[t.ResourceID]
	parts := []any{r.createdAt, sys.Version, sys.UpdatedAt, dep.Version, dep.UpdatedAt, env.Version, env.UpdatedAt, res.Version, res.UpdatedAt}
	if a, ok := s.agents.rows[dep.Value.JobAgentID]; ok && dep.Value.JobAgentID != "" {
		parts = append(parts, "agent", a.Version, a.UpdatedAt)
	}
	parts = append(parts, "jobs")
	list := s.jobs.byTarget[t]
	for i, n := len(list)-1, 0; i >= 0 && (jobLimit <= 0 || n < jobLimit); i, n = i-1, n+1 {
		parts = append(parts, list[i].ID, list[i].Version)
	}
	parts = append(parts, "policies")
	for i := range policies {
		parts = append(parts, policies[i].Value.ID, policies[i].Version)
	}
	st.Rest = ports.FactsDigest(parts...)
	return st, nil
}

// forced lists the force-deploy skips covering t, by id.
func (s *ReleaseStore) forced(ctx context.Context, t release.ReleaseTarget) []release.PolicySkip {
	defer s.rlock(ctx)()
	var out []release.PolicySkip
	for _, sk := range s.skips {
		v, ok := s.versions[sk.VersionID]
		if !sk.IsForceDeploy() || !ok || v.DeploymentID != t.DeploymentID ||
			(sk.EnvironmentID != "" && sk.EnvironmentID != t.EnvironmentID) || (sk.ResourceID != "" && sk.ResourceID != t.ResourceID) {
			continue
		}
		out = append(out, *sk)
	}
	slices.SortFunc(out, func(a, b release.PolicySkip) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
