package porttest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// relMove updates a stored job's status and fails the test on error.
func relMove(t testT, e *relEnv, id string, to release.JobStatus, edit ...func(*release.Job)) {
	t.Helper()
	row := relGetJob(t, e, id)
	row.Status = to
	for _, f := range edit {
		f(&row.Job)
	}
	_, err := e.s.JobUpdate(e.ctx, row.Job, row.Version)
	require.NoError(t, err, "move %s to %s", id, to)
}

func relJobByExternalID(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	withExt := func(j release.Job, agent, ext string) release.Job {
		j.JobAgentID, j.ExternalID = agent, ext
		return j
	}
	r1 := f.release(tgt(relD1, relE1, relR1), "v1")
	r2 := f.release(tgt(relD1, relE2, relR1), "v2")
	relCreateJob(t, e, withExt(relJob("j1", r1, release.JobInProgress, relAt(5)), relAgent, "ext-1"))
	relCreateJob(t, e, withExt(relJob("j2", r2, release.JobInProgress, relAt(8)), relAgent, "ext-1"))
	relCreateJob(t, e, withExt(relJob("j0", r1, release.JobInProgress, relAt(8)), relAgent, "ext-1"))
	relCreateJob(t, e, withExt(relJob("j3", r1, release.JobInProgress, relAt(9)), "agent2", "ext-1"))
	relCreateJob(t, e, relJob("j4", r1, release.JobPending, relAt(10)))
	byExt := func(agent, ext string) string {
		t.Helper()
		row, err := e.s.JobByExternalID(e.ctx, agent, ext)
		require.NoError(t, err, "%s/%s", agent, ext)
		require.Equal(t, relGetJob(t, e, row.ID), row)
		return row.ID
	}
	require.Equal(t, "j2", byExt(relAgent, "ext-1"), "the newest, by (created_at desc, id desc)")
	require.Equal(t, "j3", byExt("agent2", "ext-1"), "an external id is the agent's own")

	_, err := e.s.JobByExternalID(e.ctx, relAgent, "ext-none")
	require.ErrorIs(t, err, ports.ErrNotFound)
	_, err = e.s.JobByExternalID(e.ctx, "agent3", "ext-1")
	require.ErrorIs(t, err, ports.ErrNotFound)
	_, err = e.s.JobByExternalID(e.ctx, relAgent, "")
	requireInvalid(t, err, "external_id")

	// External ids follow updates.
	relMove(t, e, "j2", release.JobInProgress, func(j *release.Job) { j.ExternalID = "ext-2" })
	require.Equal(t, "j0", byExt(relAgent, "ext-1"))
	require.Equal(t, "j2", byExt(relAgent, "ext-2"))
	relMove(t, e, "j4", release.JobQueued, func(j *release.Job) { j.ExternalID = "ext-1" })
	require.Equal(t, "j4", byExt(relAgent, "ext-1"))
	relMove(t, e, "j4", release.JobQueued, func(j *release.Job) { j.JobAgentID = "agent2" })
	require.Equal(t, "j0", byExt(relAgent, "ext-1"), "a job moved to another agent")
	require.Equal(t, "j4", byExt("agent2", "ext-1"))
}

func relJobsByTarget(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	target := tgt(relD1, relE1, relR1)
	r1, r2 := f.release(target, "v1"), f.release(target, "v2")
	relCreateJob(t, e, relJob("ja", r1, release.JobSuccessful, relAt(1)))
	relCreateJob(t, e, relJob("jb", r2, release.JobFailure, relAt(3)))
	relCreateJob(t, e, relJob("jc", r1, release.JobPending, relAt(3)))
	relCreateJob(t, e, relJob("jd", r2, release.JobCancelled, relAt(2)))
	relCreateJob(t, e, relJob("je", f.release(tgt(relD1, relE1, relR2), "v1"), release.JobPending, relAt(9)))
	relCreateJob(t, e, relJob("jf", f.release(tgt(relD1, relE2, relR1), "v1"), release.JobPending, relAt(9)))
	for _, c := range []struct {
		limit int
		want  []string
	}{
		{0, []string{"jc", "jb", "jd", "ja"}},
		{-1, []string{"jc", "jb", "jd", "ja"}},
		{2, []string{"jc", "jb"}},
		{4, []string{"jc", "jb", "jd", "ja"}},
		{9, []string{"jc", "jb", "jd", "ja"}},
	} {
		rows, err := e.s.JobsByTarget(e.ctx, target, c.limit)
		require.NoError(t, err)
		require.Equal(t, c.want, relJobIDs(rows), "limit %d", c.limit)
	}
	rows, err := e.s.JobsByTarget(e.ctx, target, 1)
	require.NoError(t, err)
	require.Equal(t, relGetJob(t, e, "jc"), rows[0])
	rows, err = e.s.JobsByTarget(e.ctx, tgt(relD2, relE1, relR1), 0)
	require.NoError(t, err)
	require.Empty(t, rows)
}

