package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// prReviewSetup returns a review snapshot ready to launch: queued, an open
// PR at head "new", capacity free, default settings.
func prReviewSetup(t *testing.T) *PRReviewSnapshot {
	t.Helper()
	return &PRReviewSnapshot{
		Run: PRReviewRun{ID: "review-1", State: ReviewQueued, Version: 3, PRURL: "https://github.example/o/r/pull/9", ReviewedSHA: "old"},
		PR:  &PullRequest{URL: "https://github.example/o/r/pull/9", Number: 9, State: PROpen, HeadSHA: "new"},
		World: World{
			Now:        time.Date(2026, time.May, 1, 9, 30, 0, 0, time.UTC),
			JitterSeed: 7,
			Capacity:   Capacity{GlobalActive: 1, GlobalLimit: 4},
		},
	}
}

// prReviewHelperRow is one rule of the PR review decision.
type prReviewHelperRow struct {
	name string
	edit func(s *PRReviewSnapshot)
	want func(s *PRReviewSnapshot) Action
}

// prReviewHelperRequeue is the expected patch of a move back to queued.
func prReviewHelperRequeue(reruns int, clearIntent bool) *Patch {
	return &Patch{ClearIntent: clearIntent, Reruns: propPtr(reruns), ReviewDone: propPtr(false)}
}

