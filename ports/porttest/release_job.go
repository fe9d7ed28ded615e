package porttest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// relJobFixture is the job tests' world: versions v1, v2 of d1 and v3 of
// d2, and the releases of those versions on the targets the tests use.
type relJobFixture struct {
	// rel[target][version] is the stored release.
	rel map[release.ReleaseTarget]map[string]release.Release
}

// release returns the fixture's release of version on target.
func (f *relJobFixture) release(target release.ReleaseTarget, version string) release.Release {
	return f.rel[target][version]
}

// relJobWorld stores the job tests' world.
func relJobWorld(t testT, e *relEnv) *relJobFixture {
	t.Helper()
	relWorld(t, e)
	relCreateVersions(t, e, relVersion("v1", relD1, relAt(1)), relVersion("v2", relD1, relAt(2)), relVersion("v3", relD2, relAt(3)))
	f := &relJobFixture{rel: map[release.ReleaseTarget]map[string]release.Release{}}
	for _, c := range []struct {
		target   release.ReleaseTarget
		versions []string
	}{
		{tgt(relD1, relE1, relR1), []string{"v1", "v2"}},
		{tgt(relD1, relE1, relR2), []string{"v1", "v2"}},
		{tgt(relD1, relE2, relR1), []string{"v1", "v2"}},
		{tgt(relD2, relE1, relR1), []string{"v3"}},
	} {
		f.rel[c.target] = map[string]release.Release{}
		for _, v := range c.versions {
			f.rel[c.target][v] = relStoreRelease(t, e, c.target, v)
		}
	}
	return f
}

// relJob is a valid job of r created at at.
func relJob(id string, r release.Release, status release.JobStatus, at time.Time) release.Job {
	return release.Job{ID: id, ReleaseID: r.ID, TargetKey: r.Target.Key(), JobAgentID: relAgent, Status: status, CreatedAt: at}
}

// relCreateJob creates job under key id and fails the test unless it was
// created.
func relCreateJob(t testT, e *relEnv, j release.Job) ports.JobRow {
	t.Helper()
	row, created, err := e.s.JobCreate(e.ctx, ports.JobCreateParams{Job: j, IdempotencyKey: "key-" + j.ID})
	require.NoError(t, err, "create job %s", j.ID)
	require.True(t, created, "create job %s", j.ID)
	return row
}

// relJobIDs lists the ids of rows.
func relJobIDs(rows []ports.JobRow) []string {
	out := make([]string, len(rows))
	for i := range rows {
		out[i] = rows[i].ID
	}
	return out
}

// relGetJob reads a job and fails the test on error.
func relGetJob(t testT, e *relEnv, id string) ports.JobRow {
	t.Helper()
	row, err := e.s.JobGet(e.ctx, id)
	require.NoError(t, err)
	return row
}

func relJobCreate(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	r := f.release(tgt(relD1, relE1, relR1), "v2")
	key := ports.JobKey(r.ID, 1)
	t0 := e.clock.Now()
	j := relJob("j1", r, release.JobPending, relAt(5))
	row, created, err := e.s.JobCreate(e.ctx, ports.JobCreateParams{Job: j, IdempotencyKey: key})
	require.NoError(t, err)
	require.True(t, created)
	want := ports.JobRow{Job: j, VersionID: "v2", IdempotencyKey: key, Version: 1, UpdatedAt: relNorm(t0)}
	want.CreatedAt = relNorm(j.CreatedAt)
	require.Equal(t, want, row)
	require.Equal(t, want, relGetJob(t, e, "j1"))
	require.Equal(t, r.Target, row.Target())

	// A retried create with the same key, even under another job id,
	// returns the first job.
	e.clock.Advance(time.Minute)
	for _, retry := range []release.Job{j, relJob("j1-retry", r, release.JobQueued, relAt(6))} {
		row, created, err = e.s.JobCreate(e.ctx, ports.JobCreateParams{Job: retry, IdempotencyKey: key})
		require.NoError(t, err)
		require.False(t, created, "retry as %s", retry.ID)
		require.Equal(t, want, row)
	}
	_, err = e.s.JobGet(e.ctx, "j1-retry")
	require.ErrorIs(t, err, ports.ErrNotFound, "the retry created nothing")

	// The next attempt is another key.
	row, created, err = e.s.JobCreate(e.ctx, ports.JobCreateParams{Job: relJob("j2", r, release.JobPending, relAt(7)), IdempotencyKey: ports.JobKey(r.ID, 2)})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, int64(1), row.Version)
	rows, err := e.s.JobsByTarget(e.ctx, r.Target, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"j2", "j1"}, relJobIDs(rows))
}

