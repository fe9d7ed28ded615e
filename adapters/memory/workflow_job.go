package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

var _ ports.WorkflowJobs = (*WorkflowStore)(nil)

// WorkflowJobCreate stores j at version 1 unless its id is stored.
func (s *WorkflowStore) WorkflowJobCreate(_ context.Context, j ports.JobRow) (ports.JobRow, bool, error) {
	op := "create workflow job " + j.ID
	if err := ports.ValidateWorkflowJob(&j); err != nil {
		return ports.JobRow{}, false, fmt.Errorf("%s: %w", op, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.jobs[j.ID]; ok {
		row, err := decodeJSON[ports.JobRow](b)
		return row, false, err
	}
	var err error
	if j.Job, err = normJob(j.Job); err != nil {
		return ports.JobRow{}, false, fmt.Errorf("%s: %w", op, err)
	}
	j.UpdatedAt = ports.StoredTime(j.CreatedAt)
	j.Version = 1
	b, err := release.EncodeText(&j)
	if err != nil {
		return ports.JobRow{}, false, fmt.Errorf("%s: %w", op, err)
	}
	s.jobs[j.ID] = b
	s.takers.wake()
	row, err := decodeJSON[ports.JobRow](b)
	if err == nil {
		s.changes.publish(ports.WorkflowJobChanges(nil, &row, row.UpdatedAt)...)
	}
	return row, true, err
}

// WorkflowJobNotify returns a channel woken when a workflow job is
// created, until ctx ends (the PostgreSQL store wakes the release store's
// JobTakeNotify instead, through the jobs channel).
func (s *WorkflowStore) WorkflowJobNotify(ctx context.Context) <-chan struct{} {
	return s.takers.subscribe(ctx)
}

// WorkflowJobGet reads one workflow job.
func (s *WorkflowStore) WorkflowJobGet(_ context.Context, id string) (ports.JobRow, error) {
	s.mu.RLock()
	b, ok := s.jobs[id]
	s.mu.RUnlock()
	if !ok {
		return ports.JobRow{}, fmt.Errorf("get workflow job %s: %w", id, ports.ErrNotFound)
	}
	return decodeJSON[ports.JobRow](b)
}

// WorkflowJobUpdate writes j at the expected version.
func (s *WorkflowStore) WorkflowJobUpdate(_ context.Context, j release.Job, expected int64, now time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updateJob(j, expected, now)
}

// updateJob is WorkflowJobUpdate under the write lock.
func (s *WorkflowStore) updateJob(j release.Job, expected int64, now time.Time) (int64, error) {
	op := "update workflow job " + j.ID
	b, ok := s.jobs[j.ID]
	if !ok {
		return 0, fmt.Errorf("%s: %w", op, ports.ErrNotFound)
	}
	row, err := decodeJSON[ports.JobRow](b)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	if row.Version != expected {
		return 0, fmt.Errorf("%s: expected version %d, stored %d: %w", op, expected, row.Version, ports.ErrConflict)
	}
	before := row
	created, rel, target := row.CreatedAt, row.ReleaseID, row.TargetKey
	if row.Job, err = normJob(j); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	row.CreatedAt, row.ReleaseID, row.TargetKey = created, rel, target
	row.Version, row.UpdatedAt = expected+1, ports.StoredTime(now)
	if err := ports.ValidateWorkflowJob(&row); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	nb, err := release.EncodeText(&row)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	s.jobs[j.ID] = nb
	s.changes.publish(ports.WorkflowJobChanges(&before, &row, row.UpdatedAt)...)
	return row.Version, nil
}

// WorkflowJobTake hands out the oldest takeable job of p.AgentID under the
// write lock.
func (s *WorkflowStore) WorkflowJobTake(_ context.Context, p ports.JobTakeParams, now time.Time) (ports.JobRow, error) {
	op := "take a workflow job of agent " + p.AgentID
	if err := ports.ValidateJobTake(p); err != nil {
		return ports.JobRow{}, fmt.Errorf("%s: %w", op, err)
	}
	now = ports.StoredTime(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	var best *ports.JobRow
	for _, b := range s.jobs {
		row, err := decodeJSON[ports.JobRow](b)
		if err != nil {
			return ports.JobRow{}, fmt.Errorf("%s: %w", op, err)
		}
		if row.JobAgentID == p.AgentID && row.Takeable(now) && (best == nil || jobOrder(&row, best) < 0) {
			best = &row
		}
	}
	if best == nil {
		return ports.JobRow{}, fmt.Errorf("%s: none to take: %w", op, ports.ErrNotFound)
	}
	next := best.Taken(now, p.Settings, p.Taker)
	v, err := s.updateJob(next, best.Version, now)
	if err != nil {
		return ports.JobRow{}, fmt.Errorf("%s: %w", op, err)
	}
	row, err := decodeJSON[ports.JobRow](s.jobs[best.ID])
	if err != nil {
		return ports.JobRow{}, fmt.Errorf("%s: %w", op, err)
	}
	row.Version = v
	return row, nil
}

// WorkflowJobList lists the workflow jobs matching p, newest first.
func (s *WorkflowStore) WorkflowJobList(_ context.Context, p ports.JobListParams) ([]ports.JobRow, error) {
	if err := ports.ValidateJobList(&p); err != nil {
		return nil, fmt.Errorf("list workflow jobs: %w", err)
	}
	s.mu.RLock()
	var out []ports.JobRow
	for _, b := range s.jobs {
		row, err := decodeJSON[ports.JobRow](b)
		if err != nil {
			s.mu.RUnlock()
			return nil, fmt.Errorf("list workflow jobs: %w", err)
		}
		if !ports.MatchesJobList(&row, &p) {
			continue
		}
		if p.After != nil && cmp.Or(row.CreatedAt.Compare(p.After.CreatedAt), strings.Compare(row.ID, p.After.ID)) >= 0 {
			continue
		}
		out = append(out, row)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b ports.JobRow) int { return -jobOrder(&a, &b) })
	if n := ports.VersionPageSize(p.Limit); len(out) > n {
		out = out[:n]
	}
	return out, nil
}
