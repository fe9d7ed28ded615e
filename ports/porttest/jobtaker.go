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

// JobTaker is the conformance suite of ports.JobTaker: the stores newStore
// returns must implement it. Subtests run in parallel.
func JobTaker(t *testing.T, newStore ReleaseStoreFactory) {
	t.Helper()
	setup := relSetup(newStore)
	t.Run("OldestFirst", func(t *testing.T) { takeOldestFirst(setup(t)) })
	t.Run("HandedOutAgain", func(t *testing.T) { takeHandedOutAgain(setup(t)) })
	t.Run("OnlyPendingUntaken", func(t *testing.T) { takeOnlyPendingUntaken(setup(t)) })
	t.Run("Refused", func(t *testing.T) { takeRefused(setup(t)) })
	t.Run("Concurrent", func(t *testing.T) { takeConcurrent(setup(t)) })
	t.Run("Notify", func(t *testing.T) { takeNotify(setup(t)) })
}

// takeSettings are the suite's pull settings: a 30s lease, two hand-outs.
var takeSettings = release.PullSettings{Lease: 30 * time.Second, MaxHandOuts: 2}

func takerOf(t *testing.T, e *relEnv) ports.JobTaker {
	t.Helper()
	tk, ok := e.s.(ports.JobTaker)
	require.True(t, ok, "the store is no ports.JobTaker")
	return tk
}

// take takes the next job of agent for taker.
func take(e *relEnv, tk ports.JobTaker, agent, taker string) (ports.JobRow, error) {
	return tk.JobTake(e.ctx, ports.JobTakeParams{AgentID: agent, Settings: takeSettings, Taker: taker})
}

func takeOldestFirst(t *testing.T, e *relEnv) {
	tk := takerOf(t, e)
	f := relJobWorld(t, e)
	r1, r2 := f.release(tgt(relD1, relE1, relR1), "v1"), f.release(tgt(relD1, relE1, relR2), "v1")
	// Created out of id order: the oldest by created_at goes first.
	relCreateJob(t, e, relJob("j-c", r1, release.JobPending, relAt(3)))
	relCreateJob(t, e, relJob("j-a", r2, release.JobPending, relAt(1)))
	relCreateJob(t, e, relJob("j-b", r1, release.JobPending, relAt(2)))
	other := relJob("j-other", r2, release.JobPending, relAt(0))
	other.JobAgentID = "agent2"
	relCreateJob(t, e, other)
	relCreateJob(t, e, relJob("j-done", r2, release.JobSuccessful, relAt(0)))

	now := relNorm(e.clock.Advance(time.Hour))
	for _, want := range []string{"j-a", "j-b", "j-c"} {
		before := relGetJob(t, e, want)
		got, err := take(e, tk, relAgent, "host-1")
		require.NoError(t, err)
		require.Equal(t, want, got.ID, "the oldest takeable job first")
		require.Equal(t, release.JobInProgress, got.Status, "a taken pending job is in progress")
		require.Equal(t, &release.JobTake{HandOut: 1, MaxHandOuts: takeSettings.MaxHandOuts, Taker: "host-1", TakenAt: now}, got.Take)
		require.Equal(t, now.Add(takeSettings.Lease), got.LeaseUntil)
		require.Equal(t, now, got.StartedAt)
		require.Contains(t, got.Message, `taken by "host-1" (hand-out 1 of 2)`)
		require.Equal(t, before.Version+1, got.Version, "one write")
		stored := relGetJob(t, e, want)
		require.Equal(t, got.Job, stored.Job, "the returned job is the stored one")
		require.Equal(t, got.Version, stored.Version)
	}
	_, err := take(e, tk, relAgent, "host-1")
	require.ErrorIs(t, err, ports.ErrNotFound, "every job of the agent is taken")
	got, err := take(e, tk, "agent2", "host-2")
	require.NoError(t, err)
	require.Equal(t, "j-other", got.ID, "agents take only their own jobs")
	require.Equal(t, release.JobSuccessful, relGetJob(t, e, "j-done").Status, "an ended job is never taken")
}

func takeHandedOutAgain(t *testing.T, e *relEnv) {
	tk := takerOf(t, e)
	f := relJobWorld(t, e)
	r := f.release(tgt(relD1, relE1, relR1), "v1")
	relCreateJob(t, e, relJob("j1", r, release.JobPending, relAt(1)))
	first, err := take(e, tk, relAgent, "host-1")
	require.NoError(t, err)

	e.clock.Advance(takeSettings.Lease - time.Microsecond)
	_, err = take(e, tk, relAgent, "host-2")
	require.ErrorIs(t, err, ports.ErrNotFound, "a job is not handed out again while its lease runs")

	// A renewal through JobUpdate keeps the hand-out.
	renewed := relGetJob(t, e, "j1")
	renewed.LeaseUntil = relNorm(e.clock.Now()).Add(takeSettings.Lease)
	_, err = e.s.JobUpdate(e.ctx, renewed.Job, renewed.Version)
	require.NoError(t, err)
	require.Equal(t, first.Take, relGetJob(t, e, "j1").Take)
	e.clock.Advance(takeSettings.Lease - time.Microsecond)
	_, err = take(e, tk, relAgent, "host-2")
	require.ErrorIs(t, err, ports.ErrNotFound, "a renewed lease holds the job")

	now := relNorm(e.clock.Advance(time.Microsecond))
	second, err := take(e, tk, relAgent, "host-2")
	require.NoError(t, err, "at its lease's end the job is handed out again")
	require.Equal(t, "j1", second.ID)
	require.Equal(t, &release.JobTake{HandOut: 2, MaxHandOuts: 2, Taker: "host-2", TakenAt: now}, second.Take)
	require.Equal(t, now.Add(takeSettings.Lease), second.LeaseUntil)
	require.Equal(t, first.StartedAt, second.StartedAt, "the start stays the first taker's")
	require.Equal(t, release.JobInProgress, second.Status)
	require.Contains(t, second.Message, `handed out again to "host-2": the lease of "host-1" (hand-out 1) ran out at`)

	e.clock.Advance(takeSettings.Lease)
	_, err = take(e, tk, relAgent, "host-3")
	require.ErrorIs(t, err, ports.ErrNotFound, "no hand-out left after max_hand_outs")
	require.Equal(t, 2, relGetJob(t, e, "j1").Take.HandOut)
}