func relJobCreateRefused(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	r := f.release(tgt(relD1, relE1, relR1), "v1")
	relCreateJob(t, e, relJob("j1", r, release.JobPending, relAt(5)))
	before := relGetJob(t, e, "j1")

	other := f.release(tgt(relD1, relE1, relR1), "v2")
	_, _, err := e.s.JobCreate(e.ctx, ports.JobCreateParams{Job: relJob("j2", other, release.JobPending, relAt(6)), IdempotencyKey: "key-j1"})
	require.ErrorIs(t, err, ports.ErrConflict, "the key names another release")
	_, _, err = e.s.JobCreate(e.ctx, ports.JobCreateParams{Job: relJob("j1", other, release.JobPending, relAt(6)), IdempotencyKey: "key-new"})
	require.ErrorIs(t, err, ports.ErrConflict, "the job id is taken")

	gone := relJob("j3", r, release.JobPending, relAt(6))
	gone.ReleaseID = "rel-none"
	_, _, err = e.s.JobCreate(e.ctx, ports.JobCreateParams{Job: gone, IdempotencyKey: "key-j3"})
	require.ErrorIs(t, err, ports.ErrNotFound, "a missing release")

	wrongTarget := relJob("j4", r, release.JobPending, relAt(6))
	wrongTarget.TargetKey = tgt(relD1, relE2, relR1).Key()
	_, _, err = e.s.JobCreate(e.ctx, ports.JobCreateParams{Job: wrongTarget, IdempotencyKey: "key-j4"})
	requireInvalid(t, err, "target_key")

	_, _, err = e.s.JobCreate(e.ctx, ports.JobCreateParams{Job: relJob("j5", r, release.JobPending, relAt(6))})
	requireInvalid(t, err, "idempotency_key")
	badStatus := relJob("j6", r, "done", relAt(6))
	_, _, err = e.s.JobCreate(e.ctx, ports.JobCreateParams{Job: badStatus, IdempotencyKey: "key-j6"})
	requireInvalid(t, err, "status")
	noTime := relJob("j7", r, release.JobPending, time.Time{})
	_, _, err = e.s.JobCreate(e.ctx, ports.JobCreateParams{Job: noTime, IdempotencyKey: "key-j7"})
	requireInvalid(t, err, "created_at")

	for _, id := range []string{"j2", "j3", "j4", "j5", "j6", "j7"} {
		_, err = e.s.JobGet(e.ctx, id)
		require.ErrorIs(t, err, ports.ErrNotFound, "refused %s stored nothing", id)
	}
	require.Equal(t, before, relGetJob(t, e, "j1"))
	// A refused create consumed no key.
	relCreateJob(t, e, relJob("j3", r, release.JobPending, relAt(7)))
}

// relJobCreateConcurrent: several goroutines create the same key at once;
// exactly one creates, and all get the same job.
func relJobCreateConcurrent(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	r := f.release(tgt(relD1, relE1, relR1), "v1")
	const workers = 8
	key := ports.JobKey(r.ID, 1)
	start := make(chan struct{})
	type result struct {
		row     ports.JobRow
		created bool
		err     error
	}
	results := make([]result, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			j := relJob(fmt.Sprintf("j-%d", i), r, release.JobPending, relAt(i))
			row, created, err := e.s.JobCreate(e.ctx, ports.JobCreateParams{Job: j, IdempotencyKey: key})
			results[i] = result{row, created, err}
		}()
	}
	close(start)
	wg.Wait()
	winners := 0
	for i, res := range results {
		require.NoError(t, res.err, "worker %d", i)
		if res.created {
			winners++
		}
		require.Equal(t, results[0].row, res.row, "worker %d got another job", i)
	}
	require.Equal(t, 1, winners, "exactly one create wins")
	rows, err := e.s.JobsByTarget(e.ctx, r.Target, 0)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, results[0].row, rows[0])
}

