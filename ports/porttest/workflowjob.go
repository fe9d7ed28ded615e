package porttest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// WorkflowJobs is the conformance suite of ports.WorkflowJobs: the stores
// newStore returns must implement it. Subtests run in parallel.
func WorkflowJobs(t *testing.T, newStore func(t *testing.T) ports.WorkflowStore) {
	t.Helper()
	setup := func(t *testing.T) (*testing.T, context.Context, ports.WorkflowJobs) {
		t.Parallel()
		s, ok := newStore(t).(ports.WorkflowJobs)
		require.True(t, ok, "the store is no ports.WorkflowJobs")
		return t, t.Context(), s
	}
	t.Run("CreateOnce", func(t *testing.T) { wjCreateOnce(setup(t)) })
	t.Run("TakeOnce", func(t *testing.T) { wjTakeOnce(setup(t)) })
	t.Run("HeartbeatAndStale", func(t *testing.T) { wjHeartbeatAndStale(setup(t)) })
	t.Run("ReportEnds", func(t *testing.T) { wjReportEnds(setup(t)) })
	t.Run("List", func(t *testing.T) { wjList(setup(t)) })
	t.Run("ConcurrentTakes", func(t *testing.T) { wjConcurrentTakes(setup(t)) })
}

// wjJob is a pending job of task run of workflow wf for agent, created at
// minute i; a workflow "rel-*" runs a release on target D:E:R.
func wjJob(wf, run, agent string, i int) ports.JobRow {
	j := ports.JobRow{Job: release.Job{ID: "wf/" + wf + "/" + run + "/1", JobAgentID: agent, Status: release.JobPending,
		CreatedAt: relAt(i), JobAgentConfig: map[string]any{"lease": "30s"}},
		Workflow: &ports.WorkflowJobRef{ID: wf, Task: run, TaskRunID: run, Attempt: 1}}
	if len(wf) > 4 && wf[:4] == "rel-" {
		j.ReleaseID, j.TargetKey, j.VersionID, j.Workflow.WorkspaceID = "rel1", "D:E:R", "v1", "ws1"
	}
	return j
}

func wjCreate(t *testing.T, ctx context.Context, s ports.WorkflowJobs, j ports.JobRow) ports.JobRow {
	t.Helper()
	row, created, err := s.WorkflowJobCreate(ctx, j)
	require.NoError(t, err)
	require.True(t, created)
	return row
}

func wjTake(ctx context.Context, s ports.WorkflowJobs, agent, taker string, now time.Time) (ports.JobRow, error) {
	return s.WorkflowJobTake(ctx, ports.JobTakeParams{AgentID: agent, Settings: takeSettings, Taker: taker}, now)
}

// wjCreateOnce: a job is created once per id; a second create returns the
// stored one; bad jobs are refused naming the field.
func wjCreateOnce(t *testing.T, ctx context.Context, s ports.WorkflowJobs) {
	j := wjJob("rel-w1", "deploy", "agent1", 1)
	row := wjCreate(t, ctx, s, j)
	require.Equal(t, int64(1), row.Version)
	require.Equal(t, relNorm(j.CreatedAt), row.CreatedAt.UTC())
	again := j
	again.Status = release.JobFailure
	got, created, err := s.WorkflowJobCreate(ctx, again)
	require.NoError(t, err)
	require.False(t, created, "an id already stored is not created again")
	require.Equal(t, release.JobPending, got.Status, "the stored job is returned")
	read, err := s.WorkflowJobGet(ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, &ports.WorkflowJobRef{ID: "rel-w1", Task: "deploy", TaskRunID: "deploy", Attempt: 1, WorkspaceID: "ws1"}, read.Workflow)
	require.Equal(t, "rel1", read.ReleaseID)
	require.Equal(t, "v1", read.VersionID)
	_, err = s.WorkflowJobGet(ctx, "wf/none/x/1")
	require.ErrorIs(t, err, ports.ErrNotFound)

	for field, mut := range map[string]func(j *ports.JobRow){
		"workflow":     func(j *ports.JobRow) { j.Workflow = nil },
		"job_agent_id": func(j *ports.JobRow) { j.JobAgentID = "" },
		"workflow.id":  func(j *ports.JobRow) { j.Workflow.ID = "a/b" },
	} {
		bad := wjJob("w-bad", "t", "agent1", 1)
		mut(&bad)
		_, _, err := s.WorkflowJobCreate(ctx, bad)
		require.ErrorIs(t, err, release.ErrInvalid, field)
		require.ErrorContains(t, err, field)
	}
}

