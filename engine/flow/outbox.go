package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
)

// The outbox. A pass never sends first and records afterwards: a fast
// job's report (or any other write) that overtook the record would make
// the record's compare-and-swap fail, and the next pass, finding nothing
// recorded, would send again. Instead a job or a webhook request is
// recorded in the TaskRun's Delivery (its idempotency key: the job id, or
// the request's Idempotency-Key, both JobID(workflow, TaskRun, attempt))
// in the pass's one batch write, and sent only by the pass whose write
// stored it; what came back is written afterwards, for all of the pass's
// sends in one compare-and-swap batch (settleAll). So a key
// is sent at most once by a live pass. A pass that died mid-send leaves
// the Delivery unsent; the next pass then
//   - waits out the lease of a JobLeaser's job (it was sent and renews it,
//     or it never ran and the lease runs out: the attempt fails as lost,
//     unless its agent resumes jobs (ports.JobResumer): then the pass
//     renews the lease in its write and hands the job to ResumeJob, which
//     follows the external run again or starts the one never started);
//   - sends any other job again under the same job id (JobAgent: Dispatch
//     is idempotent by job id), and a request again under the same
//     Idempotency-Key.

// send is one recorded send, made once its record is stored.
type send struct {
	run, key string
	job      *ports.JobDispatch
	agent    ports.JobAgent
	hook     *ports.WebhookRequest
	// resume hands job to the agent's ResumeJob (ports.JobResumer).
	resume bool
}

// prepareJob is a running job TaskRun's outside work: record its job
// (returned as the send to make once stored), end it when its agent's
// lease ran out, or resend a send a dead pass interrupted. It returns
// whether r changed and when the job's lease needs a look.
func (c *Controller) prepareJob(ctx context.Context, w *ports.WorkflowRecord, t *workflow.Template, r *ports.TaskRunRecord, now time.Time) (bool, *send, time.Time) {
	d := r.Delivery
	switch {
	case r.JobID == "":
		s, err := c.jobSend(ctx, w, t, r, now)
		if err != nil {
			end(r, workflow.TaskFailed, now, err.Error())
			return true, nil, time.Time{}
		}
		r.JobID = s.key
		r.Delivery = &ports.Delivery{Key: s.key, RecordedAt: now}
		if lease := ports.JobLeaseOf(s.agent); lease > 0 {
			r.Delivery.LeaseUntil = now.Add(lease)
		}
		return true, s, r.Delivery.LeaseUntil
	case d == nil || d.Key != r.JobID:
		return false, nil, time.Time{} // recorded by an agent's report
	case !d.LeaseUntil.IsZero():
		if now.Before(d.LeaseUntil) {
			return false, nil, d.LeaseUntil
		}
		if s, err := c.jobSend(ctx, w, t, r, now); err == nil && ports.ResumerOf(s.agent) != nil {
			// Claimed anew by this pass's write; resumed once it is stored.
			s.resume = true
			s.job.Job.CreatedAt, s.job.Job.ExternalID = d.RecordedAt, r.ExternalID
			r.Delivery.LeaseUntil = now.Add(ports.JobLeaseOf(s.agent))
			return true, s, r.Delivery.LeaseUntil
		}
		end(r, workflow.TaskFailed, now, "job "+r.JobID+" lost: its agent's lease ran out at "+
			d.LeaseUntil.UTC().Format(time.RFC3339Nano)+" (the process running it stopped)")
		return true, nil, time.Time{}
	case d.SentAt.IsZero():
		s, err := c.jobSend(ctx, w, t, r, now)
		if err != nil {
			end(r, workflow.TaskFailed, now, err.Error())
			return true, nil, time.Time{}
		}
		return false, s, time.Time{}
	}
	return c.checkLost(ctx, t, r, now)
}

// checkLost asks the agent of a sent job whose lease is held outside the
// process (ports.JobLossChecker: a pull agent's taker) whether the job is
// lost, and fails the run when it is; it returns when to look again.
func (c *Controller) checkLost(ctx context.Context, t *workflow.Template, r *ports.TaskRunRecord, now time.Time) (bool, *send, time.Time) {
	_, impl, err := c.agentOf(ctx, t, r.Task)
	if err != nil {
		return false, nil, time.Time{}
	}
	checker, ok := impl.(ports.JobLossChecker)
	if !ok {
		return false, nil, time.Time{}
	}
	why, next, err := checker.JobLost(ctx, r.JobID, now)
	if err != nil {
		c.Logger.Warn("workflow job loss check failed; the next pass looks again", "task_run", r.ID, "job", r.JobID, "error", err)
		return false, nil, time.Time{}
	}
	if why != "" {
		end(r, workflow.TaskFailed, now, "job "+r.JobID+" "+why)
		return true, nil, time.Time{}
	}
	return false, nil, next
}

