package chain_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
)

// failingCreates is a store whose JobCreateMany fails the create of one
// target's job, storing nothing for it (JobCreate of it works), and
// records the calls.
type failingCreates struct {
	ports.ReleaseStore
	fail string // the target key whose create fails in JobCreateMany

	mu    sync.Mutex
	calls [][]string // the target keys of each JobCreateMany call
	alone []string   // the target keys created with JobCreate
}

// JobCreateMany creates as the store does, but fails fail's create.
func (s *failingCreates) JobCreateMany(ctx context.Context, creates []ports.JobCreateParams) []ports.JobCreated {
	keys := make([]string, len(creates))
	for i, p := range creates {
		keys[i] = p.Job.TargetKey
	}
	s.mu.Lock()
	s.calls = append(s.calls, keys)
	s.mu.Unlock()
	var rest []ports.JobCreateParams
	for _, p := range creates {
		if p.Job.TargetKey != s.fail {
			rest = append(rest, p)
		}
	}
	done := s.ReleaseStore.JobCreateMany(ctx, rest)
	out := make([]ports.JobCreated, 0, len(creates))
	for _, p := range creates {
		if p.Job.TargetKey == s.fail {
			out = append(out, ports.JobCreated{Err: errors.New("connection reset")})
			continue
		}
		out, done = append(out, done[0]), done[1:]
	}
	return out
}

// JobCreate creates as the store does and records the target.
func (s *failingCreates) JobCreate(ctx context.Context, p ports.JobCreateParams) (ports.JobRow, bool, error) {
	s.mu.Lock()
	s.alone = append(s.alone, p.Job.TargetKey)
	s.mu.Unlock()
	return s.ReleaseStore.JobCreate(ctx, p)
}

// InTx runs fn in one transaction of the store when it has them.
func (s *failingCreates) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if tx, ok := s.ReleaseStore.(ports.Transactor); ok {
		return tx.InTx(ctx, fn)
	}
	return fn(ctx)
}

// TestBatchCreateFailureRunsEachItemAlone: the job-dispatch passes of a
// batch create their jobs in one JobCreateMany call; when one create
// fails, the batch runs again one item at a time, so that every target
// still gets its job, created alone, and handed to its agent once.
func TestBatchCreateFailureRunsEachItemAlone(t *testing.T) {
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			clock := porttest.NewFakeClock(t0)
			store, q := backends[backend](t, clock)
			failing := &failingCreates{ReleaseStore: store, fail: target("prod", "c2").Key()}
			h := newHarnessOn(t, t.Context(), clock, failing, q)
			h.batched = true
			h.version("v1")
			h.drain()

			batched := false
			for _, keys := range failing.calls {
				batched = batched || len(keys) > 1 && strings.Contains(strings.Join(keys, " "), failing.fail)
			}
			require.True(t, batched, "a JobCreateMany call held the failing target's create among others: %v", failing.calls)
			require.Contains(t, failing.alone, failing.fail, "the failing target's job was created alone")
			for _, env := range []string{"dev", "staging", "prod"} {
				for _, res := range []string{"c1", "c2"} {
					jobs := h.jobs(env, res)
					require.Len(t, jobs, 1, "%s/%s", env, res)
					h.agent.mu.Lock()
					sent := h.agent.dispatched[jobs[0].ID]
					h.agent.mu.Unlock()
					require.Equal(t, 1, sent, "%s/%s: handed over once", env, res)
				}
			}
		})
	}
}