// wjTakeOnce: the oldest takeable job of the agent first, each once; a
// second take of a taken job gets nothing while its lease runs; at its
// end it is handed out again, up to the bound.
func wjTakeOnce(t *testing.T, ctx context.Context, s ports.WorkflowJobs) {
	wjCreate(t, ctx, s, wjJob("w2", "b", "agent1", 2))
	wjCreate(t, ctx, s, wjJob("w1", "a", "agent1", 1))
	wjCreate(t, ctx, s, wjJob("w0", "o", "agent2", 0))
	now := relNorm(relAt(10))
	for _, want := range []string{"wf/w1/a/1", "wf/w2/b/1"} {
		got, err := wjTake(ctx, s, "agent1", "host-1", now)
		require.NoError(t, err)
		require.Equal(t, want, got.ID, "the oldest takeable job first")
		require.Equal(t, release.JobInProgress, got.Status)
		require.Equal(t, &release.JobTake{HandOut: 1, MaxHandOuts: 2, Taker: "host-1", TakenAt: now}, normTake(got.Take))
		require.Equal(t, now.Add(takeSettings.Lease), got.LeaseUntil.UTC())
		require.Equal(t, int64(2), got.Version, "one write")
		require.NotNil(t, got.Workflow, "the workflow stays")
		stored, err := s.WorkflowJobGet(ctx, want)
		require.NoError(t, err)
		require.Equal(t, got.Version, stored.Version)
		require.Equal(t, 1, stored.Take.HandOut)
	}
	_, err := wjTake(ctx, s, "agent1", "host-2", now.Add(time.Second))
	require.ErrorIs(t, err, ports.ErrNotFound, "a second take of a taken job gets nothing")
	got, err := wjTake(ctx, s, "agent2", "host-2", now)
	require.NoError(t, err)
	require.Equal(t, "wf/w0/o/1", got.ID, "agents take only their own jobs")

	later := now.Add(takeSettings.Lease)
	again, err := wjTake(ctx, s, "agent1", "host-3", later)
	require.NoError(t, err)
	require.Equal(t, "wf/w1/a/1", again.ID, "a lease that ran out hands the job out again")
	require.Equal(t, 2, again.Take.HandOut)
	_, err = wjTake(ctx, s, "agent1", "host-3", later)
	require.NoError(t, err, "the second job too")
	_, err = wjTake(ctx, s, "agent1", "host-4", later.Add(time.Hour))
	require.ErrorIs(t, err, ports.ErrNotFound, "no hand-out left")
	_, err = s.WorkflowJobTake(ctx, ports.JobTakeParams{AgentID: "agent1", Settings: takeSettings}, now)
	require.ErrorIs(t, err, release.ErrInvalid, "a take names its taker")
}

func normTake(t *release.JobTake) *release.JobTake {
	if t == nil {
		return nil
	}
	c := *t
	c.TakenAt = c.TakenAt.UTC()
	return &c
}

// wjHeartbeatAndStale: a write at the stored version extends the lease; a
// write at a stale version (a fenced taker's) is refused and changes
// nothing; the workflow and creation time are kept.
func wjHeartbeatAndStale(t *testing.T, ctx context.Context, s ports.WorkflowJobs) {
	wjCreate(t, ctx, s, wjJob("rel-w", "t", "agent1", 1))
	now := relNorm(relAt(10))
	taken, err := wjTake(ctx, s, "agent1", "h", now)
	require.NoError(t, err)
	next := taken.Job
	next.LeaseUntil = taken.LeaseUntil.Add(time.Minute)
	next.ReleaseID, next.CreatedAt = "other", relAt(50)
	v, err := s.WorkflowJobUpdate(ctx, next, taken.Version, now.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, taken.Version+1, v)
	stored, err := s.WorkflowJobGet(ctx, taken.ID)
	require.NoError(t, err)
	require.Equal(t, relNorm(taken.LeaseUntil.Add(time.Minute)), stored.LeaseUntil.UTC(), "the heartbeat extends the lease")
	require.Equal(t, "rel1", stored.ReleaseID, "the release is kept")
	require.Equal(t, relNorm(relAt(1)), stored.CreatedAt.UTC(), "the creation time is kept")
	require.Equal(t, "rel-w", stored.Workflow.ID)

	stale := taken.Job
	stale.Status = release.JobSuccessful
	_, err = s.WorkflowJobUpdate(ctx, stale, taken.Version, now)
	require.ErrorIs(t, err, ports.ErrConflict, "a stale version is refused")
	_, err = s.WorkflowJobUpdate(ctx, release.Job{ID: "wf/x/y/1", JobAgentID: "a", Status: release.JobPending}, 1, now)
	require.ErrorIs(t, err, ports.ErrNotFound)
	stored, err = s.WorkflowJobGet(ctx, taken.ID)
	require.NoError(t, err)
	require.Equal(t, release.JobInProgress, stored.Status, "nothing changed")
	require.Equal(t, v, stored.Version)
}

