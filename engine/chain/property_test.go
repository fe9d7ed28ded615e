package chain_test

import (
	"context"
	"fmt"
	"strings"
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

// TestChainProperties runs generated sequences of events (new versions,
// some of which a version selector denies; agents' reports; time passing;
// re-evaluations) through the chain on the memory adapters, draining the
// engine after each, and checks after every step:
//   - a denied version is never dispatched;
//   - no target ever has more active jobs than its concurrency cap;
//   - every job is handed to its agent exactly once;
//   - a run (a release's consecutive jobs on a target) never has more jobs
//     than its retry budget allows;
//
// drained one item at a time or in batches (as Run takes them), and at the
// end that the chain is idempotent: re-evaluating every target
// with unchanged state creates no job or release.
func TestChainProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		clock := porttest.NewFakeClock(t0)
		h := newHarnessOn(rt, context.Background(), clock, memory.NewReleaseStore(clock), memory.NewQueue(clock))
		h.batched = rapid.Bool().Draw(rt, "batched")
		capN := rapid.IntRange(1, 2).Draw(rt, "cap")
		retries := rapid.IntRange(0, 2).Draw(rt, "retries")
		h.policy(policy.Policy{ID: "gates", Rules: []policy.Rule{
			{ID: "no-bad", Spec: policy.VersionSelector{Selector: `!version.tag.startsWith("bad")`}},
			{ID: "cap", Spec: policy.Concurrency{MaxActivePerTarget: capN}},
			{ID: "retry", Spec: policy.Retry{MaxRetries: retries}},
		}})
		h.drain() // the targets' first evaluation
		var all []release.ReleaseTarget
		for _, env := range []string{"dev", "staging", "prod"} {
			all = append(all, target(env, "c1"), target(env, "c2"))
		}
		statuses := []release.JobStatus{release.JobSuccessful, release.JobFailure, release.JobInProgress,
			release.JobCancelled, release.JobActionRequired}
		steps := rapid.IntRange(1, 20).Draw(rt, "steps")
		for i := range steps {
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0:
				tag := fmt.Sprint("v", i)
				if rapid.IntRange(0, 2).Draw(rt, "denied") == 0 {
					tag = fmt.Sprint("bad", i)
				}
				h.clock.Advance(time.Second)
				require.NoError(rt, h.chain.CreateVersion(h.ctx, release.DeploymentVersion{ID: tag, DeploymentID: "api", Tag: tag}))
			case 1:
				tg := rapid.SampledFrom(all).Draw(rt, "target")
				active, err := h.store.JobsActiveByTarget(h.ctx, tg)
				require.NoError(rt, err)
				if len(active) == 0 {
					continue
				}
				j := rapid.SampledFrom(active).Draw(rt, "job")
				st := rapid.SampledFrom(statuses).Draw(rt, "status")
				if !j.Status.CanBecome(st) {
					continue
				}
				require.NoError(rt, h.chain.ReportJob(h.ctx, ports.JobReport{JobID: j.ID, Status: st}))
			case 2:
				h.clock.Advance(time.Duration(rapid.IntRange(1, 600).Draw(rt, "seconds")) * time.Second)
			case 3:
				require.NoError(rt, h.chain.EvaluateTargets(h.ctx, all...))
			}
			h.drain()
			h.checkInvariants(rt, all, capN, retries)
		}

		jobs := h.countJobs(all)
		releases := h.desiredReleases(all)
		require.NoError(rt, h.chain.EvaluateTargets(h.ctx, all...))
		h.drain()
		require.Equal(rt, jobs, h.countJobs(all), "re-evaluating unchanged state creates no job")
		require.Equal(rt, releases, h.desiredReleases(all), "nor another release")
	})
}

func (h *harness) checkInvariants(rt *rapid.T, all []release.ReleaseTarget, capN, retries int) {
	for _, tg := range all {
		rows, err := h.store.JobsByTarget(h.ctx, tg, 0)
		require.NoError(rt, err)
		active, run := 0, 0
		for i, j := range rows {
			require.False(rt, strings.HasPrefix(j.VersionID, "bad"), "denied version %s got job %s", j.VersionID, j.ID)
			if j.Status.IsActive() {
				active++
			}
			if i > 0 && rows[i-1].ReleaseID != j.ReleaseID {
				run = 0
			}
			run++
			require.LessOrEqual(rt, run, retries+1, "consecutive jobs of release %s on %s", j.ReleaseID, tg)
		}
		require.LessOrEqual(rt, active, capN, "active jobs on %s", tg)
	}
	h.agent.mu.Lock()
	defer h.agent.mu.Unlock()
	for id, n := range h.agent.dispatched {
		require.Equal(rt, 1, n, "job %s dispatched %d times", id, n)
	}
}

func (h *harness) countJobs(all []release.ReleaseTarget) int {
	n := 0
	for _, tg := range all {
		rows, err := h.store.JobsByTarget(h.ctx, tg, 0)
		require.NoError(h.t, err)
		n += len(rows)
	}
	return n
}

func (h *harness) desiredReleases(all []release.ReleaseTarget) map[string]string {
	out := map[string]string{}
	for _, tg := range all {
		d, err := h.store.DesiredGet(h.ctx, tg)
		if err == nil {
			out[tg.Key()] = d.ReleaseID
		}
	}
	return out
}