func relJobUpdateCAS(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	r := f.release(tgt(relD1, relE1, relR1), "v1")
	row := relCreateJob(t, e, relJob("j1", r, release.JobPending, relAt(5)))

	t1 := e.clock.Advance(time.Minute)
	next := row.Job
	next.Status, next.ExternalID, next.StartedAt, next.Message = release.JobInProgress, "run-1", relAt(6), "running"
	v, err := e.s.JobUpdate(e.ctx, next, 1)
	require.NoError(t, err)
	require.Equal(t, int64(2), v)
	got := relGetJob(t, e, "j1")
	wantJob := next
	wantJob.StartedAt = relNorm(next.StartedAt)
	require.Equal(t, ports.JobRow{Job: wantJob, VersionID: "v1", IdempotencyKey: "key-j1", Version: 2, UpdatedAt: relNorm(t1)}, got)

	e.clock.Advance(time.Minute)
	stale := got.Job
	stale.Status = release.JobSuccessful
	for _, exp := range []int64{1, 3} {
		_, err = e.s.JobUpdate(e.ctx, stale, exp)
		require.ErrorIs(t, err, ports.ErrConflict, "write at version %d", exp)
	}
	missing := stale
	missing.ID = "j-none"
	_, err = e.s.JobUpdate(e.ctx, missing, 1)
	require.ErrorIs(t, err, ports.ErrNotFound)
	invalid := stale
	invalid.Status = "done"
	_, err = e.s.JobUpdate(e.ctx, invalid, 2)
	requireInvalid(t, err, "status")
	require.Equal(t, got, relGetJob(t, e, "j1"), "refused writes changed nothing")

	// An update with the row as read (times at the store's precision) and
	// an unchanged status is a plain write.
	same := got.Job
	same.Message = "still running"
	v, err = e.s.JobUpdate(e.ctx, same, 2)
	require.NoError(t, err)
	require.Equal(t, int64(3), v)
	require.Equal(t, "still running", relGetJob(t, e, "j1").Message)
}

// relJobUpdateConcurrent: writers racing at the same version; exactly one
// wins, the others lose the compare-and-swap.
func relJobUpdateConcurrent(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	row := relCreateJob(t, e, relJob("j1", f.release(tgt(relD1, relE1, relR1), "v1"), release.JobPending, relAt(5)))
	const workers = 6
	start := make(chan struct{})
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			next := row.Job
			next.Status, next.Message = release.JobInProgress, fmt.Sprintf("writer %d", i)
			_, errs[i] = e.s.JobUpdate(e.ctx, next, row.Version)
		}()
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "writers %d and %d both won", winner, i)
			winner = i
			continue
		}
		require.ErrorIs(t, err, ports.ErrConflict, "writer %d", i)
	}
	require.NotEqual(t, -1, winner, "one writer wins")
	got := relGetJob(t, e, "j1")
	require.Equal(t, row.Version+1, got.Version)
	require.Equal(t, fmt.Sprintf("writer %d", winner), got.Message)
}

// relJobUpdateEdges tries every (from, to) pair of statuses: a move is
// accepted exactly when release.JobEdges has it (or the status stays).
func relJobUpdateEdges(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	r := f.release(tgt(relD1, relE1, relR1), "v1")
	n := 0
	for _, from := range release.JobStatuses {
		for _, to := range release.JobStatuses {
			n++
			row := relCreateJob(t, e, relJob(fmt.Sprintf("j%03d", n), r, from, relAt(n)))
			next := row.Job
			next.Status = to
			_, err := e.s.JobUpdate(e.ctx, next, row.Version)
			if from == to || from.CanBecome(to) {
				require.NoError(t, err, "%s → %s", from, to)
				require.Equal(t, to, relGetJob(t, e, row.ID).Status)
				continue
			}
			requireInvalid(t, err, "status")
			require.Equal(t, row, relGetJob(t, e, row.ID), "%s → %s refused, nothing changed", from, to)
		}
	}
}

