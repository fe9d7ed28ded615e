package reconcile

import (
	"testing"
	"time"
)

// prReviewBenchSink keeps benchmark results alive.
var prReviewBenchSink Action

// BenchmarkDecidePRReview measures DecidePRReview on its common paths.
func BenchmarkDecidePRReview(b *testing.B) {
	now := time.Date(2026, time.May, 1, 9, 30, 0, 0, time.UTC)
	base := func() *PRReviewSnapshot {
		return &PRReviewSnapshot{
			Run: PRReviewRun{ID: "review-1", State: ReviewRunning, ReviewedSHA: "a1b2c3"},
			PR:  &PullRequest{State: PROpen, HeadSHA: "a1b2c3"},
			World: World{
				Now:      now,
				Pod:      &Pod{Phase: PodRunning},
				Capacity: Capacity{GlobalActive: 1, GlobalLimit: 4},
				Settings: Settings{RerunOnPush: true},
			},
		}
	}
	paths := []struct {
		name string
		edit func(s *PRReviewSnapshot)
	}{
		{"reviewing-in-progress", func(*PRReviewSnapshot) {}},
		{"review-done", func(s *PRReviewSnapshot) { s.Run.ReviewDone = true }},
		{"pod-dead", func(s *PRReviewSnapshot) { s.Pod.Phase = PodError }},
		{"launch", func(s *PRReviewSnapshot) { s.Run.State = ReviewQueued }},
		{"capacity-full", func(s *PRReviewSnapshot) {
			s.Run.State = ReviewQueued
			s.Capacity.GlobalActive = 4
		}},
		{"submit", func(s *PRReviewSnapshot) { s.Run.State = ReviewReady }},
		{"submitted-noop", func(s *PRReviewSnapshot) { s.Run.State = ReviewSubmitted }},
		{"rerun-on-push", func(s *PRReviewSnapshot) { s.PR.HeadSHA = "d4e5f6" }},
		{"pr-closed", func(s *PRReviewSnapshot) { s.PR.State = PRClosed }},
		{"backoff-active", func(s *PRReviewSnapshot) { s.Run.Reconcile.BackoffUntil = now.Add(time.Minute) }},
		{"read-failed", func(s *PRReviewSnapshot) { s.ReadErrors = []ReadError{{Source: "pr"}} }},
	}
	for _, p := range paths {
		s := base()
		p.edit(s)
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				prReviewBenchSink = DecidePRReview(s)
			}
		})
	}
}
