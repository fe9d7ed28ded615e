package porttest

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// relProgressionRuns numbers the property's runs so each counts its own
// versions and jobs in the shared store.
var relProgressionRuns atomic.Int64

// relSummaryFromJobs is the progression summary recomputed from the scope's
// targets and their newest terminal jobs of the version, the reads the
// summary replaces.
func relSummaryFromJobs(t testT, e *relEnv, dep, env, version string) policy.ProgressionSummary {
	t.Helper()
	targets, err := e.s.TargetList(e.ctx, ports.TargetListParams{Scope: ports.TargetScope{DeploymentID: dep, EnvironmentID: env}})
	require.NoError(t, err)
	jobs, err := e.s.JobsLatest(e.ctx, ports.JobsLatestParams{DeploymentID: dep, EnvironmentID: env, VersionID: version,
		Statuses: ports.TerminalJobStatuses()})
	require.NoError(t, err)
	newest := map[string]*ports.JobRow{}
	for i := range jobs {
		newest[jobs[i].TargetKey] = &jobs[i]
	}
	states := make([]policy.TargetState, 0, len(targets))
	for _, tg := range targets {
		ts := policy.TargetState{Target: tg}
		if j := newest[tg.Key()]; j != nil {
			ts.Jobs = []policy.JobRecord{j.Record()}
		}
		states = append(states, ts)
	}
	return relNormSummary(policy.SummarizeProgression(version, states))
}

// relNormSummary keeps the summary's times at the precision stores keep,
// in UTC, so summaries compare with Equal.
func relNormSummary(s policy.ProgressionSummary) policy.ProgressionSummary {
	for i := range s.Outcomes {
		s.Outcomes[i].LatestAt = ports.StoredTime(s.Outcomes[i].LatestAt).UTC()
	}
	return s
}

// relRequireSummary asserts the store's summary equals the recomputed one.
func relRequireSummary(t testT, e *relEnv, dep, env, version string) policy.ProgressionSummary {
	t.Helper()
	got, err := e.s.ProgressionSummary(e.ctx, ports.ProgressionSummaryParams{DeploymentID: dep, EnvironmentID: env, VersionID: version})
	require.NoError(t, err)
	want := relSummaryFromJobs(t, e, dep, env, version)
	require.Equal(t, want, relNormSummary(got), "summary of %s in %s for %s", dep, env, version)
	return want
}

// relProgressionTargets stores d1's targets in e1 on resources rs.
func relProgressionTargets(t testT, e *relEnv, rs ...string) {
	t.Helper()
	ts := make([]release.ReleaseTarget, len(rs))
	for i, r := range rs {
		ts[i] = tgt(relD1, relE1, r)
	}
	_, err := e.s.TargetsReplace(e.ctx, ports.TargetsReplaceParams{Scope: ports.TargetScope{DeploymentID: relD1, EnvironmentID: relE1}, Targets: ts})
	require.NoError(t, err)
}

