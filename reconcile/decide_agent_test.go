package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// agentSetup returns an agent snapshot in which nothing is pending: idle,
// no pod held, capacity free, default settings.
func agentSetup(t *testing.T) *AgentSnapshot {
	t.Helper()
	now := time.Date(2026, time.May, 1, 9, 30, 0, 0, time.UTC)
	return &AgentSnapshot{
		Run: AgentRun{ID: "agent-1", State: AgentIdle, Version: 7},
		World: World{
			Now:        now,
			JitterSeed: 42,
			Capacity:   Capacity{GlobalActive: 1, GlobalLimit: 4},
		},
	}
}

// agentRow is one rule of the persistent-agent decision.
type agentRow struct {
	name string
	edit func(s *AgentSnapshot)
	want func(s *AgentSnapshot) Action
}

func TestDecideAgentRules(t *testing.T) {
	t.Parallel()
	running := func(mode PodLifecycle) func(s *AgentSnapshot) {
		return func(s *AgentSnapshot) {
			s.Run.State = AgentRunning
			s.Run.TurnStartedAt = s.Now.Add(-10 * time.Minute)
			s.Run.PodHeld = true
			s.Pod = &Pod{Name: "p", Phase: PodRunning}
			s.Settings.PodLifecycle = mode
			s.Settings.KeepWarm = Duration(20 * time.Minute)
		}
	}
	rows := []agentRow{
		{"backoff in the future is a noop until it ends, intents included", func(s *AgentSnapshot) {
			s.Run.Reconcile = Reconcile{BackoffUntil: s.Now.Add(time.Minute), Intent: IntentArchive}
		}, func(s *AgentSnapshot) Action { return Noop{WakeAt: s.Now.Add(time.Minute), Reason: "backoff-active"} }},
		{"backoff in the past is ignored", func(s *AgentSnapshot) {
			s.Run.Reconcile.BackoffUntil = s.Now.Add(-time.Second)
			s.Run.PendingMessages = 1
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentIdle, To: AgentQueued, Reason: "pending-messages"}
		}},
		{"pause moves a running agent to paused", func(s *AgentSnapshot) {
			running(LifecycleOnDemand)(s)
			s.Run.Reconcile.Intent = IntentPause
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentRunning, To: AgentPaused, Patch: &Patch{ClearIntent: true}, Reason: "intent-pause"}
		}},
		{"pause moves a queued agent to paused", func(s *AgentSnapshot) {
			s.Run.State = AgentQueued
			s.Run.Reconcile.Intent = IntentPause
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentQueued, To: AgentPaused, Patch: &Patch{ClearIntent: true}, Reason: "intent-pause"}
		}},
		{"pause on a paused agent is cleared", func(s *AgentSnapshot) {
			s.Run.State = AgentPaused
			s.Run.Reconcile.Intent = IntentPause
		}, func(*AgentSnapshot) Action {
			return ClearControlIntent{Intent: IntentPause, Reason: "pause-not-applicable"}
		}},
		{"resume returns a failed agent to idle with failures reset", func(s *AgentSnapshot) {
			s.Run.State = AgentFailed
			s.Run.ConsecutiveFailures = 3
			s.Run.Reconcile.Intent = IntentResume
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentFailed, To: AgentIdle, Reason: "intent-resume", Patch: &Patch{
				ClearIntent: true, ConsecutiveFailures: propPtr(0), TurnStartedAt: propPtr(time.Time{}), TurnMessages: propPtr(0)}}
		}},
		{"resume returns a paused agent to idle", func(s *AgentSnapshot) {
			s.Run.State = AgentPaused
			s.Run.Reconcile.Intent = IntentResume
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentPaused, To: AgentIdle, Reason: "intent-resume", Patch: &Patch{
				ClearIntent: true, ConsecutiveFailures: propPtr(0), TurnStartedAt: propPtr(time.Time{}), TurnMessages: propPtr(0)}}
		}},
		{"resume on a running agent is cleared", func(s *AgentSnapshot) {
			running(LifecycleSticky)(s)
			s.Run.Reconcile.Intent = IntentResume
		}, func(*AgentSnapshot) Action {
			return ClearControlIntent{Intent: IntentResume, Reason: "resume-not-applicable"}
		}},
		{"archive archives a failed agent", func(s *AgentSnapshot) {
			s.Run.State = AgentFailed
			s.Run.Reconcile.Intent = IntentArchive
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentFailed, To: AgentArchived, Patch: &Patch{ClearIntent: true}, Reason: "intent-archive"}
		}},
		{"archive on an archived agent is cleared", func(s *AgentSnapshot) {
			s.Run.State = AgentArchived
			s.Run.Reconcile.Intent = IntentArchive
		}, func(*AgentSnapshot) Action {
			return ClearControlIntent{Intent: IntentArchive, Reason: "archived-is-final"}
		}},
		{"restart returns a running agent to idle with failures and turn reset", func(s *AgentSnapshot) {
			running(LifecycleOnDemand)(s)
			s.Run.ConsecutiveFailures = 2
			s.Run.TurnDone = true
			s.Run.Reconcile.Intent = IntentRestart
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentRunning, To: AgentIdle, Reason: "intent-restart", Patch: &Patch{
				ClearIntent: true, ConsecutiveFailures: propPtr(0), TurnDone: propPtr(false),
				TurnStartedAt: propPtr(time.Time{}), TurnMessages: propPtr(0)}}
		}},
		{"restart on an idle agent patches the reset in place", func(s *AgentSnapshot) {
			s.Run.ConsecutiveFailures = 2
			s.Run.Reconcile.Intent = IntentRestart
		}, func(*AgentSnapshot) Action {
			return PatchStatus{Reason: "intent-restart", Patch: Patch{
				ClearIntent: true, ConsecutiveFailures: propPtr(0), TurnDone: propPtr(false),
				TurnStartedAt: propPtr(time.Time{}), TurnMessages: propPtr(0)}}
		}},
		{"restart never revives an archived agent", func(s *AgentSnapshot) {
			s.Run.State = AgentArchived
			s.Run.Reconcile.Intent = IntentRestart
		}, func(*AgentSnapshot) Action {
			return ClearControlIntent{Intent: IntentRestart, Reason: "archived-is-final"}
		}},
		{"an intent agents do not support is cleared", func(s *AgentSnapshot) {
			s.Run.Reconcile.Intent = IntentCancel
		}, func(*AgentSnapshot) Action {
			return ClearControlIntent{Intent: IntentCancel, Reason: "intent-unsupported"}
		}},
		{"an intent applies despite a read error", func(s *AgentSnapshot) {
			s.Run.Reconcile.Intent = IntentArchive
			s.ReadErrors = []ReadError{{Source: "pod", Message: "timeout"}}
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentIdle, To: AgentArchived, Patch: &Patch{ClearIntent: true}, Reason: "intent-archive"}
		}},
		{"idle with pending messages is queued", func(s *AgentSnapshot) {
			s.Run.PendingMessages = 2
			s.Run.PodHeld = true
			s.Settings.PodLifecycle = LifecycleAlwaysOn
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentIdle, To: AgentQueued, Reason: "pending-messages"}
		}},
		{"idle on-demand releases a held pod", func(s *AgentSnapshot) {
			s.Run.PodHeld = true
			s.Settings.PodLifecycle = LifecycleOnDemand
		}, func(*AgentSnapshot) Action { return ReleasePod{Reason: "on-demand-release"} }},
		{"idle with no lifecycle set behaves as on-demand", func(s *AgentSnapshot) {
			s.Run.PodHeld = true
		}, func(*AgentSnapshot) Action { return ReleasePod{Reason: "on-demand-release"} }},
		{"idle with no pod held has nothing to do", func(s *AgentSnapshot) {
			s.Settings.PodLifecycle = LifecycleSticky
		}, func(*AgentSnapshot) Action { return Noop{Reason: "idle"} }},
		{"idle sticky keeps the pod warm until keep_warm_until", func(s *AgentSnapshot) {
			s.Run.PodHeld = true
			s.Run.KeepWarmUntil = s.Now.Add(5 * time.Minute)
			s.Settings.PodLifecycle = LifecycleSticky
		}, func(s *AgentSnapshot) Action { return Noop{WakeAt: s.Now.Add(5 * time.Minute), Reason: "keep-warm"} }},
		{"idle sticky releases the pod when the window ends", func(s *AgentSnapshot) {
			s.Run.PodHeld = true
			s.Run.KeepWarmUntil = s.Now
			s.Settings.PodLifecycle = LifecycleSticky
		}, func(*AgentSnapshot) Action { return ReleasePod{Reason: "keep-warm-expired"} }},
		{"idle always-on keeps the pod", func(s *AgentSnapshot) {
			s.Run.PodHeld = true
			s.Settings.PodLifecycle = LifecycleAlwaysOn
		}, func(*AgentSnapshot) Action { return Noop{Reason: "always-on"} }},
		{"a read error defers instead of deciding", func(s *AgentSnapshot) {
			s.Run.PendingMessages = 1
			s.ReadErrors = []ReadError{{Source: "run", Message: "conn reset"}}
		}, nil},
		{"provisioning with a pod unknown within its grace waits for the grace to end", func(s *AgentSnapshot) {
			s.Run.State = AgentProvisioning
			s.Pod = &Pod{Name: "p", Phase: PodUnknown, Since: s.Now.Add(-time.Minute)}
		}, func(s *AgentSnapshot) Action { return Noop{WakeAt: s.Now.Add(4 * time.Minute), Reason: "pod-unknown"} }},
		{"running with a pod unknown past its grace fails the turn saying so", func(s *AgentSnapshot) {
			s.Run.State = AgentRunning
			s.Run.TurnStartedAt = s.Now.Add(-10 * time.Minute)
			s.Pod = &Pod{Name: "p", Phase: PodUnknown, Since: s.Now.Add(-5 * time.Minute)}
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentRunning, To: AgentIdle, Reason: "pod-unknown-past-grace", Patch: &Patch{
				ConsecutiveFailures: propPtr(1), TurnStartedAt: propPtr(time.Time{}), PodHeld: propPtr(false), TurnMessages: propPtr(0)}}
		}},
		{"running with a pod unknown within its grace wakes at the grace's end", func(s *AgentSnapshot) {
			s.Run.State = AgentRunning
			s.Run.TurnStartedAt = s.Now.Add(-10 * time.Minute)
			s.Pod = &Pod{Name: "p", Phase: PodUnknown, Since: s.Now.Add(-time.Minute)}
		}, func(s *AgentSnapshot) Action { return Noop{WakeAt: s.Now.Add(4 * time.Minute), Reason: "pod-unknown"} }},
		{"a running turn's timeout is not held back by a failed capacity read", func(s *AgentSnapshot) {
			s.Run.State = AgentRunning
			s.Run.TurnStartedAt = s.Now.Add(-2 * time.Hour)
			s.Pod = &Pod{Name: "p", Phase: PodRunning}
			s.ReadErrors = []ReadError{{Source: SourceCapacity}}
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentRunning, To: AgentIdle, Reason: "turn-timeout", Patch: &Patch{
				ConsecutiveFailures: propPtr(1), TurnStartedAt: propPtr(time.Time{}), PodHeld: propPtr(false), TurnMessages: propPtr(0)}}
		}},
		{"queued under capacity enqueues the turn", func(s *AgentSnapshot) {
			s.Run.State = AgentQueued
		}, func(*AgentSnapshot) Action {
			return EnqueueTurn{From: AgentQueued, To: AgentProvisioning, Patch: &Patch{TurnMessages: propPtr(0)}, Reason: "turn-enqueued"}
		}},
		{"queued at full capacity requeues soon", func(s *AgentSnapshot) {
			s.Run.State = AgentQueued
			s.Capacity = Capacity{GlobalActive: 4, GlobalLimit: 4}
		}, nil},
		{"provisioning with a running pod starts the turn clock", func(s *AgentSnapshot) {
			s.Run.State = AgentProvisioning
			s.Run.TurnDone = true
			s.Pod = &Pod{Name: "p", Phase: PodRunning}
		}, func(s *AgentSnapshot) Action {
			return Transition{From: AgentProvisioning, To: AgentRunning, Reason: "pod-running", Patch: &Patch{
				TurnDone: propPtr(false), TurnStartedAt: propPtr(s.Now)}}
		}},
		{"provisioning with a ready pod keeps a turn clock already set", func(s *AgentSnapshot) {
			s.Run.State = AgentProvisioning
			s.Run.TurnStartedAt = s.Now.Add(-time.Minute)
			s.Pod = &Pod{Name: "p", Phase: PodReady}
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentProvisioning, To: AgentRunning, Reason: "pod-running", Patch: &Patch{
				TurnDone: propPtr(false)}}
		}},
		{"provisioning without a pod waits", func(s *AgentSnapshot) {
			s.Run.State = AgentProvisioning
		}, func(*AgentSnapshot) Action { return Noop{Reason: "awaiting-pod"} }},
		{"provisioning with a pending pod waits", func(s *AgentSnapshot) {
			s.Run.State = AgentProvisioning
			s.Pod = &Pod{Name: "p", Phase: PodPending}
		}, func(*AgentSnapshot) Action { return Noop{Reason: "pod-pending"} }},
		{"provisioning with a dead pod counts a failure and goes idle", func(s *AgentSnapshot) {
			s.Run.State = AgentProvisioning
			s.Run.ConsecutiveFailures = 1
			s.Pod = &Pod{Name: "p", Phase: PodError, LastError: "ImagePullBackOff"}
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentProvisioning, To: AgentIdle, Reason: "pod-dead", Patch: &Patch{
				ConsecutiveFailures: propPtr(2), TurnStartedAt: propPtr(time.Time{}), PodHeld: propPtr(false), TurnMessages: propPtr(0)}}
		}},
		{"provisioning failures reaching the default limit of 3 fail the agent", func(s *AgentSnapshot) {
			s.Run.State = AgentProvisioning
			s.Run.ConsecutiveFailures = 2
			s.Pod = &Pod{Name: "p", Phase: PodError}
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentProvisioning, To: AgentFailed, Reason: "pod-dead", Patch: &Patch{
				ConsecutiveFailures: propPtr(3), TurnStartedAt: propPtr(time.Time{}), PodHeld: propPtr(false), TurnMessages: propPtr(0)}}
		}},
		{"running with the turn done on-demand goes idle and lets the pod go", func(s *AgentSnapshot) {
			running(LifecycleOnDemand)(s)
			s.Run.TurnDone = true
			s.Run.ConsecutiveFailures = 2
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentRunning, To: AgentIdle, Reason: "turn-done", Patch: &Patch{
				ConsecutiveFailures: propPtr(0), TurnStartedAt: propPtr(time.Time{}), PodHeld: propPtr(false),
				PendingMessages: propPtr(0), TurnMessages: propPtr(0)}}
		}},
		{"the turn's end reads only the messages it was started for; one sent during the turn stays pending", func(s *AgentSnapshot) {
			running(LifecycleOnDemand)(s)
			s.Run.TurnDone = true
			s.Run.PendingMessages, s.Run.TurnMessages = 3, 2
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentRunning, To: AgentIdle, Reason: "turn-done", Patch: &Patch{
				ConsecutiveFailures: propPtr(0), TurnStartedAt: propPtr(time.Time{}), PodHeld: propPtr(false),
				PendingMessages: propPtr(1), TurnMessages: propPtr(0)}}
		}},
		{"queued records the pending messages the turn is for", func(s *AgentSnapshot) {
			s.Run.State = AgentQueued
			s.Run.PendingMessages = 2
		}, func(*AgentSnapshot) Action {
			return EnqueueTurn{From: AgentQueued, To: AgentProvisioning, Patch: &Patch{TurnMessages: propPtr(2)}, Reason: "turn-enqueued"}
		}},
		{"running with the turn done sticky keeps the pod warm for keep_warm", func(s *AgentSnapshot) {
			running(LifecycleSticky)(s)
			s.Run.TurnDone = true
		}, func(s *AgentSnapshot) Action {
			return Transition{From: AgentRunning, To: AgentIdle, Reason: "turn-done", Patch: &Patch{
				ConsecutiveFailures: propPtr(0), TurnStartedAt: propPtr(time.Time{}), PodHeld: propPtr(true),
				KeepWarmUntil: propPtr(s.Now.Add(20 * time.Minute)), PendingMessages: propPtr(0), TurnMessages: propPtr(0)}}
		}},
		{"running with the turn done always-on keeps the pod", func(s *AgentSnapshot) {
			running(LifecycleAlwaysOn)(s)
			s.Run.TurnDone = true
			s.Pod.Phase = PodTerminated
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentRunning, To: AgentIdle, Reason: "turn-done", Patch: &Patch{
				ConsecutiveFailures: propPtr(0), TurnStartedAt: propPtr(time.Time{}), PodHeld: propPtr(true),
				PendingMessages: propPtr(0), TurnMessages: propPtr(0)}}
		}},
		{"running with a dead pod counts a failure", func(s *AgentSnapshot) {
			running(LifecycleSticky)(s)
			s.Pod.Phase = PodTerminated
			s.Pod.ExitCode = propPtr(137)
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentRunning, To: AgentIdle, Reason: "pod-dead", Patch: &Patch{
				ConsecutiveFailures: propPtr(1), TurnStartedAt: propPtr(time.Time{}), PodHeld: propPtr(false), TurnMessages: propPtr(0)}}
		}},
		{"running with a missing pod counts a failure up to the configured limit", func(s *AgentSnapshot) {
			running(LifecycleOnDemand)(s)
			s.Pod = nil
			s.Run.ConsecutiveFailures = 4
			s.Settings.FailureLimit = 5
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentRunning, To: AgentFailed, Reason: "pod-dead", Patch: &Patch{
				ConsecutiveFailures: propPtr(5), TurnStartedAt: propPtr(time.Time{}), PodHeld: propPtr(false), TurnMessages: propPtr(0)}}
		}},
		{"running past the default 1 h turn limit times out", func(s *AgentSnapshot) {
			running(LifecycleOnDemand)(s)
			s.Run.TurnStartedAt = s.Now.Add(-time.Hour - time.Second)
		}, func(*AgentSnapshot) Action {
			return Transition{From: AgentRunning, To: AgentIdle, Reason: "turn-timeout", Patch: &Patch{
				ConsecutiveFailures: propPtr(1), TurnStartedAt: propPtr(time.Time{}), PodHeld: propPtr(false), TurnMessages: propPtr(0)}}
		}},
		{"running within the turn limit waits for the deadline", func(s *AgentSnapshot) {
			running(LifecycleOnDemand)(s)
			s.Settings.MaxTurnDuration = Duration(30 * time.Minute)
		}, func(s *AgentSnapshot) Action {
			return Noop{WakeAt: s.Now.Add(20 * time.Minute), Reason: "turn-running"}
		}},
		{"running exactly at the deadline is not yet over", func(s *AgentSnapshot) {
			running(LifecycleOnDemand)(s)
			s.Run.TurnStartedAt = s.Now.Add(-time.Hour)
		}, func(s *AgentSnapshot) Action { return Noop{WakeAt: s.Now, Reason: "turn-running"} }},
		{"running without a turn clock records it", func(s *AgentSnapshot) {
			running(LifecycleOnDemand)(s)
			s.Run.TurnStartedAt = time.Time{}
		}, func(s *AgentSnapshot) Action {
			return PatchStatus{Patch: Patch{TurnStartedAt: propPtr(s.Now)}, Reason: "turn-start-recorded"}
		}},
		{"paused waits for resume", func(s *AgentSnapshot) {
			s.Run.State = AgentPaused
			s.Run.PendingMessages = 3
		}, func(*AgentSnapshot) Action { return Noop{Reason: "paused"} }},
		{"failed waits for resume", func(s *AgentSnapshot) {
			s.Run.State = AgentFailed
			s.Run.PendingMessages = 3
		}, func(*AgentSnapshot) Action { return Noop{Reason: "failed-awaiting-resume"} }},
		{"archived is terminal", func(s *AgentSnapshot) {
			s.Run.State = AgentArchived
			s.Run.PendingMessages = 3
		}, func(*AgentSnapshot) Action { return Noop{Reason: "archived"} }},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			s := agentSetup(t)
			row.edit(s)
			got := DecideAgent(s)
			switch {
			case row.want != nil:
				require.Equal(t, row.want(s), got)
			case len(s.ReadErrors) > 0:
				d, ok := got.(DeferWithBackoff)
				require.True(t, ok, "got %#v", got)
				require.Equal(t, "read-failed", d.Reason)
				require.Equal(t, 1, d.Attempts)
				require.GreaterOrEqual(t, d.Until.Sub(s.Now), 30*time.Second)
				require.Less(t, d.Until.Sub(s.Now), 34*time.Second)
			default:
				propRequireRequeueSoon(t, got, s.Now, "capacity-full")
			}
		})
	}
}
