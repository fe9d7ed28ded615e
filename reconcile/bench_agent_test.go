package reconcile

import (
	"testing"
	"time"
)

// agentBenchSink keeps benchmark results alive.
var agentBenchSink Action

// BenchmarkDecideAgent measures DecideAgent on its common paths.
func BenchmarkDecideAgent(b *testing.B) {
	now := time.Date(2026, time.May, 1, 9, 30, 0, 0, time.UTC)
	base := func() *AgentSnapshot {
		return &AgentSnapshot{
			Run: AgentRun{ID: "agent-1", State: AgentIdle},
			World: World{
				Now:      now,
				Capacity: Capacity{GlobalActive: 1, GlobalLimit: 4},
				Settings: Settings{PodLifecycle: LifecycleSticky, KeepWarm: Duration(10 * time.Minute)},
			},
		}
	}
	running := func(s *AgentSnapshot) {
		s.Run.State = AgentRunning
		s.Run.TurnStartedAt = now.Add(-time.Minute)
		s.Pod = &Pod{Phase: PodRunning}
	}
	paths := []struct {
		name string
		edit func(s *AgentSnapshot)
	}{
		{"idle-noop", func(*AgentSnapshot) {}},
		{"idle-message", func(s *AgentSnapshot) { s.Run.PendingMessages = 1 }},
		{"idle-keep-warm", func(s *AgentSnapshot) {
			s.Run.PodHeld = true
			s.Run.KeepWarmUntil = now.Add(time.Minute)
		}},
		{"idle-release", func(s *AgentSnapshot) { s.Run.PodHeld = true }},
		{"enqueue-turn", func(s *AgentSnapshot) { s.Run.State = AgentQueued }},
		{"capacity-full", func(s *AgentSnapshot) {
			s.Run.State = AgentQueued
			s.Capacity.GlobalActive = 4
		}},
		{"provisioning-pending", func(s *AgentSnapshot) {
			s.Run.State = AgentProvisioning
			s.Pod = &Pod{Phase: PodPending}
		}},
		{"provisioning-started", func(s *AgentSnapshot) {
			s.Run.State = AgentProvisioning
			s.Pod = &Pod{Phase: PodRunning}
		}},
		{"running-noop", running},
		{"turn-done", func(s *AgentSnapshot) {
			running(s)
			s.Run.TurnDone = true
		}},
		{"pod-dead", func(s *AgentSnapshot) {
			running(s)
			s.Pod.Phase = PodError
		}},
		{"paused", func(s *AgentSnapshot) { s.Run.State = AgentPaused }},
		{"backoff-active", func(s *AgentSnapshot) { s.Run.Reconcile.BackoffUntil = now.Add(time.Minute) }},
		{"read-failed", func(s *AgentSnapshot) { s.ReadErrors = []ReadError{{Source: "pod"}} }},
	}
	for _, p := range paths {
		s := base()
		p.edit(s)
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				agentBenchSink = DecideAgent(s)
			}
		})
	}
}
