package chain_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// factsReadCounter counts the facts reads of the chain: the statements
// (TargetFactsGet, TargetFactsGetMany calls) and the targets they read,
// and apart the stamp reads (TargetStampMany), before each of which it
// runs beforeStamp when set: a change between desired-release and
// job-dispatch.
type factsReadCounter struct {
	ports.ReleaseStore
	calls, targets           atomic.Int64
	stampCalls, stampTargets atomic.Int64
	beforeStamp              func()
	// read are the targets whose facts were read.
	read sync.Map
}

func (s *factsReadCounter) TargetStampMany(ctx context.Context, ts []release.ReleaseTarget, jobLimit int) (map[release.ReleaseTarget]ports.FactsStamp, error) {
	if s.beforeStamp != nil {
		s.beforeStamp()
	}
	s.stampCalls.Add(1)
	s.stampTargets.Add(int64(len(ts)))
	return s.ReleaseStore.TargetStampMany(ctx, ts, jobLimit)
}

func (s *factsReadCounter) TargetFactsGet(ctx context.Context, t release.ReleaseTarget, jobLimit int) (ports.TargetFacts, error) {
	s.calls.Add(1)
	s.targets.Add(1)
	s.read.Store(t, true)
	return s.ReleaseStore.TargetFactsGet(ctx, t, jobLimit)
}

func (s *factsReadCounter) TargetFactsGetMany(ctx context.Context, ts []release.ReleaseTarget, jobLimit int) (map[release.ReleaseTarget]ports.TargetFacts, error) {
	s.calls.Add(1)
	s.targets.Add(int64(len(ts)))
	for _, t := range ts {
		s.read.Store(t, true)
	}
	return s.ReleaseStore.TargetFactsGetMany(ctx, ts, jobLimit)
}

// countingHarness is a harness draining in batches over a store of open
// that counts the facts reads.
func countingHarness(t *testing.T, open func(*testing.T, ports.Clock) (ports.ReleaseStore, ports.Queue)) (*factsReadCounter, *harness) {
	clock := porttest.NewFakeClock(t0)
	store, q := open(t, clock)
	counting := &factsReadCounter{ReleaseStore: store}
	h := newHarnessOn(t, t.Context(), clock, counting, q)
	h.batched = true
	return counting, h
}

// TestRolloutFactsReadsPerTarget: rolling a new version out to targets
// without policies, in batches as under Run, reads each target's facts
// once (desired-release, which hands them to job-dispatch) in one
// statement per batch, and job-dispatch checks them current with one stamp
// read per batch; so a second read per target (e.g. a controller between
// them, or a load outside the batch's prefetch) cannot creep back
// unnoticed.
func TestRolloutFactsReadsPerTarget(t *testing.T) {
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			counting, h := countingHarness(t, open)
			h.drain() // the new targets' first decision: no version yet
			counting.calls.Store(0)
			counting.targets.Store(0)

			h.version("v1")
			h.drain()
			const targets = 6 // 3 environments × 2 clusters (seed)
			for _, env := range []string{"dev", "staging", "prod"} {
				for _, res := range []string{"c1", "c2"} {
					require.Len(t, h.jobs(env, res), 1, "%s/%s has its job", env, res)
				}
			}
			t.Logf("facts reads: %d targets in %d statements; stamps: %d targets in %d statements; for %d targets",
				counting.targets.Load(), counting.calls.Load(), counting.stampTargets.Load(), counting.stampCalls.Load(), targets)
			require.LessOrEqual(t, counting.targets.Load(), int64(targets), "facts read more than once per target")
			require.LessOrEqual(t, counting.calls.Load(), int64(1), "facts read in more than one statement per batch")
			require.LessOrEqual(t, counting.stampTargets.Load(), int64(targets), "stamps read more than once per target")
			require.LessOrEqual(t, counting.stampCalls.Load(), int64(1), "stamps read in more than one statement per batch")
		})
	}
}

