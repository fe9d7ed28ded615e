package api

import (
	"context"
	"errors"
	"time"

	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// VersionPlanTarget is what a version would do on one release target, were
// it created now: the chain's own decision over the stored facts with the
// version added.
type VersionPlanTarget struct {
	Target release.ReleaseTarget `json:"target"`
	// Chosen says the version would be the target's desired release at
	// once (its decision allows it and no force-deploy pins another).
	Chosen bool `json:"chosen"`
	// Decision and Verdicts are every rule's verdict on the version there.
	Decision policy.Decision      `json:"decision"`
	Verdicts []policy.RuleVerdict `json:"verdicts"`
	// Forced names the force-deploy pinning the target, when one does.
	Forced string `json:"forced,omitempty"`
	// Earliest is the earliest time the version may be chosen by the
	// passage of time alone: now when it is chosen at once, the time a
	// pending rule may change (a rollout position, a window opening, a
	// soak ending); zero when an event must come first (an approval, an
	// upstream environment's success) or it is denied.
	Earliest time.Time `json:"earliest,omitzero"`
	// WaitsFor is the blocking rule's message: what the target waits for.
	WaitsFor string `json:"waits_for,omitempty"`
}

// PlanOf is what version versionID does on x's target at now, from the
// chain's explanation of the target: whether it is chosen, every rule's
// verdict, and the earliest time it may be (the console's plan view reads
// it too).
func PlanOf(x *chain.Explanation, versionID string, now time.Time) VersionPlanTarget {
	pt := VersionPlanTarget{Target: x.Target, Forced: x.Forced, Verdicts: []policy.RuleVerdict{}}
	for _, c := range x.Versions {
		if c.Version.ID == versionID {
			pt.Decision, pt.Verdicts = c.Decision, c.Verdicts
		}
	}
	switch {
	case pt.Decision.Status == policy.Allowed && x.Forced == "":
		pt.Chosen, pt.Earliest = true, now
	case pt.Decision.Status == policy.Pending:
		pt.Earliest = earliest(pt.Verdicts)
	}
	if !pt.Chosen {
		pt.WaitsFor = pt.Decision.Blocking.Message
		if x.Forced != "" {
			pt.WaitsFor = "force-deploy " + x.Forced + " pins another version"
		}
	}
	return pt
}

// errPlanDone rolls a plan's transaction back.
var errPlanDone = errors.New("plan done")

// planVersion answers what creating v would do on the targets of its
// deployment (environmentID's only when set), one page from after: v is
// created, every target explained by the chain, and everything rolled
// back, in one transaction, so nothing is stored and the plan reads one
// consistent state.
func (s *Server) planVersion(ctx context.Context, v release.DeploymentVersion, environmentID, after string, limit int) (release.DeploymentVersion, Page[VersionPlanTarget], error) {
	if s.o.Tx == nil {
		return v, Page[VersionPlanTarget]{}, errors.New("plan: the API has no transactor to roll the plan back")
	}
	var created release.DeploymentVersion
	var out []VersionPlanTarget
	err := s.o.Tx.InTx(ctx, func(ctx context.Context) error {
		if err := s.o.Chain.CreateVersion(ctx, v); err != nil {
			return err
		}
		got, err := s.o.Releases.VersionGet(ctx, v.ID)
		if err != nil {
			return err
		}
		created = got
		targets, err := s.o.Releases.TargetList(ctx, ports.TargetListParams{
			Scope: ports.TargetScope{DeploymentID: v.DeploymentID, EnvironmentID: environmentID}, AfterKey: after, Limit: limit + 1})
		if err != nil {
			return err
		}
		now := s.o.Clock.Now()
		for _, t := range targets {
			x, err := s.o.Chain.Explain(ctx, t, 0)
			if err != nil {
				return err
			}
			out = append(out, PlanOf(&x, v.ID, now))
		}
		return errPlanDone
	})
	if err != nil && !errors.Is(err, errPlanDone) {
		return v, Page[VersionPlanTarget]{}, err
	}
	return created, page(out, limit, func(p *VersionPlanTarget) string { return p.Target.Key() }), nil
}

// earliest is when every pending verdict may have changed by time alone:
// the latest of their Untils, or zero when one of them waits for an event
// (an approval, an upstream environment) rather than a time.
func earliest(verdicts []policy.RuleVerdict) time.Time {
	var out time.Time
	for _, v := range verdicts {
		if v.Status != policy.Pending || v.Skipped {
			continue
		}
		if v.Until.IsZero() {
			return time.Time{}
		}
		if v.Until.After(out) {
			out = v.Until
		}
	}
	return out
}
