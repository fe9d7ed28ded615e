package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/reconcilerhq/reconciler/adapters/simulated"
	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// demoStep is how long each simulated pod or pull-request step takes in the
// demo: slow enough to follow in the log, fast enough to finish in seconds.
const demoStep = 1500 * time.Millisecond

// demoRun is one run the demo seeds.
type demoRun struct {
	row  ports.RunRow
	body any
}

// demoRuns are the runs of the demo workspace, one story per kind: a repo
// tasks that each open and auto-merge a pull request, a standalone run, a persistent agent with messages in its inbox
// and a review of an external pull request.
func demoRuns() []demoRun {
	repo := func(id string) demoRun {
		return demoRun{
			row: ports.RunRow{Ref: reconcile.RunRef{Kind: reconcile.KindRepo, ID: id}, State: reconcile.RepoPending,
				Repo: "demo/api", Settings: reconcile.Settings{AutoMerge: true, AutoResume: true}},
			body: reconcile.RepoRun{ID: id, State: reconcile.RepoPending, Repo: "demo/api", MaxRetries: 2},
		}
	}
	const reviewPR = "https://git.example.com/demo/web/pull/42"
	return []demoRun{
		repo("demo-fix-login"),
		repo("demo-update-docs"),
		{
			row: ports.RunRow{Ref: reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "demo-nightly-report"},
				State: reconcile.StandaloneQueued},
			body: reconcile.StandaloneRun{ID: "demo-nightly-report", State: reconcile.StandaloneQueued, Workflow: "nightly-report", MaxRetries: 1},
		},
		{
			row: ports.RunRow{Ref: reconcile.RunRef{Kind: reconcile.KindPersistentAgent, ID: "demo-triage-bot"},
				State: reconcile.AgentIdle, Settings: reconcile.Settings{PodLifecycle: reconcile.LifecycleSticky,
					KeepWarm: reconcile.Duration(10 * time.Second)}},
			body: reconcile.AgentRun{ID: "demo-triage-bot", State: reconcile.AgentIdle, PendingMessages: 2},
		},
		{
			row: ports.RunRow{Ref: reconcile.RunRef{Kind: reconcile.KindPRReview, ID: "demo-review-42"},
				State: reconcile.ReviewQueued, PR: &reconcile.PullRequest{URL: reviewPR, Number: 42, State: reconcile.PROpen,
					Mergeable: true, Checks: reconcile.ChecksPassing, Review: reconcile.ReviewPending, HeadSHA: "c0ffee0000000000000000000000000000000042"}},
			body: reconcile.PRReviewRun{ID: "demo-review-42", State: reconcile.ReviewQueued, PRURL: reviewPR},
		},
	}
}

// seedDemo stores the demo runs and enqueues each, so the engine takes them
// from their first state to their last in the decision log.
func seedDemo(ctx context.Context, store ports.RunStore, q ports.Queue) error {
	var items []ports.EnqueueParams
	for _, d := range demoRuns() {
		body, err := json.Marshal(d.body)
		if err != nil {
			return fmt.Errorf("demo run %s: %w", d.row.Ref, err)
		}
		d.row.Body = body
		if _, err := store.RunCreate(ctx, d.row); err != nil {
			return fmt.Errorf("demo run %s: %w", d.row.Ref, err)
		}
		items = append(items, ports.EnqueueParams{Key: runs.Key(d.row.Ref)})
	}
	if err := q.WorkEnqueue(ctx, items...); err != nil {
		return fmt.Errorf("enqueue demo runs: %w", err)
	}
	return nil
}

// newDemoWorld returns the simulated agents and code host of the demo, one
// step apart: they write what they observe to store and wake the run
// through q.
func newDemoWorld(store ports.RunStore, q ports.Queue, clock ports.Clock, step time.Duration) *simulated.World {
	return simulated.NewWorld(store, clock, step, func(ctx context.Context, ref reconcile.RunRef) {
		_ = q.WorkEnqueue(ctx, ports.EnqueueParams{Key: runs.Key(ref)})
	})
}