// TestHandedOffFactsStale: a change between desired-release and
// job-dispatch (made through the store, as by another process, just
// before job-dispatch checks the handed-off facts) makes job-dispatch
// read the changed target's facts afresh and decide on them: the target's
// desired release changed back to the running one, a job created
// elsewhere under a concurrency rule, a policy capping the environment
// published.
func TestHandedOffFactsStale(t *testing.T) {
	cases := map[string]struct {
		setup  func(h *harness) // before v2
		change func(h *harness) // between desired-release and job-dispatch
		check  func(t *testing.T, h *harness)
		stale  []release.ReleaseTarget
	}{
		"desired release changed": {
			change: func(h *harness) {
				d, err := h.store.DesiredGet(h.ctx, target("dev", "c1"))
				require.NoError(h.t, err)
				v1 := h.jobs("dev", "c1")[0].ReleaseID
				require.NotEqual(h.t, v1, d.ReleaseID, "desired-release chose v2")
				_, err = h.store.DesiredSet(h.ctx, ports.DesiredRelease{Target: target("dev", "c1"), ReleaseID: v1})
				require.NoError(h.t, err)
			},
			check: func(t *testing.T, h *harness) {
				require.Equal(t, "v1", h.running("dev", "c1"), "no v2 job on the target wanting v1 again")
				require.Equal(t, "v2", h.running("dev", "c2"))
			},
			stale: []release.ReleaseTarget{target("dev", "c1")},
		},
		"job created elsewhere": {
			setup: func(h *harness) {
				h.policy(policy.Policy{ID: "one-at-a-time", Selector: "true", Rules: []policy.Rule{{ID: "c", Spec: policy.Concurrency{MaxActivePerTarget: 1}}}})
			},
			change: func(h *harness) {
				rel := h.jobs("dev", "c1")[0]
				j := rel.Job
				j.ID, j.Status, j.ExternalID, j.StartedAt, j.CompletedAt = "elsewhere", release.JobInProgress, "ext-elsewhere", h.clock.Now(), time.Time{}
				j.CreatedAt = h.clock.Now()
				_, created, err := h.store.JobCreate(h.ctx, ports.JobCreateParams{Job: j, IdempotencyKey: "elsewhere"})
				require.NoError(h.t, err)
				require.True(h.t, created)
			},
			check: func(t *testing.T, h *harness) {
				for _, j := range h.jobs("dev", "c1") {
					require.NotEqual(t, "v2", j.VersionID, "no v2 job beside the active one")
				}
				require.Equal(t, "v2", h.running("dev", "c2"))
			},
			stale: []release.ReleaseTarget{target("dev", "c1")},
		},
		"policy published": {
			change: func(h *harness) {
				h.policy(policy.Policy{ID: "prod-cap", Selector: `environment.name == "prod"`, Rules: []policy.Rule{
					{ID: "cap", Spec: policy.Concurrency{MaxActivePerTarget: 1, MaxActivePerEnvironment: 1}}}})
			},
			check: func(t *testing.T, h *harness) {
				v2 := 0
				for _, res := range []string{"c1", "c2"} {
					if h.running("prod", res) == "v2" {
						v2++
					}
				}
				require.Equal(t, 1, v2, "the environment's cap holds")
			},
			stale: []release.ReleaseTarget{target("prod", "c1"), target("prod", "c2")},
		},
	}
	for name, open := range backends {
		for cname, tc := range cases {
			t.Run(name+"/"+cname, func(t *testing.T) {
				t.Parallel()
				counting, h := countingHarness(t, open)
				if tc.setup != nil {
					tc.setup(h)
				}
				h.version("v1")
				h.drain()
				h.finish(release.JobSuccessful, "dev", "staging", "prod")
				h.drain()
				var once sync.Once
				counting.beforeStamp = func() {
					once.Do(func() {
						counting.read.Clear()
						tc.change(h)
					})
				}
				h.version("v2")
				h.drain()
				require.NotZero(t, counting.stampCalls.Load(), "job-dispatch checked the handed-off facts")
				for _, st := range tc.stale {
					_, read := counting.read.Load(st)
					require.True(t, read, "%s: facts read afresh", st.Key())
				}
				tc.check(t, h)
			})
		}
	}
}