func relProgressionSummary(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	t1, t2 := tgt(relD1, relE1, relR1), tgt(relD1, relE1, relR2)
	relProgressionTargets(t, e, relR1, relR2, relR3)
	sum := func(version string) policy.ProgressionSummary {
		t.Helper()
		return relRequireSummary(t, e, relD1, relE1, version)
	}
	require.Equal(t, policy.ProgressionSummary{VersionID: "v1", Targets: 3}, sum("v1"), "targets without terminal jobs")

	relCreateJob(t, e, relJob("a1", f.release(t1, "v1"), release.JobPending, relAt(1)))
	relCreateJob(t, e, relJob("b1", f.release(t2, "v1"), release.JobFailure, relAt(2)))
	require.Equal(t, policy.ProgressionSummary{VersionID: "v1", Targets: 3, Outcomes: []policy.ProgressionOutcome{
		{Status: release.JobFailure, Targets: 1, LatestAt: relNorm(relAt(2))},
	}}, sum("v1"), "an active job counts nowhere")
	relMove(t, e, "a1", release.JobSuccessful, func(j *release.Job) { j.CompletedAt = relAt(7) })
	relCreateJob(t, e, relJob("b2", f.release(t2, "v1"), release.JobSuccessful, relAt(5)))
	require.Equal(t, policy.ProgressionSummary{VersionID: "v1", Targets: 3, Outcomes: []policy.ProgressionOutcome{
		{Status: release.JobSuccessful, Targets: 2, LatestAt: relNorm(relAt(7))},
	}}, sum("v1"), "a newer terminal job moves its target; the finish time is completed_at")
	relMove(t, e, "a1", release.JobSuccessful, func(j *release.Job) { j.Verification = release.VerificationPassed })
	require.Equal(t, policy.ProgressionSummary{VersionID: "v1", Targets: 3, Outcomes: []policy.ProgressionOutcome{
		{Status: release.JobSuccessful, Targets: 1, LatestAt: relNorm(relAt(5))},
		{Status: release.JobSuccessful, Verification: release.VerificationPassed, Targets: 1, LatestAt: relNorm(relAt(7))},
	}}, sum("v1"), "a verification moves its target; the outcome it left recomputes its latest finish")
	relCreateJob(t, e, relJob("a0", f.release(t1, "v1"), release.JobFailure, relAt(0)))
	require.Len(t, sum("v1").Outcomes, 2, "an older terminal job changes nothing")
	require.Equal(t, policy.ProgressionSummary{VersionID: "v2", Targets: 3}, sum("v2"), "another version")

	relProgressionTargets(t, e, relR2)
	require.Equal(t, policy.ProgressionSummary{VersionID: "v1", Targets: 1, Outcomes: []policy.ProgressionOutcome{
		{Status: release.JobSuccessful, Targets: 1, LatestAt: relNorm(relAt(5))},
	}}, sum("v1"), "a removed target no longer counts")
	relProgressionTargets(t, e, relR1, relR2)
	require.Equal(t, 2, sum("v1").Targets, "a target added again counts its jobs")
	require.Len(t, sum("v1").Outcomes, 2)

	for _, c := range []struct {
		p     ports.ProgressionSummaryParams
		field string
	}{
		{ports.ProgressionSummaryParams{EnvironmentID: relE1, VersionID: "v1"}, "deployment_id"},
		{ports.ProgressionSummaryParams{DeploymentID: relD1, VersionID: "v1"}, "environment_id"},
		{ports.ProgressionSummaryParams{DeploymentID: relD1, EnvironmentID: relE1}, "version_id"},
	} {
		_, err := e.s.ProgressionSummary(e.ctx, c.p)
		requireInvalid(t, err, c.field)
	}
}

// relProgressionProperty: after any sequence of job writes (creations,
// moves, verifications, finish times, in any order of creation time) and
// target replacements, the store's summary equals the one recomputed from
// its targets and newest terminal jobs.
func relProgressionProperty(t *testing.T, e *relEnv) {
	relWorld(t, e)
	statuses := release.JobStatuses
	verifications := []release.VerificationStatus{"", release.VerificationNone, release.VerificationRunning, release.VerificationPassed, release.VerificationFailed}
	resources := []string{relR1, relR2, relR3}
	envs := []string{relE1, relE2}
	rapid.Check(t, func(rt *rapid.T) {
		run := relProgressionRuns.Add(1)
		versions := []string{fmt.Sprintf("pv%d-a", run), fmt.Sprintf("pv%d-b", run)}
		relCreateVersions(rt, e, relVersion(versions[0], relD1, relAt(1)), relVersion(versions[1], relD1, relAt(2)))
		var jobs []string
		steps := rapid.IntRange(1, 20).Draw(rt, "steps")
		for step := range steps {
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op < 4 || len(jobs) == 0:
				target := tgt(relD1, rapid.SampledFrom(envs).Draw(rt, "env"), rapid.SampledFrom(resources).Draw(rt, "resource"))
				r := relStoreRelease(rt, e, target, rapid.SampledFrom(versions).Draw(rt, "version"))
				id := fmt.Sprintf("pj%d-%02d", run, step)
				j := relJob(id, r, rapid.SampledFrom(statuses).Draw(rt, "status"), relAt(rapid.IntRange(0, 5).Draw(rt, "created")))
				if j.Status.IsTerminal() {
					j.Verification = rapid.SampledFrom(verifications).Draw(rt, "verification")
				}
				relCreateJob(rt, e, j)
				jobs = append(jobs, id)
			case op < 9:
				row := relGetJob(rt, e, rapid.SampledFrom(jobs).Draw(rt, "job"))
				next := []release.JobStatus{row.Status}
				next = append(next, release.JobEdges[row.Status]...)
				to := rapid.SampledFrom(next).Draw(rt, "to")
				relMove(rt, e, row.ID, to, func(j *release.Job) {
					if to.IsTerminal() {
						j.Verification = rapid.SampledFrom(verifications).Draw(rt, "verification")
						if rapid.Bool().Draw(rt, "completed?") {
							j.CompletedAt = relAt(rapid.IntRange(6, 12).Draw(rt, "completed"))
						}
					}
				})
			default:
				var rs []string
				for _, r := range resources {
					if rapid.Bool().Draw(rt, "keep "+r) {
						rs = append(rs, r)
					}
				}
				relProgressionTargets(rt, e, rs...)
			}
			for _, env := range envs {
				for _, v := range versions {
					relRequireSummary(rt, e, relD1, env, v)
				}
			}
		}
	})
}

