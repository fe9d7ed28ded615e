// Package gate keeps a write from lifting a gating rule off a release
// target unless the caller may: it runs the write in one transaction
// between two reads of the facts and computes the decision diff
// (policy/plan) between them.
//
// Invariants:
//   - The facts before and after are read in the write's transaction, so
//     the after-read sees exactly the write.
//   - A refused write (a *LiftError) and a dry run are rolled back: they
//     change nothing.
package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/policy/plan"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Read reads the facts the diff is computed over: every system,
// deployment, environment and resource, and the enabled policies, as the
// release chain reads them (ports.EnabledPolicies). Call it in a
// transaction for a consistent read.
func Read(ctx context.Context, s ports.ReleaseStore) (plan.Facts, error) {
	var f plan.Facts
	var err error
	if f.Systems, err = values(ports.ListAll(ctx, s.Systems(), "")); err != nil {
		return plan.Facts{}, fmt.Errorf("read facts: systems: %w", err)
	}
	if f.Deployments, err = values(ports.ListAll(ctx, s.Deployments(), "")); err != nil {
		return plan.Facts{}, fmt.Errorf("read facts: deployments: %w", err)
	}
	if f.Environments, err = values(ports.ListAll(ctx, s.Environments(), "")); err != nil {
		return plan.Facts{}, fmt.Errorf("read facts: environments: %w", err)
	}
	if f.Resources, err = values(ports.ListAll(ctx, s.Resources(), "")); err != nil {
		return plan.Facts{}, fmt.Errorf("read facts: resources: %w", err)
	}
	ps, err := ports.EnabledPolicies(ctx, s)
	if err != nil {
		return plan.Facts{}, fmt.Errorf("read facts: %w", err)
	}
	for _, p := range ps {
		f.Policies = append(f.Policies, plan.Policy{Policy: p.Value, Revision: int(p.Version)})
	}
	return f, nil
}

// values unwraps stored objects.
func values[T any](s []ports.Stored[T], err error) ([]T, error) {
	if err != nil {
		return nil, err
	}
	out := make([]T, len(s))
	for i := range s {
		out[i] = s[i].Value
	}
	return out, nil
}

// readFor reads the facts, and the variable sets when withSets.
func readFor(ctx context.Context, s ports.ReleaseStore, withSets bool) (worldFacts, error) {
	if withSets {
		return readWorld(ctx, s)
	}
	f, err := Read(ctx, s)
	return worldFacts{Facts: f}, err
}

// LiftError is a write refused because it would take gating rules off
// targets: it needs scope approve.
type LiftError struct {
	Lifts []plan.Lift
}

func (e *LiftError) Error() string {
	parts := make([]string, len(e.Lifts))
	for i, l := range e.Lifts {
		parts[i] = "rule " + l.Rule.String() + " from target " + l.Target
	}
	return "this write would lift " + strings.Join(parts, ", ") + ": it needs scope " + string(ports.ScopeApprove)
}

// errRollback rolls back a dry run after its diff is computed.
var errRollback = errors.New("gate: roll back")

// Params is one guarded write.
type Params struct {
	Tx    ports.Transactor
	Store ports.ReleaseStore
	// MayLift lets the write lift gating rules (the caller has scope
	// approve).
	MayLift bool
	// DryRun rolls the write back after the diff is computed.
	DryRun bool
	// Decide, on a dry run, adds to the diff every affected target's
	// desired release after the write (decided by the chain in the write's
	// transaction, its targets recomputed) and before it (decided by the
	// chain over the store as it is, in a second transaction, also rolled
	// back): plan.Target.Desired.
	Decide Decider
}

