package chain_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// The events of the convergence property. Each names its objects by index,
// and runEvent reads them against the state it finds, so a sequence can be
// generated once and replayed on any store.
const (
	evCreate     = iota // a new version
	evReject            // version #a rejected
	evPause             // version #a paused
	evUnpause           // version #a ready again, if paused
	evFail              // target #a's active job fails (retried off prod, rolled back on prod)
	evSucceed           // target #a's active job succeeds
	evWindow            // the clock moves to the next opening of prod's window
	evTime              // a minutes pass
	evReevaluate        // every target is evaluated again
	evKinds
)

// event is one generated event.
type event struct{ kind, a int }

func (e event) String() string {
	return [...]string{"create", "reject", "pause", "unpause", "fail", "succeed", "window", "time", "reevaluate"}[e.kind] + fmt.Sprint("(", e.a, ")")
}

// eventsGen generates minEvents..maxEvents events.
func eventsGen(minEvents, maxEvents int) *rapid.Generator[[]event] {
	return rapid.Custom(func(t *rapid.T) []event {
		n := rapid.IntRange(minEvents, maxEvents).Draw(t, "events")
		out := make([]event, n)
		for i := range out {
			out[i] = event{kind: rapid.IntRange(0, evKinds-1).Draw(t, "kind"), a: rapid.IntRange(0, 599).Draw(t, "a")}
		}
		return out
	})
}

// convergenceRetries is the retry budget of the targets outside prod.
const convergenceRetries = 2

// convergencePolicies: outside prod a failed job is retried; in prod a
// failed job rolls the target back, versions roll out one target a minute
// from the opening of a daily 09:00-17:00 window.
func convergencePolicies(h *harness) {
	h.policy(policy.Policy{ID: "retry", Selector: `environment.name != "prod"`, Rules: []policy.Rule{
		{ID: "retry", Spec: policy.Retry{MaxRetries: convergenceRetries}}}})
	h.policy(policy.Policy{ID: "prod", Selector: `environment.name == "prod"`, Rules: []policy.Rule{
		{ID: "rollback", Spec: policy.Rollback{OnJobStatuses: []release.JobStatus{release.JobFailure}}},
		{ID: "window", Spec: policy.DeploymentWindow{RRule: "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0", DurationMinutes: 480}},
		{ID: "rollout", Spec: policy.GradualRollout{RolloutType: policy.RolloutLinear, TimeScaleInterval: 60}}}})
}

// nextNine is the first 09:00 UTC after now.
func nextNine(now time.Time) time.Time {
	nine := time.Date(now.Year(), now.Month(), now.Day(), 9, 0, 0, 0, time.UTC)
	if !nine.After(now) {
		nine = nine.AddDate(0, 0, 1)
	}
	return nine
}

// convergence runs events through the chain, then lets every pending
// thing happen (the window opens, every job the chain starts succeeds,
// every wake-up comes due) and checks that every target's newest
// successful job is for its desired release, and that explain says so.
func (h *harness) convergence(events []event) {
	h.t.Helper()
	convergencePolicies(h)
	h.drain()
	var all []release.ReleaseTarget
	for _, env := range allEnvs {
		all = append(all, target(env, "c1"), target(env, "c2"))
	}
	var versions []string
	for i, e := range events {
		h.runEvent(e, i, all, &versions)
		h.drain()
	}
	h.clock.Set(nextNine(h.clock.Now()))
	for range 40 {
		h.drain()
		for _, tg := range all {
			active, err := h.store.JobsActiveByTarget(h.ctx, tg)
			require.NoError(h.t, err)
			for _, j := range active {
				require.NoError(h.t, h.chain.ReportJob(h.ctx, ports.JobReport{JobID: j.ID, Status: release.JobSuccessful}))
			}
		}
		h.clock.Advance(2 * time.Minute)
	}
	require.Zero(h.t, h.drain(), "nothing is left to do")
	for _, tg := range all {
		d, err := h.store.DesiredGet(h.ctx, tg)
		require.NoError(h.t, err)
		ex, err := h.chain.Explain(h.ctx, tg, 1)
		require.NoError(h.t, err)
		if d.ReleaseID == "" {
			require.False(h.t, ex.Convergence.Converged, "%s: no desired release is not converged", tg)
			if len(versions) > 0 {
				require.NotEmpty(h.t, d.Reasons, "%s: no release says why", tg)
			}
			continue
		}
		rows, err := h.store.JobsByTarget(h.ctx, tg, 0)
		require.NoError(h.t, err)
		newest := ""
		for _, j := range rows {
			require.False(h.t, j.Status.IsActive(), "%s: job %s still %s", tg, j.ID, j.Status)
			if newest == "" && j.Status == release.JobSuccessful {
				newest = j.ReleaseID
			}
		}
		require.Equal(h.t, d.ReleaseID, newest, "%s: the newest successful job is for the desired release (%s)", tg, ex.Convergence.Message)
		require.True(h.t, ex.Convergence.Converged, "%s: %s", tg, ex.Convergence.Message)
	}
}