func relJobUpdateImmutable(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	r := f.release(tgt(relD1, relE1, relR1), "v1")
	row := relCreateJob(t, e, relJob("j1", r, release.JobPending, relAt(5)))
	otherRel := f.release(tgt(relD1, relE1, relR1), "v2")
	otherTarget := f.release(tgt(relD1, relE1, relR2), "v1")
	for _, c := range []struct {
		field  string
		change func(j *release.Job)
	}{
		{"release_id", func(j *release.Job) { j.ReleaseID = otherRel.ID }},
		{"target_key", func(j *release.Job) { j.TargetKey = otherTarget.Target.Key() }},
		{"release_id", func(j *release.Job) { j.ReleaseID, j.TargetKey = otherTarget.ID, otherTarget.Target.Key() }},
		{"created_at", func(j *release.Job) { j.CreatedAt = j.CreatedAt.Add(time.Microsecond) }},
	} {
		next := row.Job
		next.Status = release.JobQueued
		c.change(&next)
		_, err := e.s.JobUpdate(e.ctx, next, row.Version)
		requireInvalid(t, err, c.field)
		require.Equal(t, row, relGetJob(t, e, "j1"), "changing %s changed nothing", c.field)
	}
	// The creation time in another zone, or with nanoseconds the store
	// drops, is the same creation time.
	next := row.Job
	next.CreatedAt = relAt(5).In(time.FixedZone("Y", -7200))
	next.Status = release.JobQueued
	_, err := e.s.JobUpdate(e.ctx, next, row.Version)
	require.NoError(t, err)
	require.Equal(t, row.CreatedAt, relGetJob(t, e, "j1").CreatedAt)
}

func relJobRoundTrip(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	r := f.release(tgt(relD1, relE1, relR1), "v1")
	j := relJob("j1", r, release.JobSuccessful, relAt(5))
	j.JobAgentConfig = map[string]any{"workflow": "deploy.yml", "n": 2}
	j.Verification = release.VerificationPassed
	j.ExternalID = "run-9"
	j.DispatchContext = map[string]any{"vars": map[string]any{"replicas": 3}, "links": []any{"a"}}
	j.Message = "done"
	j.Measurements = map[string][]release.Measurement{"error-rate": {{At: relAt(6), Result: 0.01}, {At: relAt(7), Error: "timeout"}}}
	j.StartedAt, j.CompletedAt = relAt(5).Add(time.Second), relAt(6)
	row := relCreateJob(t, e, j)
	want := j
	want.CreatedAt, want.StartedAt, want.CompletedAt = relNorm(j.CreatedAt), relNorm(j.StartedAt), relNorm(j.CompletedAt)
	want.JobAgentConfig = map[string]any{"workflow": "deploy.yml", "n": float64(2)}
	want.DispatchContext = map[string]any{"vars": map[string]any{"replicas": float64(3)}, "links": []any{"a"}}
	want.Measurements = map[string][]release.Measurement{"error-rate": {{At: relNorm(relAt(6)), Result: 0.01}, {At: relNorm(relAt(7)), Error: "timeout"}}}
	require.Equal(t, want, row.Job, "created row")
	got := relGetJob(t, e, "j1")
	require.Equal(t, want, got.Job, "read row")

	// Changing a read or the caller's job changes nothing stored.
	got.JobAgentConfig["workflow"] = "changed"
	got.DispatchContext["vars"].(map[string]any)["replicas"] = "changed"
	got.Measurements["error-rate"][0].Error = "changed"
	got.Measurements["latency"] = nil
	j.DispatchContext["links"] = "changed"
	j.Measurements["error-rate"][1].Error = "changed"
	require.Equal(t, want, relGetJob(t, e, "j1").Job, "reads and writes are copies")
	rows, err := e.s.JobsByTarget(e.ctx, r.Target, 1)
	require.NoError(t, err)
	rows[0].Measurements["error-rate"][0].Result = "changed"
	st, err := e.s.TargetJobState(e.ctx, r.Target)
	require.NoError(t, err)
	require.NotNil(t, st.Successful)
	st.Successful.Job.Measurements["error-rate"][0].Result = "changed"
	require.Equal(t, want, relGetJob(t, e, "j1").Job, "list reads are copies")
	require.Equal(t, row.UpdatedAt, relGetJob(t, e, "j1").UpdatedAt)
}

