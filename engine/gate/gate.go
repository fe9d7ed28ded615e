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

// Publishing is the decision diff of publishing p (a proposed revision of
// policy p.ID) over the facts as they are: p replaces the policy's
// published revision (a disabled p removes it). Its rules carry revision 0,
// as it has no number until it is published. Nothing is written.
func Publishing(ctx context.Context, tx ports.Transactor, s ports.ReleaseStore, p policy.Policy) (plan.Diff, error) {
	var before plan.Facts
	read := func(ctx context.Context) error {
		var err error
		before, err = Read(ctx, s)
		return err
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
	after := before
	after.Policies = slices.DeleteFunc(slices.Clone(before.Policies), func(x plan.Policy) bool { return x.Policy.ID == p.ID })
	if p.Enabled {
		after.Policies = append(after.Policies, plan.Policy{Policy: p})
	}
	return plan.Compute(before, after)
}
