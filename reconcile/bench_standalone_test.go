package reconcile

import (
	"testing"
	"time"
)

// standaloneBenchSink keeps benchmark results alive.
var standaloneBenchSink Action

// BenchmarkDecideStandalone measures DecideStandalone on its common paths.
func BenchmarkDecideStandalone(b *testing.B) {
	now := time.Date(2026, time.November, 20, 14, 0, 0, 0, time.UTC)
	exit0, exit1 := 0, 1
	base := func() *StandaloneSnapshot {
		return &StandaloneSnapshot{
			Run: StandaloneRun{ID: "wf-run-1", State: StandaloneRunning, Version: 3, Workflow: "nightly-report", MaxRetries: 2},
			World: World{
				Now:       now,
				Pod:       &Pod{Phase: PodRunning},
				Heartbeat: now.Add(-time.Minute),
				Capacity:  Capacity{GlobalActive: 1, GlobalLimit: 4},
			},
		}
	}
	paths := []struct {
		name string
		edit func(s *StandaloneSnapshot)
	}{
		{"running-healthy", func(*StandaloneSnapshot) {}},
		{"running-awaiting-pod", func(s *StandaloneSnapshot) { s.Pod = nil }},
		{"running-succeeded", func(s *StandaloneSnapshot) { s.Pod.Phase, s.Pod.ExitCode = PodTerminated, &exit0 }},
		{"running-exit-nonzero", func(s *StandaloneSnapshot) { s.Pod.Phase, s.Pod.ExitCode = PodTerminated, &exit1 }},
		{"running-stalled", func(s *StandaloneSnapshot) { s.Heartbeat = now.Add(-time.Hour) }},
		{"queued-enqueue", func(s *StandaloneSnapshot) { s.Run.State = StandaloneQueued }},
		{"queued-capacity-full", func(s *StandaloneSnapshot) { s.Run.State, s.Capacity.GlobalActive = StandaloneQueued, 4 }},
		{"failed-retry-scheduled", func(s *StandaloneSnapshot) {
			s.Run.State, s.Run.FinishedAt = StandaloneFailed, now.Add(-10*time.Second)
		}},
		{"failed-auto-retry", func(s *StandaloneSnapshot) { s.Run.State, s.Run.FinishedAt = StandaloneFailed, now.Add(-time.Hour) }},
		{"failed-exhausted", func(s *StandaloneSnapshot) { s.Run.State, s.Run.RetryCount = StandaloneFailed, 2 }},
		{"terminal", func(s *StandaloneSnapshot) { s.Run.State = StandaloneCompleted }},
		{"intent-cancel", func(s *StandaloneSnapshot) { s.Run.Reconcile.Intent = IntentCancel }},
		{"backoff-active", func(s *StandaloneSnapshot) { s.Run.Reconcile.BackoffUntil = now.Add(time.Minute) }},
		{"read-failed", func(s *StandaloneSnapshot) { s.ReadErrors = []ReadError{{Source: "pod"}} }},
	}
	for _, p := range paths {
		s := base()
		p.edit(s)
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				standaloneBenchSink = DecideStandalone(s)
			}
		})
	}
}
