package reconcile

import (
	"testing"
	"time"
)

// repoBenchSink keeps benchmark results alive.
var repoBenchSink Action

// BenchmarkDecideRepo measures DecideRepo on its common paths.
func BenchmarkDecideRepo(b *testing.B) {
	now := time.Date(2026, time.November, 20, 14, 0, 0, 0, time.UTC)
	exit0 := 0
	pr := func() *PullRequest {
		return &PullRequest{URL: "https://git.example.com/acme/api/pull/7", Number: 7, State: PROpen, Checks: ChecksPending, Review: ReviewNone, HeadSHA: "a1b2c3"}
	}
	stored := PRFields{URL: "https://git.example.com/acme/api/pull/7", Number: 7, State: PROpen, Checks: ChecksPending, Review: ReviewNone, HeadSHA: "a1b2c3"}
	base := func() *RepoSnapshot {
		return &RepoSnapshot{
			Run: RepoRun{ID: "task-1", State: RepoRunning, Version: 7, Repo: "acme/api", MaxRetries: 2},
			World: World{
				Now:       now,
				Pod:       &Pod{Phase: PodRunning},
				Heartbeat: now.Add(-time.Minute),
				Capacity:  Capacity{GlobalActive: 1, GlobalLimit: 4, RepoLimit: 2},
				Settings:  Settings{AutoResume: true, StallThreshold: Duration(15 * time.Minute), MaxAutoResumes: 10},
			},
		}
	}
	prOpened := func(s *RepoSnapshot) { s.Run.State, s.Run.PR, s.PR = RepoPROpened, stored, pr() }
	paths := []struct {
		name string
		edit func(s *RepoSnapshot)
	}{
		{"running-healthy", func(*RepoSnapshot) {}},
		{"running-pod-dead", func(s *RepoSnapshot) { s.Pod.Phase = PodError }},
		{"running-stalled", func(s *RepoSnapshot) { s.Heartbeat = now.Add(-time.Hour) }},
		{"running-finished-without-pr", func(s *RepoSnapshot) { s.Pod.Phase, s.Pod.ExitCode = PodTerminated, &exit0 }},
		{"running-pr-detected", func(s *RepoSnapshot) { s.PR = pr() }},
		{"pending-no-deps", func(s *RepoSnapshot) { s.Run.State = RepoPending }},
		{"waiting-on-deps", func(s *RepoSnapshot) {
			s.Run.State = RepoWaitingOnDeps
			s.Dependencies = []Dependency{{ID: "a", State: RepoCompleted}, {ID: "b", State: RepoRunning}}
		}},
		{"queued-launch", func(s *RepoSnapshot) { s.Run.State = RepoQueued }},
		{"queued-capacity-full", func(s *RepoSnapshot) { s.Run.State, s.Capacity.GlobalActive = RepoQueued, 4 }},
		{"queued-off-peak", func(s *RepoSnapshot) {
			s.Run.State, s.Settings.OffPeak = RepoQueued, OffPeak{Only: true, StartHour: 22, EndHour: 6}
		}},
		{"provisioning-pod-ready", func(s *RepoSnapshot) { s.Run.State = RepoProvisioning }},
		{"pr-steady", prOpened},
		{"pr-drift", func(s *RepoSnapshot) { prOpened(s); s.PR.HeadSHA = "d4e5f6" }},
		{"pr-ci-failing-resume", func(s *RepoSnapshot) { prOpened(s); s.PR.Checks = ChecksFailing }},
		{"pr-auto-merge", func(s *RepoSnapshot) {
			prOpened(s)
			s.PR.Checks, s.PR.Review, s.Settings.AutoMerge = ChecksPassing, ReviewApproved, true
		}},
		{"pr-launch-review", func(s *RepoSnapshot) {
			prOpened(s)
			s.PR.Checks, s.Run.PR.Checks, s.Settings.ReviewEnabled = ChecksPassing, ChecksPassing, true
		}},
		{"pr-merged", func(s *RepoSnapshot) { prOpened(s); s.PR.State, s.PR.Merged = PRMerged, true }},
		{"needs-attention", func(s *RepoSnapshot) { prOpened(s); s.Run.State = RepoNeedsAttention }},
		{"terminal", func(s *RepoSnapshot) { s.Run.State = RepoCompleted }},
		{"intent-cancel", func(s *RepoSnapshot) { s.Run.Reconcile.Intent = IntentCancel }},
		{"intent-not-applicable", func(s *RepoSnapshot) { s.Run.Reconcile.Intent = IntentResume }},
		{"backoff-active", func(s *RepoSnapshot) { s.Run.Reconcile.BackoffUntil = now.Add(time.Minute) }},
		{"read-failed", func(s *RepoSnapshot) { s.ReadErrors = []ReadError{{Source: "pr"}} }},
	}
	for _, p := range paths {
		s := base()
		p.edit(s)
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				repoBenchSink = DecideRepo(s)
			}
		})
	}
}