// relJobUpdateMany checks JobUpdateMany against JobUpdate one by one: the
// writes that apply are written (each at its new version), a stale version is ErrConflict, a missing job ErrNotFound, a
// refused move or a bad field ErrInvalid, each changing nothing; a second
// update of one job in the call sees the first.
func relJobUpdateMany(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	var rows []ports.JobRow
	for i, rel := range []release.Release{f.release(tgt(relD1, relE1, relR1), "v1"), f.release(tgt(relD1, relE1, relR2), "v1"),
		f.release(tgt(relD1, relE2, relR1), "v1"), f.release(tgt(relD2, relE1, relR1), "v3")} {
		rows = append(rows, relCreateJob(t, e, relJob(fmt.Sprint("m", i), rel, release.JobPending, relAt(5))))
	}
	relMove(t, e, "m2", release.JobSuccessful)
	done := relGetJob(t, e, "m2")
	t1 := e.clock.Advance(time.Minute)
	started := func(j release.Job, ext string) release.Job {
		j.Status, j.ExternalID, j.StartedAt = release.JobInProgress, ext, relAt(6)
		return j
	}
	failed := started(rows[1].Job, "run-m1")
	failed.Status, failed.CompletedAt = release.JobFailure, relAt(7)
	bad := started(rows[3].Job, "run-m3")
	bad.Status = "done"
	missing := started(rows[0].Job, "x")
	missing.ID = "m-none"
	updates := []ports.JobUpdateParams{
		{Job: started(rows[0].Job, "run-m0"), ExpectedVersion: 1},         // written
		{Job: started(rows[1].Job, "run-m1"), ExpectedVersion: 7},         // stale
		{Job: started(done.Job, "run-m2"), ExpectedVersion: done.Version}, // successful -> inProgress: refused
		{Job: missing, ExpectedVersion: 1},                                // not stored
		{Job: bad, ExpectedVersion: 1},                                    // not a status
	}
	versions, errs := e.s.JobUpdateMany(e.ctx, updates)
	require.Len(t, versions, len(updates))
	require.Len(t, errs, len(updates))
	require.NoError(t, errs[0])
	require.Equal(t, int64(2), versions[0])
	require.ErrorIs(t, errs[1], ports.ErrConflict)
	requireInvalid(t, errs[2], "status")
	require.ErrorIs(t, errs[3], ports.ErrNotFound)
	requireInvalid(t, errs[4], "status")
	want := started(rows[0].Job, "run-m0")
	want.StartedAt = relNorm(want.StartedAt)
	require.Equal(t, ports.JobRow{Job: want, VersionID: "v1", IdempotencyKey: "key-m0", Version: 2, UpdatedAt: relNorm(t1)}, relGetJob(t, e, "m0"))
	require.Equal(t, rows[1], relGetJob(t, e, "m1"), "refused writes change nothing")
	require.Equal(t, done, relGetJob(t, e, "m2"))
	require.Equal(t, rows[3], relGetJob(t, e, "m3"))

	// One job twice: the second update sees the first, as JobUpdate would.
	versions, errs = e.s.JobUpdateMany(e.ctx, []ports.JobUpdateParams{
		{Job: started(rows[1].Job, "run-m1"), ExpectedVersion: 1},
		{Job: failed, ExpectedVersion: 1},
		{Job: failed, ExpectedVersion: 2},
	})
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], ports.ErrConflict, "the first update moved it on")
	require.NoError(t, errs[2])
	require.Equal(t, []int64{2, 0, 3}, versions)
	require.Equal(t, release.JobFailure, relGetJob(t, e, "m1").Status)
	versions, errs = e.s.JobUpdateMany(e.ctx, nil)
	require.Empty(t, versions)
	require.Empty(t, errs)
}