func relJobsActive(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	ta, ta2, ta3, tb := tgt(relD1, relE1, relR1), tgt(relD1, relE1, relR2), tgt(relD1, relE2, relR1), tgt(relD2, relE1, relR1)
	relCreateJob(t, e, relJob("j1", f.release(ta, "v1"), release.JobPending, relAt(1)))
	relCreateJob(t, e, relJob("j2", f.release(ta, "v1"), release.JobSuccessful, relAt(2)))
	relCreateJob(t, e, relJob("j3", f.release(ta, "v2"), release.JobInProgress, relAt(3)))
	relCreateJob(t, e, relJob("j4", f.release(ta, "v2"), release.JobQueued, relAt(4)))
	relCreateJob(t, e, relJob("j5", f.release(ta2, "v1"), release.JobActionRequired, relAt(5)))
	relCreateJob(t, e, relJob("j6", f.release(ta2, "v1"), release.JobFailure, relAt(6)))
	relCreateJob(t, e, relJob("j7", f.release(ta3, "v1"), release.JobPending, relAt(7)))
	relCreateJob(t, e, relJob("j8", f.release(tb, "v3"), release.JobPending, relAt(8)))
	active := func(target release.ReleaseTarget) []string {
		t.Helper()
		rows, err := e.s.JobsActiveByTarget(e.ctx, target)
		require.NoError(t, err)
		for i := range rows {
			require.Equal(t, relGetJob(t, e, rows[i].ID), rows[i])
		}
		return relJobIDs(rows)
	}
	counts := func(target release.ReleaseTarget) ports.JobActiveCounts {
		t.Helper()
		c, err := e.s.JobsActiveCount(e.ctx, target)
		require.NoError(t, err)
		return c
	}
	require.Equal(t, []string{"j4", "j3", "j1"}, active(ta), "active only, newest first")
	require.Equal(t, []string{"j5"}, active(ta2))
	require.Empty(t, active(tgt(relD1, relE1, relR3)))
	require.Equal(t, ports.JobActiveCounts{Target: 3, Environment: 4}, counts(ta), "the environment counts the deployment's jobs on every resource")
	require.Equal(t, ports.JobActiveCounts{Target: 1, Environment: 4}, counts(ta2))
	require.Equal(t, ports.JobActiveCounts{Target: 0, Environment: 4}, counts(tgt(relD1, relE1, relR3)))
	require.Equal(t, ports.JobActiveCounts{Target: 1, Environment: 1}, counts(ta3), "another environment")
	require.Equal(t, ports.JobActiveCounts{Target: 1, Environment: 1}, counts(tb), "another deployment in the same environment")

	relMove(t, e, "j3", release.JobSuccessful)
	relMove(t, e, "j1", release.JobQueued)
	relMove(t, e, "j5", release.JobCancelled)
	require.Equal(t, []string{"j4", "j1"}, active(ta))
	require.Empty(t, active(ta2))
	require.Equal(t, ports.JobActiveCounts{Target: 2, Environment: 2}, counts(ta))
	require.Equal(t, ports.JobActiveCounts{Target: 0, Environment: 2}, counts(ta2))
}