// jobSend builds the dispatch of a job TaskRun's current attempt for the
// agent its task names; an error (no such agent, a secret that does not
// resolve) fails the run.
func (c *Controller) jobSend(ctx context.Context, w *ports.WorkflowRecord, t *workflow.Template, r *ports.TaskRunRecord, now time.Time) (*send, error) {
	agent, impl, err := c.agentOf(ctx, t, r.Task)
	if err != nil {
		return nil, err
	}
	plain, _ := r.Dispatch["config"].(map[string]any)
	if c.JobDestination != nil {
		if dest := c.JobDestination(agent.Type, release.MergeConfig(agent.Config, plain)); dest != "" {
			ctx = ports.WithSecretDestination(ctx, dest)
		}
	}
	cfg := plain
	if !release.IsPullAgentType(agent.Type) {
		// A pull agent's job is stored for its taker: its secrets stay
		// references, as a release job's do.
		revealed, err := c.reveal(ctx, w, r.Dispatch["config"])
		if err != nil {
			return nil, err
		}
		cfg, _ = revealed.(map[string]any)
	}
	id := JobID(w.ID, r.ID, r.Attempt)
	job := release.Job{ID: id, JobAgentID: agent.ID, Status: release.JobPending, CreatedAt: now,
		JobAgentConfig:  release.MergeConfig(agent.Config, cfg),
		DispatchContext: map[string]any{"workflow_id": w.ID, "task_run_id": r.ID, "attempt": r.Attempt, "task": r.Task}}
	return &send{run: r.ID, key: id, job: &ports.JobDispatch{Job: job, Agent: agent}, agent: impl}, nil
}

// prepareWebhook is a running webhook TaskRun's outside work: record its
// request, or resend one a dead pass interrupted (same Idempotency-Key).
func (c *Controller) prepareWebhook(ctx context.Context, w *ports.WorkflowRecord, r *ports.TaskRunRecord, now time.Time) (bool, *send) {
	if r.Delivery != nil && !r.Delivery.SentAt.IsZero() {
		return false, nil
	}
	var hook, plain workflow.Webhook
	if b, err := json.Marshal(r.Dispatch["webhook"]); err == nil && json.Unmarshal(b, &plain) == nil && plain.URL != "" {
		ctx = ports.WithSecretDestination(ctx, plain.URL) // its secrets go there only
	}
	if err := c.block(ctx, w, r, "webhook", &hook); err != nil {
		end(r, workflow.TaskFailed, now, "webhook: "+err.Error())
		return true, nil
	}
	if c.Webhooks == nil {
		end(r, workflow.TaskFailed, now, "no webhook sender is configured")
		return true, nil
	}
	key := JobID(w.ID, r.ID, r.Attempt)
	s := &send{run: r.ID, key: key, hook: &ports.WebhookRequest{URL: hook.URL, Method: hook.Method, Headers: hook.Headers,
		Body: hook.Body, IdempotencyKey: key}}
	if r.Delivery == nil || r.Delivery.Key != key {
		r.Delivery = &ports.Delivery{Key: key, RecordedAt: now}
		return true, s
	}
	return false, s
}

// deliverAll makes the recorded sends and writes what came back into their
// TaskRuns (settleAll), starting from the runs as the pass stored them
// (known). It returns the records written when that first write held (at
// their new versions), and fresh false when it did not: the runs had been
// written meanwhile (a lease renewal, an approval, another process) and
// were read again.
func (c *Controller) deliverAll(ctx context.Context, w *ports.WorkflowRecord, sends []send, known runGetter) ([]ports.TaskRunRecord, bool, error) {
	fs := make([]func(r *ports.TaskRunRecord, now time.Time), len(sends))
	for i := range sends {
		fs[i] = c.deliver(ctx, w, &sends[i])
	}
	return c.settleAll(ctx, w.ID, sends, fs, known)
}