func TestDecidePRReviewRules(t *testing.T) {
	t.Parallel()
	// in puts the review in state st at the PR's current head.
	in := func(st State) func(s *PRReviewSnapshot) {
		return func(s *PRReviewSnapshot) {
			s.Run.State = st
			s.Run.ReviewedSHA = s.PR.HeadSHA
			s.Pod = &Pod{Name: "rv", Phase: PodRunning}
		}
	}
	// pushed moves the PR's head past the reviewed SHA.
	pushed := func(s *PRReviewSnapshot) { s.PR.HeadSHA = "newer" }
	rows := []prReviewHelperRow{
		{"backoff in the future is a noop until it ends, intents included", func(s *PRReviewSnapshot) {
			s.Run.Reconcile = Reconcile{BackoffUntil: s.Now.Add(time.Minute), Intent: IntentCancel}
		}, func(s *PRReviewSnapshot) Action {
			return Noop{WakeAt: s.Now.Add(time.Minute), Reason: "backoff-active"}
		}},
		{"backoff in the past is ignored", func(s *PRReviewSnapshot) {
			s.Run.Reconcile.BackoffUntil = s.Now.Add(-time.Second)
		}, func(*PRReviewSnapshot) Action {
			return LaunchReviewRun{From: ReviewQueued, To: ReviewRunning, HeadSHA: "new", Reason: "review-launched"}
		}},
		{"cancel stops a reviewing review", func(s *PRReviewSnapshot) {
			in(ReviewRunning)(s)
			s.Run.Reconcile.Intent = IntentCancel
		}, func(*PRReviewSnapshot) Action {
			return Transition{From: ReviewRunning, To: ReviewCancelled, Patch: &Patch{ClearIntent: true}, Reason: "intent-cancel"}
		}},
		{"cancel stops a queued review", func(s *PRReviewSnapshot) {
			s.Run.Reconcile.Intent = IntentCancel
		}, func(*PRReviewSnapshot) Action {
			return Transition{From: ReviewQueued, To: ReviewCancelled, Patch: &Patch{ClearIntent: true}, Reason: "intent-cancel"}
		}},
		{"cancel on a terminal review is cleared", func(s *PRReviewSnapshot) {
			in(ReviewSubmitted)(s)
			s.Run.Reconcile.Intent = IntentCancel
		}, func(*PRReviewSnapshot) Action {
			return ClearControlIntent{Intent: IntentCancel, Reason: "cancel-not-applicable"}
		}},
		{"rereview requeues a submitted review and resets the rerun budget", func(s *PRReviewSnapshot) {
			in(ReviewSubmitted)(s)
			s.Run.ReviewDone = true
			s.Run.Reruns = 10
			s.Run.Reconcile.Intent = IntentRereview
		}, func(*PRReviewSnapshot) Action {
			return Transition{From: ReviewSubmitted, To: ReviewQueued, Patch: prReviewHelperRequeue(0, true), Reason: "intent-rereview"}
		}},
		{"rereview requeues a failed review", func(s *PRReviewSnapshot) {
			s.Run.State = ReviewFailed
			s.Run.Reconcile.Intent = IntentRereview
		}, func(*PRReviewSnapshot) Action {
			return Transition{From: ReviewFailed, To: ReviewQueued, Patch: prReviewHelperRequeue(0, true), Reason: "intent-rereview"}
		}},
		{"rereview restarts a reviewing review", func(s *PRReviewSnapshot) {
			in(ReviewRunning)(s)
			s.Run.Reruns = 2
			s.Run.Reconcile.Intent = IntentRereview
		}, func(*PRReviewSnapshot) Action {
			return Transition{From: ReviewRunning, To: ReviewQueued, Patch: prReviewHelperRequeue(0, true), Reason: "intent-rereview"}
		}},
		{"rereview on a queued review is cleared", func(s *PRReviewSnapshot) {
			s.Run.Reconcile.Intent = IntentRereview
		}, func(*PRReviewSnapshot) Action {
			return ClearControlIntent{Intent: IntentRereview, Reason: "rereview-not-applicable"}
		}},
		{"rereview never revives a cancelled review", func(s *PRReviewSnapshot) {
			s.Run.State = ReviewCancelled
			s.Run.Reconcile.Intent = IntentRereview
		}, func(*PRReviewSnapshot) Action {
			return ClearControlIntent{Intent: IntentRereview, Reason: "cancelled-is-final"}
		}},
		{"an intent reviews do not support is cleared", func(s *PRReviewSnapshot) {
			s.Run.Reconcile.Intent = IntentPause
		}, func(*PRReviewSnapshot) Action {
			return ClearControlIntent{Intent: IntentPause, Reason: "intent-unsupported"}
		}},
		{"an intent applies despite a read error", func(s *PRReviewSnapshot) {
			s.Run.Reconcile.Intent = IntentCancel
			s.ReadErrors = []ReadError{{Source: "pr", Message: "rate limited"}}
		}, func(*PRReviewSnapshot) Action {
			return Transition{From: ReviewQueued, To: ReviewCancelled, Patch: &Patch{ClearIntent: true}, Reason: "intent-cancel"}
		}},
		{"a read error defers instead of deciding", func(s *PRReviewSnapshot) {
			s.PR.State = PRClosed
			s.Run.Reconcile.Attempts = 2
			s.ReadErrors = []ReadError{{Source: "pr", Message: "rate limited"}}
		}, nil},
		{"a closed PR makes a reviewing review stale", func(s *PRReviewSnapshot) {
			in(ReviewRunning)(s)
			s.Run.ReviewDone = true
			s.PR.State = PRClosed
		}, func(*PRReviewSnapshot) Action {
			return MarkStale{From: ReviewRunning, To: ReviewStale, Reason: "pr-closed"}
		}},
		{"a merged PR makes a queued review stale", func(s *PRReviewSnapshot) {
			s.PR.State = PRMerged
			s.PR.Merged = true
		}, func(*PRReviewSnapshot) Action {
			return MarkStale{From: ReviewQueued, To: ReviewStale, Reason: "pr-closed"}
		}},
		{"a closed PR leaves a submitted review alone", func(s *PRReviewSnapshot) {
			in(ReviewSubmitted)(s)
			s.PR.State = PRClosed
		}, func(*PRReviewSnapshot) Action { return Noop{Reason: "terminal-state"} }},
		{"queued under capacity launches at the PR head", func(*PRReviewSnapshot) {}, func(*PRReviewSnapshot) Action {
			return LaunchReviewRun{From: ReviewQueued, To: ReviewRunning, HeadSHA: "new", Reason: "review-launched"}
		}},
		{"queued at full capacity requeues soon", func(s *PRReviewSnapshot) {
			s.Capacity = Capacity{RepoActive: 2, RepoLimit: 2}
		}, nil},
		{"queued without an observed PR waits", func(s *PRReviewSnapshot) {
			s.PR = nil
		}, func(*PRReviewSnapshot) Action { return Noop{Reason: "pr-missing"} }},
		{"reviewing with the review done is ready", func(s *PRReviewSnapshot) {
			in(ReviewRunning)(s)
			s.Run.ReviewDone = true
		}, func(*PRReviewSnapshot) Action {
			return Transition{From: ReviewRunning, To: ReviewReady, Reason: "review-done"}
		}},
		{"reviewing with the review done beats a terminated pod", func(s *PRReviewSnapshot) {
			in(ReviewRunning)(s)
			s.Run.ReviewDone = true
			s.Pod = &Pod{Name: "rv", Phase: PodTerminated, ExitCode: propPtr(0)}
		}, func(*PRReviewSnapshot) Action {
			return Transition{From: ReviewRunning, To: ReviewReady, Reason: "review-done"}
		}},
		{"reviewing with an errored pod fails", func(s *PRReviewSnapshot) {
			in(ReviewRunning)(s)
			s.Pod.Phase = PodError
		}, func(*PRReviewSnapshot) Action {
			return Transition{From: ReviewRunning, To: ReviewFailed, Reason: "pod-dead"}
		}},
		{"reviewing with a pod terminated before the review is done fails", func(s *PRReviewSnapshot) {
			in(ReviewRunning)(s)
			s.Pod = &Pod{Name: "rv", Phase: PodTerminated, ExitCode: propPtr(0)}
		}, func(*PRReviewSnapshot) Action {
			return Transition{From: ReviewRunning, To: ReviewFailed, Reason: "pod-dead"}
		}},
		{"reviewing with a pod unknown within its grace waits for the grace to end", func(s *PRReviewSnapshot) {
			in(ReviewRunning)(s)
			s.Pod.Phase, s.Pod.Since = PodUnknown, s.Now.Add(-time.Minute)
		}, func(s *PRReviewSnapshot) Action {
			return Noop{WakeAt: s.Now.Add(4 * time.Minute), Reason: "pod-unknown"}
		}},
		{"reviewing with a failed capacity read still finishes the review", func(s *PRReviewSnapshot) {
			in(ReviewRunning)(s)
			s.Run.ReviewDone = true
			s.ReadErrors = []ReadError{{Source: SourceCapacity}}
		}, func(*PRReviewSnapshot) Action {
			return Transition{From: ReviewRunning, To: ReviewReady, Reason: "review-done"}
		}},
		{"reviewing with a pod unknown past its grace fails saying so", func(s *PRReviewSnapshot) {
			in(ReviewRunning)(s)
			s.Pod.Phase, s.Pod.Since = PodUnknown, s.Now.Add(-5*time.Minute)
		}, func(*PRReviewSnapshot) Action {
			return Transition{From: ReviewRunning, To: ReviewFailed, Reason: "pod-unknown-past-grace"}
		}},
		{"reviewing before its pod is observed waits", func(s *PRReviewSnapshot) {
			in(ReviewRunning)(s)
			s.Pod = nil
			s.Heartbeat = time.Time{}
		}, func(*PRReviewSnapshot) Action { return Noop{Reason: "awaiting-pod"} }},
		{"reviewing with no pod and a stale heartbeat fails", func(s *PRReviewSnapshot) {
			in(ReviewRunning)(s)
			s.Pod = nil
			s.Heartbeat = s.Now.Add(-time.Hour)
		}, func(*PRReviewSnapshot) Action {
			return Transition{From: ReviewRunning, To: ReviewFailed, Reason: "stalled"}
		}},
		{"reviewing with a live pod waits", func(s *PRReviewSnapshot) {
			in(ReviewRunning)(s)
			s.Pod.Phase = PodPending
		}, func(*PRReviewSnapshot) Action { return Noop{Reason: "review-in-progress"} }},
		{"reviewing on a new head re-runs when rerun-on-push is on", func(s *PRReviewSnapshot) {
			in(ReviewRunning)(s)
			pushed(s)
			s.Run.ReviewDone = true
			s.Run.Reruns = 2
			s.Settings.RerunOnPush = true
		}, func(*PRReviewSnapshot) Action {
			return Transition{From: ReviewRunning, To: ReviewQueued, Patch: prReviewHelperRequeue(3, false), Reason: "rerun-on-push"}
		}},
		{"reviewing on a new head goes stale when rerun-on-push is off", func(s *PRReviewSnapshot) {
			in(ReviewRunning)(s)
			pushed(s)
		}, func(*PRReviewSnapshot) Action {
			return MarkStale{From: ReviewRunning, To: ReviewStale, Reason: "pr-moved-on"}
		}},
		{"reviewing on a new head goes stale at the configured rerun cap", func(s *PRReviewSnapshot) {
			in(ReviewRunning)(s)
			pushed(s)
			s.Run.Reruns = 3
			s.Settings.RerunOnPush = true
			s.Settings.MaxReruns = 3
		}, func(*PRReviewSnapshot) Action {
			return MarkStale{From: ReviewRunning, To: ReviewStale, Reason: "pr-moved-on"}
		}},
		{"the default rerun cap of 10 allows the tenth re-run", func(s *PRReviewSnapshot) {
			in(ReviewRunning)(s)
			pushed(s)
			s.Run.Reruns = 9
			s.Settings.RerunOnPush = true
		}, func(*PRReviewSnapshot) Action {
			return Transition{From: ReviewRunning, To: ReviewQueued, Patch: prReviewHelperRequeue(10, false), Reason: "rerun-on-push"}
		}},
		{"the default rerun cap of 10 refuses the eleventh re-run", func(s *PRReviewSnapshot) {
			in(ReviewRunning)(s)
			pushed(s)
			s.Run.Reruns = 10
			s.Settings.RerunOnPush = true
		}, func(*PRReviewSnapshot) Action {
			return MarkStale{From: ReviewRunning, To: ReviewStale, Reason: "pr-moved-on"}
		}},
		{"ready on an unchanged head submits the review", func(s *PRReviewSnapshot) {
			in(ReviewReady)(s)
			s.Pod.Phase = PodTerminated
		}, func(*PRReviewSnapshot) Action {
			return SubmitReview{From: ReviewReady, To: ReviewSubmitted, Reason: "review-ready"}
		}},
		{"ready on a new head re-runs when allowed", func(s *PRReviewSnapshot) {
			in(ReviewReady)(s)
			pushed(s)
			s.Settings.RerunOnPush = true
		}, func(*PRReviewSnapshot) Action {
			return Transition{From: ReviewReady, To: ReviewQueued, Patch: prReviewHelperRequeue(1, false), Reason: "rerun-on-push"}
		}},
		{"ready on a new head goes stale otherwise", func(s *PRReviewSnapshot) {
			in(ReviewReady)(s)
			pushed(s)
		}, func(*PRReviewSnapshot) Action {
			return MarkStale{From: ReviewReady, To: ReviewStale, Reason: "pr-moved-on"}
		}},
		{"ready without an observed PR waits", func(s *PRReviewSnapshot) {
			in(ReviewReady)(s)
			s.PR = nil
		}, func(*PRReviewSnapshot) Action { return Noop{Reason: "pr-missing"} }},
		{"submitted on a new head re-runs when allowed", func(s *PRReviewSnapshot) {
			in(ReviewSubmitted)(s)
			pushed(s)
			s.Run.Reruns = 4
			s.Settings.RerunOnPush = true
		}, func(*PRReviewSnapshot) Action {
			return Transition{From: ReviewSubmitted, To: ReviewQueued, Patch: prReviewHelperRequeue(5, false), Reason: "rerun-on-push"}
		}},
		{"submitted on a new head stays when rerun-on-push is off", func(s *PRReviewSnapshot) {
			in(ReviewSubmitted)(s)
			pushed(s)
		}, func(*PRReviewSnapshot) Action { return Noop{Reason: "terminal-state"} }},
		{"submitted on a new head stays at the rerun cap", func(s *PRReviewSnapshot) {
			in(ReviewSubmitted)(s)
			pushed(s)
			s.Run.Reruns = 1
			s.Settings.RerunOnPush = true
			s.Settings.MaxReruns = 1
		}, func(*PRReviewSnapshot) Action { return Noop{Reason: "terminal-state"} }},
		{"submitted on a new head of a closed PR stays", func(s *PRReviewSnapshot) {
			in(ReviewSubmitted)(s)
			pushed(s)
			s.PR.State = PRClosed
			s.Settings.RerunOnPush = true
		}, func(*PRReviewSnapshot) Action { return Noop{Reason: "terminal-state"} }},
		{"stale is terminal", func(s *PRReviewSnapshot) {
			s.Run.State = ReviewStale
			s.Settings.RerunOnPush = true
		}, func(*PRReviewSnapshot) Action { return Noop{Reason: "terminal-state"} }},
		{"failed is terminal", func(s *PRReviewSnapshot) {
			s.Run.State = ReviewFailed
		}, func(*PRReviewSnapshot) Action { return Noop{Reason: "terminal-state"} }},
		{"cancelled is terminal", func(s *PRReviewSnapshot) {
			s.Run.State = ReviewCancelled
		}, func(*PRReviewSnapshot) Action { return Noop{Reason: "terminal-state"} }},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			s := prReviewSetup(t)
			row.edit(s)
			got := DecidePRReview(s)
			switch {
			case row.want != nil:
				require.Equal(t, row.want(s), got)
			case len(s.ReadErrors) > 0:
				d, ok := got.(DeferWithBackoff)
				require.True(t, ok, "got %#v", got)
				require.Equal(t, "read-failed", d.Reason)
				require.Equal(t, s.Run.Reconcile.Attempts+1, d.Attempts)
				// 30 s × 2^2, plus at most 10% jitter.
				require.GreaterOrEqual(t, d.Until.Sub(s.Now), 2*time.Minute)
				require.LessOrEqual(t, d.Until.Sub(s.Now), 132*time.Second)
			default:
				propRequireRequeueSoon(t, got, s.Now, "capacity-full")
			}
		})
	}
}