func relJobsLatest(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	t1, t2, t3, t4 := tgt(relD1, relE1, relR1), tgt(relD1, relE1, relR2), tgt(relD1, relE2, relR1), tgt(relD2, relE1, relR1)
	relCreateJob(t, e, relJob("a1", f.release(t1, "v1"), release.JobSuccessful, relAt(1)))
	relCreateJob(t, e, relJob("a2", f.release(t1, "v2"), release.JobFailure, relAt(3)))
	relCreateJob(t, e, relJob("a3", f.release(t1, "v2"), release.JobPending, relAt(4)))
	relCreateJob(t, e, relJob("b1", f.release(t2, "v1"), release.JobSuccessful, relAt(2)))
	relCreateJob(t, e, relJob("c1", f.release(t3, "v2"), release.JobSuccessful, relAt(5)))
	relCreateJob(t, e, relJob("d1", f.release(t4, "v3"), release.JobSuccessful, relAt(6)))
	terminal := ports.TerminalJobStatuses()
	for _, c := range []struct {
		name string
		p    ports.JobsLatestParams
		want []string
	}{
		{"deployment", ports.JobsLatestParams{DeploymentID: relD1}, []string{"a3", "b1", "c1"}},
		{"deployment, terminal", ports.JobsLatestParams{DeploymentID: relD1, Statuses: terminal}, []string{"a2", "b1", "c1"}},
		{"progression", ports.JobsLatestParams{DeploymentID: relD1, VersionID: "v2", Statuses: terminal}, []string{"a2", "c1"}},
		{"version", ports.JobsLatestParams{VersionID: "v1"}, []string{"a1", "b1"}},
		{"deployment in environment", ports.JobsLatestParams{DeploymentID: relD1, EnvironmentID: relE1}, []string{"a3", "b1"}},
		{"dependency", ports.JobsLatestParams{ResourceID: relR1, Statuses: []release.JobStatus{release.JobSuccessful}}, []string{"a1", "c1", "d1"}},
		{"resource in environment", ports.JobsLatestParams{ResourceID: relR1, EnvironmentID: relE1}, []string{"a3", "d1"}},
		{"no match", ports.JobsLatestParams{DeploymentID: relD2, Statuses: []release.JobStatus{release.JobFailure}}, []string{}},
		{"unknown deployment", ports.JobsLatestParams{DeploymentID: "d-none"}, []string{}},
	} {
		rows, err := e.s.JobsLatest(e.ctx, c.p)
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, relJobIDs(rows), c.name)
		for i := range rows {
			require.Equal(t, relGetJob(t, e, rows[i].ID), rows[i], c.name)
		}
	}
	_, err := e.s.JobsLatest(e.ctx, ports.JobsLatestParams{EnvironmentID: relE1})
	requireInvalid(t, err, "deployment_id")
	_, err = e.s.JobsLatest(e.ctx, ports.JobsLatestParams{DeploymentID: relD1, Statuses: []release.JobStatus{release.JobFailure, "done"}})
	requireInvalid(t, err, "statuses[1]")

	// The newest job moves on update of its status.
	relMove(t, e, "a3", release.JobFailure)
	rows, err := e.s.JobsLatest(e.ctx, ports.JobsLatestParams{DeploymentID: relD1, Statuses: terminal})
	require.NoError(t, err)
	require.Equal(t, []string{"a3", "b1", "c1"}, relJobIDs(rows))
}

func relTargetJobState(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	target := tgt(relD1, relE1, relR1)
	r1, r2 := f.release(target, "v1"), f.release(target, "v2")
	state := func() (active, successful string) {
		t.Helper()
		st, err := e.s.TargetJobState(e.ctx, target)
		require.NoError(t, err)
		for _, jv := range []*ports.JobWithVersion{st.Active, st.Successful} {
			if jv == nil {
				continue
			}
			require.Equal(t, relGetJob(t, e, jv.Job.ID), jv.Job)
			v, err := e.s.VersionGet(e.ctx, jv.Job.VersionID)
			require.NoError(t, err)
			require.Equal(t, v, jv.Version, "the job's version as stored now")
		}
		if st.Active != nil {
			active = st.Active.Job.ID
		}
		if st.Successful != nil {
			successful = st.Successful.Job.ID
		}
		if b, ok := e.s.(ports.JobStateBatcher); ok {
			// Many targets in one call: each as TargetJobState reads it.
			ts := []release.ReleaseTarget{target, tgt(relD1, relE1, relR2), tgt(relD1, relE1, "no-jobs")}
			many, err := b.TargetJobStateMany(e.ctx, ts)
			require.NoError(t, err)
			for _, x := range ts {
				one, err := e.s.TargetJobState(e.ctx, x)
				require.NoError(t, err)
				require.Equal(t, one, many[x], "TargetJobStateMany of %s", x)
			}
		}
		return active, successful
	}
	requireState := func(wantActive, wantSuccessful, msg string) {
		t.Helper()
		a, s := state()
		require.Equal(t, wantActive, a, "active: %s", msg)
		require.Equal(t, wantSuccessful, s, "successful: %s", msg)
	}
	requireState("", "", "no jobs")
	relCreateJob(t, e, relJob("j1", r1, release.JobSuccessful, relAt(1)))
	requireState("", "j1", "one successful job")
	relCreateJob(t, e, relJob("j2", r2, release.JobPending, relAt(4)))
	relCreateJob(t, e, relJob("j3", r2, release.JobSuccessful, relAt(3)))
	relCreateJob(t, e, relJob("j4", r1, release.JobSuccessful, relAt(0)))
	relCreateJob(t, e, relJob("j5", r1, release.JobQueued, relAt(-1)))
	relCreateJob(t, e, relJob("j6", r2, release.JobFailure, relAt(9)))
	relCreateJob(t, e, relJob("j7", f.release(tgt(relD1, relE1, relR2), "v2"), release.JobSuccessful, relAt(9)))
	requireState("j2", "j3", "the newest of each")

	require.NoError(t, e.s.VersionUpdateStatus(e.ctx, "v2", release.VersionRejected))
	st, err := e.s.TargetJobState(e.ctx, target)
	require.NoError(t, err)
	require.Equal(t, release.VersionRejected, st.Active.Version.Status)
	require.Equal(t, "v2", st.Active.Version.ID)

	relMove(t, e, "j2", release.JobSuccessful)
	requireState("j5", "j2", "the active job succeeded")
	relMove(t, e, "j5", release.JobCancelled)
	requireState("", "j2", "no active job left")
}