// relProgressionConcurrent: writers ending jobs at once, each a batch over
// both environments and several targets in its own order (JobUpdateMany),
// all succeed and leave the summary equal to the recount: the outcome
// counts lose no update and the latest finish misses no writer.
func relProgressionConcurrent(t *testing.T, e *relEnv) {
	relWorld(t, e)
	relCreateVersions(t, e, relVersion("v1", relD1, relAt(1)))
	const writers, perWriter = 6, 4
	var resources []string
	for i := range writers * perWriter / 2 {
		id := fmt.Sprintf("cr%02d", i)
		_, err := e.s.Resources().Put(e.ctx, release.Resource{ID: id, WorkspaceID: relWS, Kind: "Cluster", Identifier: id, Name: id}, 0)
		require.NoError(t, err)
		resources = append(resources, id)
	}
	var all []release.ReleaseTarget
	for _, env := range []string{relE1, relE2} {
		var ts []release.ReleaseTarget
		for _, r := range resources {
			ts = append(ts, tgt(relD1, env, r))
		}
		_, err := e.s.TargetsReplace(e.ctx, ports.TargetsReplaceParams{Scope: ports.TargetScope{DeploymentID: relD1, EnvironmentID: env}, Targets: ts})
		require.NoError(t, err)
		all = append(all, ts...)
	}
	// Writer w ends the jobs of targets w, w+writers, ... (both
	// environments interleaved), the odd writers in reverse order.
	batches := make([][]ports.JobUpdateParams, writers)
	for i, target := range all {
		w := i % writers
		r := relStoreRelease(t, e, target, "v1")
		row := relCreateJob(t, e, relJob(fmt.Sprintf("cj%02d", i), r, release.JobInProgress, relAt(2)))
		next := row.Job
		next.Status, next.CompletedAt = release.JobSuccessful, relAt(3+i)
		if i%3 == 0 {
			next.Status = release.JobFailure
		}
		batches[w] = append(batches[w], ports.JobUpdateParams{Job: next, ExpectedVersion: row.Version})
	}
	for w := 1; w < writers; w += 2 {
		slices.Reverse(batches[w])
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([][]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[w] = e.s.JobUpdateMany(e.ctx, batches[w])
		}()
	}
	close(start)
	wg.Wait()
	for w := range writers {
		for i, err := range errs[w] {
			require.NoError(t, err, "writer %d, update %d", w, i)
		}
	}
	for _, env := range []string{relE1, relE2} {
		sum := relRequireSummary(t, e, relD1, env, "v1")
		require.Equal(t, len(resources), sum.Targets)
		n := 0
		for _, o := range sum.Outcomes {
			n += o.Targets
		}
		require.Equal(t, len(resources), n, "every target counted once in %s", env)
	}
}
