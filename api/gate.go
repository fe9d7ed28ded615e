package api

import (
	"context"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/engine/gate"
	"github.com/reconcilerhq/reconciler/policy/plan"
	"github.com/reconcilerhq/reconciler/ports"
)

// guarded runs write under the gate check (engine/gate): a write that
// would take a gating rule off a release target needs scope approve, and
// is otherwise rolled back as a 403 naming the target and the rule. A dry
// run is rolled back and returns the decision diff. Without a transactor
// (Options.Tx) the check cannot roll a write back, so only a caller with
// approve may write. A dry run's diff has each affected target's desired
// release before and after (the chain's Decide).
func (s *Server) guarded(ctx context.Context, dryRun bool, write func(context.Context) error) (plan.Diff, error) {
	tok := principal(ctx).Token
	mayLift := tok.Allows(ports.ScopeApprove)
	if !s.gateChecks() {
		if !mayLift {
			return plan.Diff{}, huma.Error403Forbidden("this server cannot check which gates a write lifts (no transactor): the token needs scope " + string(ports.ScopeApprove))
		}
		return plan.Diff{}, write(ctx)
	}
	p := gate.Params{Tx: s.o.Tx, Store: s.o.Releases, MayLift: mayLift, DryRun: dryRun}
	if s.o.Chain != nil {
		p.Decide = s.o.Chain.DecideMany
	}
	return gate.Check(ctx, p, write)
}

// gateChecks reports whether guarded runs its write in gate.Check's
// transaction (the server has a transactor and a release store).
func (s *Server) gateChecks() bool { return s.o.Tx != nil && s.o.Releases != nil }

// gatedWrite is write under the gate check (guarded), for a write that
// is no dry run.
func (s *Server) gatedWrite(write func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := s.guarded(ctx, false, write)
		return err
	}
}