// deliver makes a recorded send and returns what to write into its
// TaskRun.
func (c *Controller) deliver(ctx context.Context, w *ports.WorkflowRecord, s *send) func(r *ports.TaskRunRecord, now time.Time) {
	if s.hook != nil {
		resp, err := c.Webhooks.Send(ctx, *s.hook)
		return func(r *ports.TaskRunRecord, now time.Time) {
			r.Delivery.SentAt = now
			if err != nil {
				end(r, workflow.TaskFailed, now, err.Error())
				return
			}
			out := map[string]any{}
			if len(resp.Body) > 0 {
				_ = json.Unmarshal(resp.Body, &out) // a body that is not an object gives no outputs
			}
			out["status"] = resp.Status
			r.Outputs = out
			msg := "webhook answered " + strconv.Itoa(resp.Status)
			if resp.Status < 200 || resp.Status > 299 {
				end(r, workflow.TaskFailed, now, msg)
				return
			}
			end(r, workflow.TaskSucceeded, now, msg)
		}
	}
	var res ports.JobDispatchResult
	var err error
	if s.resume {
		res, err = ports.ResumerOf(s.agent).ResumeJob(ctx, *s.job)
	} else {
		res, err = s.agent.Dispatch(ctx, *s.job)
	}
	if err != nil && !errors.Is(err, release.ErrInvalid) {
		c.Logger.Warn("workflow job dispatch failed; the next pass retries", "workflow", w.ID, "task_run", s.run, "job", s.key,
			"resume", s.resume, "error", err)
	}
	return func(r *ports.TaskRunRecord, now time.Time) {
		switch {
		case errors.Is(err, release.ErrInvalid):
			end(r, workflow.TaskFailed, now, err.Error())
		case err != nil && s.resume:
			// Its run may go on: the lease runs out again and a pass
			// resumes it then.
		case err != nil:
			// The agent started nothing: the next pass records it anew.
			r.JobID, r.Delivery = "", nil
		default:
			r.Delivery.SentAt = now
			if lease := ports.JobLeaseOf(s.agent); lease > 0 && now.Add(lease).After(r.Delivery.LeaseUntil) {
				// The lease runs from the agent's acceptance: a send slower
				// than the lease must not end the job it started as lost.
				r.Delivery.LeaseUntil = now.Add(lease)
			}
			if r.ExternalID == "" {
				r.ExternalID = res.ExternalID
			}
			if res.Status.IsTerminal() {
				end(r, jobPhase(res.Status), now, res.Message)
			}
		}
	}
}

// runGetter reads a TaskRun of the workflow at hand.
type runGetter func(ctx context.Context, id string) (ports.TaskRunRecord, error)

// settleAll applies fs[i] to sends[i]'s TaskRun while it is still running
// with that send's Delivery, and writes them in one compare-and-swap batch
// in one transaction: first over the runs as known (the pass's own
// write: agents' reports go to the inbox and write no TaskRun), then,
// after a lost batch, over the runs read again, twice. After that it
// settles the sends one by one. It returns the records written by the
// first try, with fresh true, else fresh false.
func (c *Controller) settleAll(ctx context.Context, workflowID string, sends []send, fs []func(r *ports.TaskRunRecord, now time.Time), known runGetter) ([]ports.TaskRunRecord, bool, error) {
	if len(sends) == 0 {
		return nil, true, nil
	}
	written, err := c.settle(ctx, workflowID, sends, fs, known)
	if !errors.Is(err, ports.ErrConflict) {
		return written, err == nil, err
	}
	read := func(ctx context.Context, id string) (ports.TaskRunRecord, error) {
		return c.Store.TaskRunGet(ctx, workflowID, id)
	}
	for range 2 {
		if _, err = c.settle(ctx, workflowID, sends, fs, read); !errors.Is(err, ports.ErrConflict) {
			return nil, false, err
		}
	}
	if len(sends) < 2 {
		return nil, false, err
	}
	for i := range sends {
		for range 5 {
			if _, err = c.settle(ctx, workflowID, sends[i:i+1], fs[i:i+1], read); !errors.Is(err, ports.ErrConflict) {
				break
			}
		}
		if err != nil {
			return nil, false, err
		}
	}
	return nil, false, nil
}

// settle is one try of settleAll's batch over the runs get returns; it
// returns the records written, at their new versions.
func (c *Controller) settle(ctx context.Context, workflowID string, sends []send, fs []func(r *ports.TaskRunRecord, now time.Time), get runGetter) ([]ports.TaskRunRecord, error) {
	var batch []ports.TaskRunRecord
	err := c.inTx(ctx, func(ctx context.Context) error {
		now := c.Clock.Now()
		batch = make([]ports.TaskRunRecord, 0, len(sends))
		for i := range sends {
			s := &sends[i]
			r, err := get(ctx, s.run)
			if err != nil {
				return fmt.Errorf("record send %s: %w", s.key, err)
			}
			if r.Phase != workflow.TaskRunning || r.Delivery == nil || r.Delivery.Key != s.key {
				continue
			}
			d := *r.Delivery
			r.Delivery = &d
			fs[i](&r, now)
			batch = append(batch, r)
		}
		if len(batch) == 0 {
			return nil
		}
		if err := c.Store.TaskRunsSave(ctx, workflowID, batch); err != nil {
			return fmt.Errorf("record %d sends: %w", len(batch), err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range batch {
		batch[i].Version++
	}
	return batch, nil
}