// relJobCreateMany: JobCreateMany creates a call's jobs as JobCreate
// would, one create at a time (ports.JobCreateEach on a twin store with the
// same world and clock): the same results and the same stored jobs, over
// calls that create new jobs, retry a stored key (under its own and
// another id), take a stored id, name a missing release, a release of
// another target and an invalid job among good ones, name one key twice,
// and cap the environment.
func relJobCreateMany(t *testing.T, newStore ReleaseStoreFactory) {
	t.Parallel()
	env := func() (*relEnv, *relJobFixture) {
		e := &relEnv{ctx: t.Context(), clock: NewFakeClock(relT0)}
		e.s = newStore(t, ReleaseStoreDeps{Clock: e.clock})
		return e, relJobWorld(t, e)
	}
	e, f := env()
	twin, _ := env()
	tA, tB, tC, tD := tgt(relD1, relE1, relR1), tgt(relD1, relE1, relR2), tgt(relD1, relE2, relR1), tgt(relD2, relE1, relR1)
	create := func(id string, target release.ReleaseTarget, version string, status release.JobStatus, key string) ports.JobCreateParams {
		j := relJob(id, f.release(target, version), status, relAt(10))
		j.JobAgentConfig = map[string]any{"image": "api:" + version}
		return ports.JobCreateParams{Job: j, IdempotencyKey: key}
	}
	missing := create("j-missing", tA, "v1", release.JobPending, "k-missing")
	missing.Job.ReleaseID = "rel-none"
	otherTarget := create("j-other", tA, "v1", release.JobPending, "k-other")
	otherTarget.Job.TargetKey = tC.Key()
	invalid := create("j-invalid", tA, "v1", "done", "k-invalid")
	noKey := create("j-nokey", tA, "v1", release.JobPending, "")
	capped := create("j-capped", tB, "v2", release.JobPending, "k-capped")
	capped.MaxActiveInEnvironment = 1
	calls := [][]ports.JobCreateParams{
		{create("j1", tA, "v1", release.JobPending, "k1"), create("j2", tB, "v1", release.JobPending, "k2"),
			create("j3", tC, "v1", release.JobInvalidJobAgent, "k3"), create("j4", tD, "v3", release.JobPending, "k4")},
		// retries of stored keys, a taken id, refused creates among good ones
		{create("j1", tA, "v1", release.JobPending, "k1"), create("j1-again", tB, "v1", release.JobPending, "k2"),
			create("j3", tC, "v2", release.JobPending, "k3-new"), missing, create("j5", tA, "v2", release.JobPending, "k5"),
			otherTarget, invalid, noKey, create("j6", tB, "v2", release.JobPending, "k6")},
		// a key that names another release
		{create("j7", tA, "v2", release.JobPending, "k1"), create("j8", tC, "v2", release.JobPending, "k8")},
		// one key twice
		{create("j9", tD, "v3", release.JobPending, "k9"), create("j10", tD, "v3", release.JobPending, "k9")},
		// a capped create: e1 of d1 holds active jobs already
		{create("j11", tC, "v2", release.JobPending, "k11"), capped},
		{},
	}
	for n, creates := range calls {
		e.clock.Advance(time.Minute)
		twin.clock.Advance(time.Minute)
		got := e.s.JobCreateMany(e.ctx, creates)
		want := ports.JobCreateEach(twin.ctx, twin.s, creates)
		require.Len(t, got, len(creates), "call %d", n)
		for i := range creates {
			require.Equal(t, want[i].Created, got[i].Created, "call %d, create %d", n, i)
			require.Equal(t, want[i].Row, got[i].Row, "call %d, create %d", n, i)
			if want[i].Err == nil {
				require.NoError(t, got[i].Err, "call %d, create %d", n, i)
				continue
			}
			require.Error(t, got[i].Err, "call %d, create %d: %v", n, i, want[i].Err)
			for _, kind := range []error{release.ErrInvalid, ports.ErrNotFound, ports.ErrConflict, ports.ErrLimitReached} {
				require.Equal(t, errors.Is(want[i].Err, kind), errors.Is(got[i].Err, kind), "call %d, create %d: %v, %v", n, i, want[i].Err, got[i].Err)
			}
		}
		for _, target := range []release.ReleaseTarget{tA, tB, tC, tD} {
			wr, err := twin.s.JobsByTarget(twin.ctx, target, 0)
			require.NoError(t, err)
			gr, err := e.s.JobsByTarget(e.ctx, target, 0)
			require.NoError(t, err)
			require.Equal(t, wr, gr, "call %d, jobs of %s", n, target)
		}
	}
	// The calls above created, refused and returned jobs: the test covered
	// each path.
	rows, err := e.s.JobsByTarget(e.ctx, tA, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"j5", "j1"}, relJobIDs(rows))
}