// wjReportEnds: a terminal report ends the job; it is never taken again.
func wjReportEnds(t *testing.T, ctx context.Context, s ports.WorkflowJobs) {
	wjCreate(t, ctx, s, wjJob("w", "t", "agent1", 1))
	now := relNorm(relAt(10))
	taken, err := wjTake(ctx, s, "agent1", "h", now)
	require.NoError(t, err)
	done := taken.Job
	done.Status, done.CompletedAt, done.Message = release.JobSuccessful, now.Add(time.Second), "ok"
	_, err = s.WorkflowJobUpdate(ctx, done, taken.Version, now.Add(time.Second))
	require.NoError(t, err)
	_, err = wjTake(ctx, s, "agent1", "h", now.Add(time.Hour))
	require.ErrorIs(t, err, ports.ErrNotFound, "an ended job is never taken")
	rows, err := s.WorkflowJobList(ctx, ports.JobListParams{Statuses: []release.JobStatus{release.JobSuccessful}})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, "ok", rows[0].Message)
}

// wjList: newest first, every filter, cursor paging without gaps or
// repeats.
func wjList(t *testing.T, ctx context.Context, s ports.WorkflowJobs) {
	var all []string
	for i := range 7 {
		wf := fmt.Sprintf("w%d", i)
		if i%2 == 0 {
			wf = "rel-" + wf
		}
		agent := "agent1"
		if i == 3 {
			agent = "agent2"
		}
		all = append([]string{"wf/" + wf + "/t/1"}, all...)
		wjCreate(t, ctx, s, wjJob(wf, "t", agent, i%3)) // equal times: ids break ties
	}
	rows, err := s.WorkflowJobList(ctx, ports.JobListParams{})
	require.NoError(t, err)
	require.Len(t, rows, 7)
	for i := 1; i < len(rows); i++ {
		a, b := rows[i-1], rows[i]
		require.True(t, a.CreatedAt.After(b.CreatedAt) || a.CreatedAt.Equal(b.CreatedAt) && a.ID > b.ID, "newest first")
	}
	var paged []string
	var after *ports.NewestKey
	for {
		page, err := s.WorkflowJobList(ctx, ports.JobListParams{After: after, Limit: 2})
		require.NoError(t, err)
		for _, r := range page {
			paged = append(paged, r.ID)
		}
		if len(page) < 2 {
			break
		}
		last := page[len(page)-1]
		after = &ports.NewestKey{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	want := make([]string, len(rows))
	for i := range rows {
		want[i] = rows[i].ID
	}
	require.Equal(t, want, paged, "pages cover the list once, in order")
	require.ElementsMatch(t, all, want)

	for name, c := range map[string]struct {
		p    ports.JobListParams
		want int
	}{
		"agent":       {ports.JobListParams{JobAgentID: "agent2"}, 1},
		"deployment":  {ports.JobListParams{DeploymentID: "D"}, 4},
		"environment": {ports.JobListParams{EnvironmentID: "E", ResourceID: "R"}, 4},
		"version":     {ports.JobListParams{VersionID: "v1"}, 4},
		"workspace":   {ports.JobListParams{WorkspaceID: "ws1"}, 4},
		"other ws":    {ports.JobListParams{WorkspaceID: "ws2"}, 0},
		"status":      {ports.JobListParams{Statuses: []release.JobStatus{release.JobPending}}, 7},
		"no status":   {ports.JobListParams{Statuses: []release.JobStatus{release.JobFailure}}, 0},
	} {
		rows, err := s.WorkflowJobList(ctx, c.p)
		require.NoError(t, err, name)
		require.Len(t, rows, c.want, name)
	}
	_, err = s.WorkflowJobList(ctx, ports.JobListParams{Statuses: []release.JobStatus{"bogus"}})
	require.ErrorIs(t, err, release.ErrInvalid)
}

// wjConcurrentTakes: concurrent takers never get the same job.
func wjConcurrentTakes(t *testing.T, ctx context.Context, s ports.WorkflowJobs) {
	const jobs, takers = 12, 6
	for i := range jobs {
		wjCreate(t, ctx, s, wjJob(fmt.Sprintf("w%02d", i), "t", "agent1", i))
	}
	now := relNorm(relAt(100))
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, takers)
	for k := range takers {
		wg.Go(func() {
			for {
				got, err := wjTake(ctx, s, "agent1", fmt.Sprintf("h%d", k), now)
				if errors.Is(err, ports.ErrNotFound) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				seen[got.ID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, seen, jobs, "every job taken")
	for id, n := range seen {
		require.Equal(t, 1, n, "job %s handed out once", id)
	}
}
