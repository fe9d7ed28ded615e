package chain_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// priorityQueue records the priority of every enqueue.
type priorityQueue struct {
	ports.Queue
	mu   sync.Mutex
	prio map[ports.WorkKey][]int
}

func (q *priorityQueue) WorkEnqueue(ctx context.Context, ps ...ports.EnqueueParams) error {
	q.mu.Lock()
	for _, p := range ps {
		q.prio[p.Key] = append(q.prio[p.Key], p.Priority)
	}
	q.mu.Unlock()
	return q.Queue.WorkEnqueue(ctx, ps...)
}

// TestProgressionWakeRunsFirst: the targets an environment wake wakes are
// enqueued at chain.ProgressionPriority, and their hand-off to job-dispatch
// keeps it, so a rollout in flight runs ahead of new versions' items
// (priority 0); the version's own first wake stays at 0.
func TestProgressionWakeRunsFirst(t *testing.T) {
	for name, open := range backends {
		for mode, batched := range map[string]bool{"": false, "-batched": true} {
			t.Run(name+mode, func(t *testing.T) {
				t.Parallel()
				clock := porttest.NewFakeClock(t0)
				store, q := open(t, clock)
				pq := &priorityQueue{Queue: q, prio: map[ports.WorkKey][]int{}}
				h := newHarnessOn(t, t.Context(), clock, store, pq)
				h.batched = batched
				progressionPolicies(h, false)
				h.drain()
				clear(pq.prio)
				h.version("v1")
				h.drain()
				staging := chain.TargetKey(chain.KindDesiredRelease, target("staging", "c1"))
				require.Equal(t, []int{0}, pq.prio[staging], "the version's wake")
				h.finish(release.JobSuccessful, "dev")
				h.drain()
				h.requireRunning("v1", "staging")
				require.Equal(t, []int{0, chain.ProgressionPriority}, pq.prio[staging], "the environment's wake")
				dispatch := pq.prio[chain.TargetKey(chain.KindJobDispatch, target("staging", "c1"))]
				require.Equal(t, chain.ProgressionPriority, dispatch[len(dispatch)-1], "the hand-off keeps the priority")
				devDispatch := pq.prio[chain.TargetKey(chain.KindJobDispatch, target("dev", "c1"))]
				require.Equal(t, 0, devDispatch[0], "a version's first hand-off")
			})
		}
	}
}
