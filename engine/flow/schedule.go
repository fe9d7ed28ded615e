package flow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
	"github.com/reconcilerhq/reconciler/workflow"
)

// schedulePass fires one template's schedule (its ScheduleKey item) from
// the template's latest published revision, then requeues itself for the
// next fire time (workflow.Cron.Next):
//
//   - The fire due is the latest scheduled time at or before now, and not
//     before the revision's publication (workflow.Cron.Last). Its workflow
//     id is ScheduleWorkflowID(template, time), so of two processes the
//     second finds it taken: one fire per scheduled time.
//   - Fires missed while no process ran start at most once, when one runs
//     again: only the latest is due, and only while it is no older than
//     spec.startingDeadlineSeconds (when set), as Argo's
//     startingDeadlineSeconds.
//   - concurrencyPolicy forbid: while a workflow of an earlier fire is
//     unfinished, the fire is skipped, recorded as a Cancelled workflow
//     under the fire's id saying so (so no later pass starts it late);
//     replace: the unfinished ones are cancelled and the fire starts;
//     allow (default): it starts.
//
// A template no longer published, or without a schedule, ends the item.
func (tr *Triggers) schedulePass(ctx context.Context, it engine.Item) engine.Outcome {
	next, err := tr.FireSchedule(ctx, it.Key.ScopeID)
	switch {
	case err != nil:
		return engine.Retry(err)
	case next.IsZero():
		return engine.Done()
	}
	return engine.RequeueAt(next)
}

// FireSchedule starts the due fire of the template's schedule, if any (see
// schedulePass), and returns the next fire time (zero: the template has
// no schedule any more). Processes may run it concurrently.
func (tr *Triggers) FireSchedule(ctx context.Context, name string) (time.Time, error) {
	rev, err := tr.Flow.Catalog.CatalogLatestPublished(ctx, revision.KindWorkflowTemplate, name)
	if errors.Is(err, ports.ErrNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	t, err := tr.parse(rev)
	if err != nil {
		tr.refused(ctx, name, "", err)
		return time.Time{}, nil
	}
	cron, err := t.Cron()
	if err != nil || cron == nil {
		return time.Time{}, nil // Load validated it: no schedule
	}
	now := tr.Flow.Clock.Now()
	due := cron.Last(now, rev.PublishedAt)
	if !due.IsZero() && (t.StartingDeadline() == 0 || now.Sub(due) <= t.StartingDeadline()) {
		if err := tr.fire(ctx, rev, t, due); err != nil {
			return time.Time{}, fmt.Errorf("schedule of %s at %s: %w", name, due.Format(time.RFC3339), err)
		}
	}
	return cron.Next(now), nil
}

// fire starts the workflow of the fire at `at` once, under the template's
// concurrency policy.
func (tr *Triggers) fire(ctx context.Context, rev ports.Revision, t *workflow.Template, at time.Time) error {
	id := ScheduleWorkflowID(rev.Name, at)
	if _, err := tr.Flow.Store.WorkflowGet(ctx, id); err == nil {
		return nil // fired already
	} else if !errors.Is(err, ports.ErrNotFound) {
		return err
	}
	trigger := &ports.WorkflowTrigger{Key: ports.TriggerKey(ports.TriggerSchedule, rev.Name), Kind: ports.TriggerSchedule,
		Schedule: t.Spec.Schedule, Timezone: t.Spec.Timezone, ScheduledAt: at.UTC()}
	if policy := t.Spec.ConcurrencyPolicy; policy == workflow.ConcurrencyForbid || policy == workflow.ConcurrencyReplace {
		running, err := tr.Flow.Store.WorkflowsUnfinished(ctx, trigger.Key)
		if err != nil {
			return err
		}
		if len(running) > 0 && policy == workflow.ConcurrencyForbid {
			return tr.skip(ctx, rev, trigger, id, running[0].ID)
		}
		for _, w := range running {
			if err := tr.Flow.Cancel(ctx, w.ID); err != nil {
				return err
			}
			tr.Flow.Logger.LogAttrs(ctx, slog.LevelInfo, "workflow.schedule_replaced", slog.String("template", rev.Name),
				slog.String("id", w.ID), slog.String("by", id))
		}
	}
	_, err := tr.Flow.Start(ctx, StartParams{ID: id, Template: rev.Content, TemplateName: rev.Name, TemplateRevision: rev.Revision, Trigger: trigger})
	return tr.started(ctx, rev.Name, id, err)
}

// skip records a fire that concurrencyPolicy forbid skipped: a Cancelled
// workflow under the fire's id, which never runs a task.
func (tr *Triggers) skip(ctx context.Context, rev ports.Revision, trigger *ports.WorkflowTrigger, id, running string) error {
	now := tr.Flow.Clock.Now()
	w := ports.WorkflowRecord{ID: id, Name: rev.Name, TemplateName: rev.Name, TemplateRevision: rev.Revision, Template: rev.Content,
		Trigger: trigger, Phase: workflow.WorkflowCancelled, CreatedAt: now, FinishedAt: now,
		Message: "skipped: concurrencyPolicy forbid and workflow " + running + " still runs"}
	err := tr.Flow.Store.WorkflowCreate(ctx, w)
	if errors.Is(err, ports.ErrConflict) {
		return nil
	}
	if err != nil {
		return err
	}
	tr.Flow.Logger.LogAttrs(ctx, slog.LevelInfo, "workflow.schedule_skipped", slog.String("template", rev.Name),
		slog.String("id", id), slog.String("running", running))
	return nil
}