// relJobListWalk reads every job matching p through JobList, limit at a
// time, each page continuing after the last job of the one before.
func relJobListWalk(t testT, e *relEnv, p ports.JobListParams, limit int) []string {
	t.Helper()
	out := []string{}
	p.Limit, p.After = limit, nil
	for range 100 {
		rows, err := e.s.JobList(e.ctx, p)
		require.NoError(t, err)
		require.LessOrEqual(t, len(rows), limit)
		for i := range rows {
			require.Equal(t, relGetJob(t, e, rows[i].ID), rows[i])
			out = append(out, rows[i].ID)
		}
		if len(rows) < limit {
			return out
		}
		last := rows[len(rows)-1]
		p.After = &ports.NewestKey{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	require.FailNow(t, "no last page after 100 pages")
	return nil
}

func relJobList(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	ctx, s := e.ctx, e.s
	// A second workspace with one target.
	_, err := s.Workspaces().Put(ctx, release.Workspace{ID: "ws9", Name: "Other"}, 0)
	must(t, err)
	_, err = s.Systems().Put(ctx, release.System{ID: "sys9", WorkspaceID: "ws9", Name: "sys9"}, 0)
	must(t, err)
	_, err = s.Deployments().Put(ctx, release.Deployment{ID: "d9", SystemID: "sys9", Name: "d9", Slug: "d9", JobAgentID: relAgent, ResourceSelector: relSelectorAllMatched}, 0)
	must(t, err)
	_, err = s.Environments().Put(ctx, release.Environment{ID: "e9", SystemID: "sys9", Name: "e9", ResourceSelector: relSelectorAllMatched}, 0)
	must(t, err)
	_, err = s.Resources().Put(ctx, release.Resource{ID: "r9", WorkspaceID: "ws9", Kind: "Cluster", Identifier: "id-r9", Name: "r9"}, 0)
	must(t, err)
	relCreateVersions(t, e, relVersion("v9", "d9", relAt(1)))
	w := relStoreRelease(t, e, tgt("d9", "e9", "r9"), "v9")

	t1, t2, t3, t4 := tgt(relD1, relE1, relR1), tgt(relD1, relE1, relR2), tgt(relD1, relE2, relR1), tgt(relD2, relE1, relR1)
	onAgent2 := relJob("a3", f.release(t1, "v2"), release.JobPending, relAt(4))
	onAgent2.JobAgentID = "agent2"
	relCreateJob(t, e, relJob("a1", f.release(t1, "v1"), release.JobSuccessful, relAt(1)))
	relCreateJob(t, e, relJob("a2", f.release(t1, "v2"), release.JobFailure, relAt(3)))
	relCreateJob(t, e, onAgent2)
	relCreateJob(t, e, relJob("b1", f.release(t2, "v1"), release.JobSuccessful, relAt(3))) // ties with a2: id breaks it
	relCreateJob(t, e, relJob("c1", f.release(t3, "v2"), release.JobInProgress, relAt(5)))
	relCreateJob(t, e, relJob("d1", f.release(t4, "v3"), release.JobPending, relAt(6)))
	relCreateJob(t, e, relJob("w1", w, release.JobPending, relAt(2)))
	terminal := ports.TerminalJobStatuses()
	cases := []struct {
		name string
		p    ports.JobListParams
		want []string
	}{
		{"all", ports.JobListParams{}, []string{"d1", "c1", "a3", "b1", "a2", "w1", "a1"}},
		{"status", ports.JobListParams{Statuses: []release.JobStatus{release.JobPending}}, []string{"d1", "a3", "w1"}},
		{"statuses", ports.JobListParams{Statuses: []release.JobStatus{release.JobPending, release.JobSuccessful}}, []string{"d1", "a3", "b1", "w1", "a1"}},
		{"job agent", ports.JobListParams{JobAgentID: "agent2"}, []string{"a3"}},
		{"job agent, pending", ports.JobListParams{JobAgentID: relAgent, Statuses: []release.JobStatus{release.JobPending}}, []string{"d1", "w1"}},
		{"deployment", ports.JobListParams{DeploymentID: relD1}, []string{"c1", "a3", "b1", "a2", "a1"}},
		{"environment", ports.JobListParams{EnvironmentID: relE1}, []string{"d1", "a3", "b1", "a2", "a1"}},
		{"resource", ports.JobListParams{ResourceID: relR1}, []string{"d1", "c1", "a3", "a2", "a1"}},
		{"version", ports.JobListParams{VersionID: "v2"}, []string{"c1", "a3", "a2"}},
		{"workspace", ports.JobListParams{WorkspaceID: relWS}, []string{"d1", "c1", "a3", "b1", "a2", "a1"}},
		{"other workspace", ports.JobListParams{WorkspaceID: "ws9"}, []string{"w1"}},
		{"deployment in environment, terminal", ports.JobListParams{DeploymentID: relD1, EnvironmentID: relE1, Statuses: terminal}, []string{"b1", "a2", "a1"}},
		{"workspace and deployment", ports.JobListParams{WorkspaceID: "ws9", DeploymentID: relD1}, []string{}},
		{"unknown workspace", ports.JobListParams{WorkspaceID: "ws-none"}, []string{}},
		{"unknown deployment", ports.JobListParams{DeploymentID: "d-none"}, []string{}},
		{"unknown agent", ports.JobListParams{JobAgentID: "agent-none"}, []string{}},
	}
	for _, c := range cases {
		for _, limit := range []int{1, 2, 3, 100} {
			require.Equal(t, c.want, relJobListWalk(t, e, c.p, limit), "%s, pages of %d", c.name, limit)
		}
	}
	list := func(p ports.JobListParams) []string {
		t.Helper()
		rows, err := e.s.JobList(e.ctx, p)
		require.NoError(t, err)
		return relJobIDs(rows)
	}
	at3 := relNorm(relAt(3))
	require.Equal(t, []string{"a2", "w1"}, list(ports.JobListParams{After: &ports.NewestKey{CreatedAt: at3, ID: "b1"}, Limit: 2}), "below b1: a2 shares its time")
	require.Equal(t, []string{"b1", "a2"}, list(ports.JobListParams{After: &ports.NewestKey{CreatedAt: at3, ID: "b2"}, Limit: 2}), "a key naming no job continues where it would sit")
	require.Len(t, list(ports.JobListParams{}), 7, "limit zero is the default page size")

	// Between two pages, a job created above the cursor is not on the next
	// page and one below it is; a status change moves a job out of a
	// status filter.
	first := list(ports.JobListParams{Limit: 3})
	require.Equal(t, []string{"d1", "c1", "a3"}, first)
	relCreateJob(t, e, relJob("top", f.release(t1, "v2"), release.JobPending, relAt(9)))
	relCreateJob(t, e, relJob("mid", f.release(t2, "v2"), release.JobPending, relAt(2)))
	a3 := relGetJob(t, e, "a3")
	require.Equal(t, []string{"b1", "a2", "w1", "mid", "a1"}, list(ports.JobListParams{After: &ports.NewestKey{CreatedAt: a3.CreatedAt, ID: a3.ID}}))
	relMove(t, e, "d1", release.JobCancelled)
	require.Equal(t, []string{"top", "a3", "w1", "mid"}, list(ports.JobListParams{Statuses: []release.JobStatus{release.JobPending}}))
	require.Equal(t, []string{"d1"}, list(ports.JobListParams{Statuses: []release.JobStatus{release.JobCancelled}}))

	_, err = e.s.JobList(e.ctx, ports.JobListParams{Statuses: []release.JobStatus{release.JobPending, "done"}})
	requireInvalid(t, err, "statuses[1]")
	_, err = e.s.JobList(e.ctx, ports.JobListParams{After: &ports.NewestKey{CreatedAt: at3}})
	requireInvalid(t, err, "after.id")
}