// Check runs write in one transaction between two reads of the facts and
// returns the decision diff. When the write would lift a gating rule and
// MayLift is false, it is rolled back and the error is a *LiftError; an
// error of write is returned as is (also rolled back). A dry run is
// always rolled back and never refused.
func Check(ctx context.Context, p Params, write func(ctx context.Context) error) (plan.Diff, error) {
	var d plan.Diff
	decide := p.DryRun && p.Decide != nil
	var changes map[string]plan.DesiredChange
	var targets map[string]release.ReleaseTarget
	err := p.Tx.InTx(ctx, func(ctx context.Context) error {
		before, err := readFor(ctx, p.Store, decide)
		if err != nil {
			return err
		}
		if err := write(ctx); err != nil {
			return err
		}
		after, err := readFor(ctx, p.Store, decide)
		if err != nil {
			return err
		}
		if d, err = plan.Compute(before.Facts, after.Facts); err != nil {
			return err
		}
		if decide {
			if changes, targets, err = decideAfter(ctx, p.Store, p.Decide, &before, &after, &d); err != nil {
				return err
			}
		}
		if p.DryRun {
			return errRollback // it changes nothing, so it may show any diff
		}
		if lifts := d.Lifted(); len(lifts) > 0 && !p.MayLift {
			return &LiftError{Lifts: lifts}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errRollback) {
		return plan.Diff{}, err
	}
	if decide {
		if err := decideBefore(ctx, p.Tx, p.Decide, changes, targets); err != nil {
			return plan.Diff{}, err
		}
		d.WithDesired(changes, targets)
	}
	return d, nil
}

// PolicyDecider is a Decider with policies standing in for the stored
// enabled ones (chain.Chain.DecideManyWith).
type PolicyDecider func(policies []ports.Stored[policy.Policy]) Decider

// Publishing is the decision diff of publishing p (a proposed revision of
// policy p.ID) over the facts as they are: p replaces the policy's
// published revision (a disabled p removes it). Its rules carry revision 0,
// as it has no number until it is published, unless p is the published
// revision's content (then its number, and nothing changes). With decide, every target
// the published or the proposed revision applies to (and every target the
// diff lists) also gets its desired release before and after
// (plan.Target.Desired), decided by the chain over the same read with the
// enabled policies as they are and with p in place: the computation of
// apply's dry run, the change applied in memory. Nothing is written.
func Publishing(ctx context.Context, tx ports.Transactor, s ports.ReleaseStore, p policy.Policy, decide PolicyDecider) (plan.Diff, error) {
	var d plan.Diff
	read := func(ctx context.Context) error {
		before, err := Read(ctx, s)
		if err != nil {
			return err
		}
		after := before
		// p keeps the published revision's number when it is that
		// revision's content (planning the published revision itself):
		// publishing it again changes nothing.
		planned := plan.Policy{Policy: p}
		for _, x := range before.Policies {
			if x.Policy.ID == p.ID && samePolicy(x.Policy, p) {
				planned.Revision = x.Revision
			}
		}
		after.Policies = slices.DeleteFunc(slices.Clone(before.Policies), func(x plan.Policy) bool { return x.Policy.ID == p.ID })
		if p.Enabled {
			after.Policies = append(after.Policies, planned)
		}
		if d, err = plan.Compute(before, after); err != nil {
			return err
		}
		if decide == nil {
			return nil
		}
		return decidePublishing(ctx, decide, &before, &after, p, &d)
	}
	var err error
	if tx != nil {
		err = tx.InTx(ctx, read)
	} else {
		err = read(ctx)
	}
	if err != nil {
		return plan.Diff{}, err
	}
	return d, nil
}

// samePolicy reports whether a and b are the same content (as stored:
// compared in their JSON form, so a nil and an empty list agree).
func samePolicy(a, b policy.Policy) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// decidePublishing adds to d the desired releases before and after of
// the targets p's published or proposed revision applies to, and of those
// d lists.
func decidePublishing(ctx context.Context, decide PolicyDecider, before, after *plan.Facts, p policy.Policy, d *plan.Diff) error {
	targets, err := release.ComputeTargets(before.Systems, before.Deployments, before.Environments, before.Resources, release.CEL{})
	var se *release.SelectorError
	if err != nil && !errors.As(err, &se) {
		return err
	}
	revisions := []policy.Policy{p}
	for _, x := range before.Policies {
		if x.Policy.ID == p.ID {
			revisions = append(revisions, x.Policy)
		}
	}
	deployments := index(before.Deployments, func(x *release.Deployment) string { return x.ID })
	environments := index(before.Environments, func(x *release.Environment) string { return x.ID })
	resources := index(before.Resources, func(x *release.Resource) string { return x.ID })
	listed := map[string]bool{}
	for _, t := range d.Targets {
		listed[t.Key] = true
	}
	keys := map[string]release.ReleaseTarget{}
	var ts []release.ReleaseTarget
	for _, t := range targets {
		in := policy.Input{Deployment: *deployments[t.DeploymentID], Environment: *environments[t.EnvironmentID], Resource: *resources[t.ResourceID]}
		applies := listed[t.Key()]
		for i := 0; i < len(revisions) && !applies; i++ {
			ok, err := revisions[i].AppliesTo(in)
			applies = ok || err != nil // a failing selector applies (and denies)
		}
		if applies {
			keys[t.Key()] = t
			ts = append(ts, t)
		}
	}
	was, err := decide(stored(before.Policies))(ctx, ts)
	if err != nil {
		return fmt.Errorf("decide before publishing: %w", err)
	}
	will, err := decide(stored(after.Policies))(ctx, ts)
	if err != nil {
		return fmt.Errorf("decide after publishing: %w", err)
	}
	changes := make(map[string]plan.DesiredChange, len(ts))
	for k, t := range keys {
		var c plan.DesiredChange
		if b, ok := was[t]; ok {
			c.Before = &b
		}
		if a, ok := will[t]; ok {
			c.After = &a
		}
		changes[k] = c
	}
	d.WithDesired(changes, keys)
	return nil
}

// stored is policies as the chain reads them: each revision its Version.
func stored(policies []plan.Policy) []ports.Stored[policy.Policy] {
	out := make([]ports.Stored[policy.Policy], len(policies))
	for i, p := range policies {
		out[i] = ports.Stored[policy.Policy]{Value: p.Policy, Version: int64(p.Revision)}
	}
	ports.SortPolicies(out)
	return out
}

// index maps each item of s by key.
func index[T any](s []T, key func(*T) string) map[string]*T {
	out := make(map[string]*T, len(s))
	for i := range s {
		out[key(&s[i])] = &s[i]
	}
	return out
}
