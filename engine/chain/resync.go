package chain

import (
	"context"
	"fmt"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// resyncPage is how many targets a sweep reads at a time.
const resyncPage = 500

// ResyncSource is the chain's part of the periodic sweep (engine.Resync):
// for every release target its desired-release item (which recomputes
// the desired release and hands off to job-dispatch)
// and its job-dispatch item (which ends active jobs past their timeout
// even while eligibility waits for them), and the verification item of
// its newest successful job while that job's verification runs. So no
// lost hand-off or wake-up leaves a target, a job or a verification
// waiting for an event that never comes.
func (c *Chain) ResyncSource() engine.ResyncSource {
	return func(ctx context.Context, yield func(ports.WorkKey) error) error {
		after := ""
		for {
			targets, err := c.Store.TargetList(ctx, ports.TargetListParams{AfterKey: after, Limit: resyncPage})
			if err != nil {
				return fmt.Errorf("resync release targets: %w", err)
			}
			for _, t := range targets {
				if err := c.resyncTarget(ctx, t, yield); err != nil {
					return err
				}
			}
			if len(targets) < resyncPage {
				return nil
			}
			after = targets[len(targets)-1].Key()
		}
	}
}

// resyncTarget yields one target's keys.
func (c *Chain) resyncTarget(ctx context.Context, t release.ReleaseTarget, yield func(ports.WorkKey) error) error {
	for _, kind := range []string{KindDesiredRelease, KindJobDispatch} {
		if err := yield(TargetKey(kind, t)); err != nil {
			return err
		}
	}
	st, err := c.Store.TargetJobState(ctx, t)
	if err != nil {
		return fmt.Errorf("resync release target %s: %w", t.Key(), err)
	}
	if j := st.Successful; j != nil && j.Job.Verification == release.VerificationRunning {
		return yield(JobKey(j.Job.ID))
	}
	return nil
}
