package flow

import (
	"context"
	"errors"
	"fmt"

	"github.com/reconcilerhq/reconciler/ports"
)

// inTx runs fn in one transaction of the store when it has them
// (ports.Transactor), else as it is.
func (c *Controller) inTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if tx, ok := c.Store.(ports.Transactor); ok {
		return tx.InTx(ctx, fn)
	}
	return fn(ctx)
}

// reportAll records a batch of agents' reports (ReportJob's coalescer): the
// terminal ones in one transaction, one compare-and-swap batch write per
// workflow and one enqueue waking them all. When anything in it fails (a
// conflict with a pass, two reports on one run) the transaction rolls back
// and each report is recorded alone.
func (c *Controller) reportAll(ctx context.Context, reps []ports.JobReport) []error {
	errs := make([]error, len(reps))
	if len(reps) == 1 {
		errs[0] = c.reportOne(ctx, reps[0])
		return errs
	}
	err := c.inTx(ctx, func(ctx context.Context) error {
		byWF := map[string][]ports.TaskRunRecord{}
		var order []string
		for i, rep := range reps {
			wfID, trID, attempt, ok := parseJobID(rep.JobID)
			switch {
			case !ok:
				errs[i] = fmt.Errorf("report job %s: not a workflow job: %w", rep.JobID, ports.ErrNotFound)
				continue
			case !rep.Status.IsTerminal():
				if rep.Lease > 0 {
					if err := c.renewLease(ctx, rep, wfID, trID); err != nil {
						return err
					}
				}
				continue
			}
			r, err := c.Store.TaskRunGet(ctx, wfID, trID)
			if errors.Is(err, ports.ErrNotFound) {
				errs[i] = fmt.Errorf("report job %s: %w", rep.JobID, err)
				continue
			}
			if err != nil {
				return err
			}
			if !c.reported(&r, rep, attempt) {
				continue
			}
			if _, seen := byWF[wfID]; !seen {
				order = append(order, wfID)
			}
			byWF[wfID] = append(byWF[wfID], r)
		}
		wakes := make([]ports.EnqueueParams, 0, len(order))
		for _, id := range order {
			// A short write is a conflict that may have written part:
			// returned, it rolls the whole batch back.
			if err := c.Store.TaskRunsSave(ctx, id, byWF[id]); err != nil {
				return err
			}
			wakes = append(wakes, ports.EnqueueParams{Key: Key(id)})
		}
		if len(wakes) == 0 {
			return nil
		}
		return c.Queue.WorkEnqueue(ctx, wakes...)
	})
	if err != nil {
		wakes := map[string]bool{}
		for i := range reps {
			errs[i] = c.reportOne(ctx, reps[i])
			if id, _, _, ok := parseJobID(reps[i].JobID); ok {
				wakes[id] = true
			}
		}
		// A store without transactions may have kept part of the batch,
		// which the reports alone then find already recorded: wake those
		// workflows all the same.
		for id := range wakes {
			_ = c.wake(ctx, id) // best effort: the resync sweep covers a failure
		}
	}
	return errs
}
