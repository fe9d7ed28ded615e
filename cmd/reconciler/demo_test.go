package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// TestDemoRunsFinish drives the demo workspace through the real engine on
// the in-memory adapters with the simulated world, and requires every run
// to reach the end of its story: both repo tasks merged, the standalone run completed, the agent's turn done
// with its inbox empty, the review submitted.
func TestDemoRunsFinish(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	clock := ports.SystemClock
	store, q := memory.NewRunStore(clock), memory.NewQueue(clock)
	sim := newDemoWorld(store, q, clock, 5*time.Millisecond)
	defer sim.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng := engine.New(q, engine.Options{Logger: log, PollInterval: 10 * time.Millisecond})
	for _, k := range reconcile.Kinds {
		eng.Register(string(k), &engine.RunProcessor{Kind: k, Store: store, Queue: q, Agents: sim, Code: sim,
			Config: reconcile.DefaultConfig(), Clock: clock, Logger: log}, engine.KindOptions{Concurrency: 2})
	}
	require.NoError(t, seedDemo(ctx, store, q))
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()

	want := map[reconcile.RunRef]reconcile.State{
		{Kind: reconcile.KindRepo, ID: "demo-fix-login"}:             reconcile.RepoCompleted,
		{Kind: reconcile.KindRepo, ID: "demo-update-docs"}:           reconcile.RepoCompleted,
		{Kind: reconcile.KindStandalone, ID: "demo-nightly-report"}:  reconcile.StandaloneCompleted,
		{Kind: reconcile.KindPRReview, ID: "demo-review-42"}:         reconcile.ReviewSubmitted,
		{Kind: reconcile.KindPersistentAgent, ID: "demo-triage-bot"}: reconcile.AgentIdle,
	}
	require.Len(t, want, len(demoRuns()), "every demo run has an expected end")
	deadline := time.Now().Add(20 * time.Second)
	for ref, state := range want {
		for {
			row, err := store.RunGet(ctx, ref)
			require.NoError(t, err)
			finished := row.State == state
			if ref.Kind == reconcile.KindPersistentAgent {
				var a reconcile.AgentRun
				require.NoError(t, json.Unmarshal(row.Body, &a))
				finished = finished && a.PendingMessages == 0 && a.TurnDone
			}
			if finished {
				break
			}
			require.True(t, time.Now().Before(deadline), "%s stuck in %s, want %s", ref, row.State, state)
			time.Sleep(5 * time.Millisecond) // polling the store is the only signal the engine offers
		}
	}
	first, err := store.RunGet(ctx, reconcile.RunRef{Kind: reconcile.KindRepo, ID: "demo-fix-login"})
	require.NoError(t, err)
	second, err := store.RunGet(ctx, reconcile.RunRef{Kind: reconcile.KindRepo, ID: "demo-update-docs"})
	require.NoError(t, err)
	require.NotNil(t, first.PR)
	require.Equal(t, reconcile.PRMerged, first.PR.State)
	require.NotNil(t, second.PR)
	require.NotEqual(t, first.PR.URL, second.PR.URL, "each task opened its own pull request")
	cancel()
	require.NoError(t, <-done)
}