// runEvent applies one event.
func (h *harness) runEvent(e event, i int, all []release.ReleaseTarget, versions *[]string) {
	h.t.Helper()
	pick := func() (string, bool) {
		if len(*versions) == 0 {
			return "", false
		}
		return (*versions)[e.a%len(*versions)], true
	}
	switch e.kind {
	case evCreate:
		id := fmt.Sprint("v", i)
		h.clock.Advance(time.Second)
		require.NoError(h.t, h.chain.CreateVersion(h.ctx, release.DeploymentVersion{ID: id, DeploymentID: "api", Tag: id}))
		*versions = append(*versions, id)
	case evReject, evPause:
		if v, ok := pick(); ok {
			s := map[int]release.VersionStatus{evReject: release.VersionRejected, evPause: release.VersionPaused}[e.kind]
			require.NoError(h.t, h.chain.SetVersionStatus(h.ctx, v, s))
		}
	case evUnpause:
		if v, ok := pick(); ok {
			got, err := h.store.VersionGet(h.ctx, v)
			require.NoError(h.t, err)
			if got.Status == release.VersionPaused {
				require.NoError(h.t, h.chain.SetVersionStatus(h.ctx, v, release.VersionReady))
			}
		}
	case evFail, evSucceed:
		tg := all[e.a%len(all)]
		rows, err := h.store.JobsByTarget(h.ctx, tg, 0)
		require.NoError(h.t, err)
		if len(rows) == 0 || !rows[0].Status.IsActive() {
			return
		}
		status := release.JobSuccessful
		if e.kind == evFail && (tg.EnvironmentID == "prod" || failures(rows) < convergenceRetries) {
			status = release.JobFailure // off prod only while a retry is left
		}
		h.clock.Advance(time.Second)
		require.NoError(h.t, h.chain.ReportJob(h.ctx, ports.JobReport{JobID: rows[0].ID, Status: status}))
	case evWindow:
		h.clock.Set(nextNine(h.clock.Now()))
	case evTime:
		h.clock.Advance(time.Duration(e.a+1) * time.Minute)
	case evReevaluate:
		require.NoError(h.t, h.chain.EvaluateTargets(h.ctx, all...))
	}
}

// failures counts the failed jobs of the newest job's release at the head
// of rows (newest first): the retries its run has used.
func failures(rows []ports.JobRow) int {
	n := 0
	for _, j := range rows {
		if j.ReleaseID != rows[0].ReleaseID {
			break
		}
		if j.Status == release.JobFailure {
			n++
		}
	}
	return n
}

// TestConvergenceProperty: after any sequence of versions created,
// rejected, paused and unpaused, jobs failing (retried, or rolled back in
// prod), windows opening and time passing, once nothing is pending every
// target's newest successful job is for its desired release (memory store).
func TestConvergenceProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		clock := porttest.NewFakeClock(t0)
		h := newHarnessOn(rt, context.Background(), clock, memory.NewReleaseStore(clock), memory.NewQueue(clock))
		h.convergence(eventsGen(1, 30).Draw(rt, "events"))
	})
}

// TestConvergencePostgres replays a few generated sequences of 20 events on
// Postgres.
func TestConvergencePostgres(t *testing.T) {
	t.Parallel()
	for seed := range 4 {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "postgres")
			events := eventsGen(20, 20).Example(seed)
			t.Logf("events: %v", events)
			h.convergence(events)
		})
	}
}
