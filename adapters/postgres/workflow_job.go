package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

var _ ports.WorkflowJobs = (*WorkflowStore)(nil)

// workflowJobDoc encodes j for the workflow_jobs row, its times at the
// precision the row keeps.
func workflowJobDoc(j *ports.JobRow) (string, error) {
	if err := ports.ValidateWorkflowJob(j); err != nil {
		return "", err
	}
	j.CreatedAt, j.StartedAt, j.CompletedAt = ports.StoredTime(j.CreatedAt), ports.StoredTime(j.StartedAt), ports.StoredTime(j.CompletedAt)
	j.LeaseUntil, j.UpdatedAt = ports.StoredTime(j.LeaseUntil), ports.StoredTime(j.UpdatedAt)
	if j.Take != nil {
		take := *j.Take
		take.TakenAt = ports.StoredTime(take.TakenAt)
		j.Take = &take
	}
	doc, err := release.EncodeText(j)
	return string(doc), err
}

// WorkflowJobCreate inserts j at version 1 unless its id is stored, and
// wakes the takers of every process (the jobs channel) once committed.
func (s *WorkflowStore) WorkflowJobCreate(ctx context.Context, j ports.JobRow) (ports.JobRow, bool, error) {
	op := "create workflow job " + j.ID
	j.Version, j.UpdatedAt = 1, j.CreatedAt
	doc, err := workflowJobDoc(&j)
	if err != nil {
		return ports.JobRow{}, false, fmt.Errorf("%s: %w", op, err)
	}
	t := j.Target()
	res, err := s.db.hotExec(ctx, `INSERT INTO workflow_jobs (id, workflow_id, job_agent_id, status, active, deployment_id,
		environment_id, resource_id, version_id, workspace_id, created_at, version, doc)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 1, $12::jsonb) ON CONFLICT (id) DO NOTHING`,
		j.ID, j.Workflow.ID, j.JobAgentID, string(j.Status), j.Status.IsActive(), t.DeploymentID, t.EnvironmentID, t.ResourceID,
		j.VersionID, j.Workflow.WorkspaceID, j.CreatedAt, doc)
	if err != nil {
		return ports.JobRow{}, false, fmt.Errorf("%s: %w", op, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		row, err := s.WorkflowJobGet(ctx, j.ID)
		return row, false, err
	}
	agent := j.JobAgentID
	s.db.afterCommit(ctx, func() { s.db.pub.publish(jobsChannel, agent) })
	return j, true, nil
}

// WorkflowJobGet reads one workflow job.
func (s *WorkflowStore) WorkflowJobGet(ctx context.Context, id string) (ports.JobRow, error) {
	var doc []byte
	var version int64
	err := scanOne(s.db.hotQuery(ctx, `SELECT doc, version FROM workflow_jobs WHERE id = $1`, id))(&doc, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return ports.JobRow{}, fmt.Errorf("get workflow job %s: %w", id, ports.ErrNotFound)
	}
	if err != nil {
		return ports.JobRow{}, fmt.Errorf("get workflow job %s: %w", id, err)
	}
	var j ports.JobRow
	if err := json.Unmarshal(doc, &j); err != nil {
		return ports.JobRow{}, fmt.Errorf("get workflow job %s: decode: %w", id, err)
	}
	j.Version = version
	return j, nil
}

// WorkflowJobUpdate writes j at the expected version, keeping the job's
// workflow, release and creation time.
func (s *WorkflowStore) WorkflowJobUpdate(ctx context.Context, j release.Job, expected int64, now time.Time) (int64, error) {
	op := "update workflow job " + j.ID
	var v int64
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		var doc []byte
		err := scanOne(s.db.hotQuery(ctx, `SELECT doc, version FROM workflow_jobs WHERE id = $1 FOR UPDATE`, j.ID))(&doc, &v)
		if errors.Is(err, sql.ErrNoRows) {
			return ports.ErrNotFound
		}
		if err != nil {
			return err
		}
		if v != expected {
			return fmt.Errorf("expected version %d, stored %d: %w", expected, v, ports.ErrConflict)
		}
		var row ports.JobRow
		if err := json.Unmarshal(doc, &row); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		created, rel, target := row.CreatedAt, row.ReleaseID, row.TargetKey
		row.Job = j
		row.CreatedAt, row.ReleaseID, row.TargetKey = created, rel, target
		row.Version, row.UpdatedAt = expected+1, now
		next, err := workflowJobDoc(&row)
		if err != nil {
			return err
		}
		if _, err := s.db.hotExec(ctx, `UPDATE workflow_jobs SET status = $2, active = $3, version = $4, doc = $5::jsonb WHERE id = $1`,
			j.ID, string(j.Status), j.Status.IsActive(), row.Version, next); err != nil {
			return err
		}
		v = row.Version
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return v, nil
}

// sqlWorkflowJobTakeable locks the oldest takeable workflow job of an agent
// ($1) at $2, skipping rows another transaction holds: release.Job.Takeable
// over the stored document.
const sqlWorkflowJobTakeable = `SELECT doc, version FROM workflow_jobs j
WHERE j.job_agent_id = $1 AND j.active
	AND ((j.doc->'take') IS NULL AND j.status = 'pending'
		OR (j.doc->'take'->>'hand_out')::int < (j.doc->'take'->>'max_hand_outs')::int
			AND (j.doc->>'lease_until')::timestamptz <= $2)
ORDER BY j.created_at, j.id
LIMIT 1
FOR UPDATE SKIP LOCKED`

// WorkflowJobTake hands out the oldest takeable workflow job of p.AgentID:
// the row is locked with SKIP LOCKED and written in the same transaction.
func (s *WorkflowStore) WorkflowJobTake(ctx context.Context, p ports.JobTakeParams, now time.Time) (ports.JobRow, error) {
	op := "take a workflow job of agent " + p.AgentID
	if err := ports.ValidateJobTake(p); err != nil {
		return ports.JobRow{}, fmt.Errorf("%s: %w", op, err)
	}
	now = ports.StoredTime(now)
	var out ports.JobRow
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		var doc []byte
		var v int64
		err := scanOne(s.db.hotQuery(ctx, sqlWorkflowJobTakeable, p.AgentID, now))(&doc, &v)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("none to take: %w", ports.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if err := json.Unmarshal(doc, &out); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		out.Version = v
		next := out.Taken(now, p.Settings, p.Taker)
		if out.Version, err = s.WorkflowJobUpdate(ctx, next, v, now); err != nil {
			return err
		}
		out.Job, out.UpdatedAt = next, now
		return nil
	})
	if err != nil {
		return ports.JobRow{}, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

// WorkflowJobList lists the workflow jobs matching p, newest first.
func (s *WorkflowStore) WorkflowJobList(ctx context.Context, p ports.JobListParams) ([]ports.JobRow, error) {
	if err := ports.ValidateJobList(&p); err != nil {
		return nil, fmt.Errorf("list workflow jobs: %w", err)
	}
	q := `SELECT doc, version FROM workflow_jobs j WHERE true`
	var args []any
	for _, f := range []struct{ col, v string }{{"j.job_agent_id", p.JobAgentID}, {"j.deployment_id", p.DeploymentID},
		{"j.environment_id", p.EnvironmentID}, {"j.resource_id", p.ResourceID}, {"j.version_id", p.VersionID},
		{"j.workspace_id", p.WorkspaceID}} {
		if f.v != "" {
			args = append(args, f.v)
			q += fmt.Sprintf(` AND %s = $%d`, f.col, len(args))
		}
	}
	if len(p.Statuses) > 0 {
		statuses := make([]string, len(p.Statuses))
		for i, st := range p.Statuses {
			statuses[i] = string(st)
		}
		args = append(args, statuses)
		q += fmt.Sprintf(` AND j.status = ANY($%d::text[])`, len(args))
	}
	if p.After != nil {
		args = append(args, p.After.CreatedAt, p.After.ID)
		q += fmt.Sprintf(` AND (j.created_at, j.id) < ($%d::timestamptz, $%d::text)`, len(args)-1, len(args))
	}
	args = append(args, ports.VersionPageSize(p.Limit))
	q += fmt.Sprintf(` ORDER BY j.created_at DESC, j.id DESC LIMIT $%d`, len(args))
	rows, err := s.db.hotQuery(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list workflow jobs: %w", err)
	}
	defer rows.Close()
	var out []ports.JobRow
	for rows.Next() {
		var doc []byte
		var j ports.JobRow
		if err := rows.Scan(&doc, &j.Version); err != nil {
			return nil, fmt.Errorf("list workflow jobs: %w", err)
		}
		v := j.Version
		if err := json.Unmarshal(doc, &j); err != nil {
			return nil, fmt.Errorf("list workflow jobs: decode: %w", err)
		}
		j.Version = v
		out = append(out, j)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("list workflow jobs: %w", err)
	}
	return out, nil
}