func takeOnlyPendingUntaken(t *testing.T, e *relEnv) {
	tk := takerOf(t, e)
	f := relJobWorld(t, e)
	r := f.release(tgt(relD1, relE1, relR1), "v1")
	// Reported in progress by its agent without a take (the API's job
	// report): it is not handed out.
	row := relCreateJob(t, e, relJob("j1", r, release.JobPending, relAt(1)))
	row.Status = release.JobInProgress
	_, err := e.s.JobUpdate(e.ctx, row.Job, row.Version)
	require.NoError(t, err)
	// Taken, then ended: never handed out again.
	relCreateJob(t, e, relJob("j2", r, release.JobPending, relAt(2)))
	got, err := take(e, tk, relAgent, "host-1")
	require.NoError(t, err)
	require.Equal(t, "j2", got.ID)
	got.Status, got.CompletedAt = release.JobSuccessful, relNorm(e.clock.Now())
	_, err = e.s.JobUpdate(e.ctx, got.Job, got.Version)
	require.NoError(t, err)
	e.clock.Advance(2 * takeSettings.Lease)
	_, err = take(e, tk, relAgent, "host-1")
	require.ErrorIs(t, err, ports.ErrNotFound)
}

func takeRefused(t *testing.T, e *relEnv) {
	tk := takerOf(t, e)
	f := relJobWorld(t, e)
	r := f.release(tgt(relD1, relE1, relR1), "v1")
	row := relCreateJob(t, e, relJob("j1", r, release.JobPending, relAt(1)))
	for _, c := range []struct {
		field string
		p     ports.JobTakeParams
	}{
		{"agent_id", ports.JobTakeParams{Settings: takeSettings, Taker: "h"}},
		{"taker", ports.JobTakeParams{AgentID: relAgent, Settings: takeSettings}},
		{"lease", ports.JobTakeParams{AgentID: relAgent, Taker: "h", Settings: release.PullSettings{MaxHandOuts: 1}}},
		{"max_hand_outs", ports.JobTakeParams{AgentID: relAgent, Taker: "h", Settings: release.PullSettings{Lease: time.Minute}}},
	} {
		_, err := tk.JobTake(e.ctx, c.p)
		requireInvalid(t, err, c.field)
	}
	_, err := tk.JobTake(e.ctx, ports.JobTakeParams{AgentID: relAgent, Settings: takeSettings, Taker: "bad\x00taker"})
	require.ErrorIs(t, err, release.ErrInvalid, "a taker name no store keeps")
	require.Equal(t, row, relGetJob(t, e, "j1"), "a refused take changes nothing")
}

func takeConcurrent(t *testing.T, e *relEnv) {
	tk := takerOf(t, e)
	f := relJobWorld(t, e)
	const jobs, takers = 24, 6
	targets := []release.ReleaseTarget{tgt(relD1, relE1, relR1), tgt(relD1, relE1, relR2), tgt(relD1, relE2, relR1)}
	for i := range jobs {
		relCreateJob(t, e, relJob(fmt.Sprintf("j%02d", i), f.release(targets[i%len(targets)], "v1"), release.JobPending, relAt(i)))
	}
	got := make([][]string, takers)
	errs := make([]error, takers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range takers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for {
				row, err := take(e, tk, relAgent, fmt.Sprintf("taker-%d", w))
				if err != nil {
					if !errors.Is(err, ports.ErrNotFound) {
						errs[w] = err
					}
					return
				}
				got[w] = append(got[w], row.ID)
			}
		}()
	}
	close(start)
	wg.Wait()
	seen := map[string]int{}
	for w := range takers {
		require.NoError(t, errs[w], "taker %d", w)
		for _, id := range got[w] {
			seen[id]++
		}
	}
	require.Len(t, seen, jobs, "every job is taken")
	for id, n := range seen {
		require.Equal(t, 1, n, "job %s was taken %d times", id, n)
		require.Equal(t, 1, relGetJob(t, e, id).Take.HandOut)
	}
}

func takeNotify(t *testing.T, e *relEnv) {
	tk := takerOf(t, e)
	f := relJobWorld(t, e)
	r := f.release(tgt(relD1, relE1, relR1), "v1")
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	wake := tk.JobTakeNotify(ctx)
	// Drain what subscribing may send (a listener's first connection
	// wakes once), then create a pending job: the wake-up follows.
	drain(wake)
	relCreateJob(t, e, relJob("j1", r, release.JobPending, relAt(1)))
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up after a pending job was created")
	}
	got, err := take(e, tk, relAgent, "host-1")
	require.NoError(t, err, "the job the wake-up announced is takeable")
	require.Equal(t, "j1", got.ID)
}

// drain empties a wake-up channel.
func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}
