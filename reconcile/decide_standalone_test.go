package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// standaloneSetup returns a healthy running standalone run: live pod, fresh
// heartbeat, free capacity, two retries allowed and default settings.
func standaloneSetup(t *testing.T) *StandaloneSnapshot {
	t.Helper()
	now := time.Date(2026, time.November, 20, 14, 0, 0, 0, time.UTC)
	return &StandaloneSnapshot{
		Run: StandaloneRun{ID: "wf-run-1", State: StandaloneRunning, Version: 3, Workflow: "nightly-report", MaxRetries: 2},
		World: World{
			Now:        now,
			JitterSeed: 42,
			Pod:        &Pod{Name: "wf-1", Phase: PodRunning},
			Heartbeat:  now.Add(-time.Minute),
			Capacity:   Capacity{GlobalActive: 1, GlobalLimit: 4},
		},
	}
}

// standaloneRow is one rule of the standalone decision: an edit of
// standaloneSetup and the expected action, or a check for actions that
// carry jitter.
type standaloneRow struct {
	name  string
	edit  func(s *StandaloneSnapshot)
	want  func(s *StandaloneSnapshot) Action
	check func(t *testing.T, s *StandaloneSnapshot, a Action)
}

// standaloneWant returns a fixed expected action.
func standaloneWant(a Action) func(*StandaloneSnapshot) Action {
	return func(*StandaloneSnapshot) Action { return a }
}

// standaloneFinished is the expected move into completed or failed, which
// records FinishedAt=Now.
func standaloneFinished(from, to State, reason string) func(*StandaloneSnapshot) Action {
	return func(s *StandaloneSnapshot) Action {
		return Transition{From: from, To: to, Patch: &Patch{FinishedAt: propPtr(s.Now)}, Reason: reason}
	}
}

// standaloneFailedAgo puts the run in failed, finished ago before now, with
// retry count n.
func standaloneFailedAgo(ago time.Duration, n int) func(s *StandaloneSnapshot) {
	return func(s *StandaloneSnapshot) {
		s.Run.State, s.Run.FinishedAt, s.Run.RetryCount = StandaloneFailed, s.Now.Add(-ago), n
	}
}

func TestDecideStandaloneRules(t *testing.T) {
	t.Parallel()
	exit := func(code int) *int { return &code }
	rows := []standaloneRow{
		// Precedence.
		{name: "backoff active is a noop until it ends, before intents and read errors",
			edit: func(s *StandaloneSnapshot) {
				s.Run.Reconcile = Reconcile{Intent: IntentCancel, BackoffUntil: s.Now.Add(time.Minute)}
				s.ReadErrors = []ReadError{{Source: "pod"}}
			},
			want: func(s *StandaloneSnapshot) Action {
				return Noop{WakeAt: s.Now.Add(time.Minute), Reason: "backoff-active"}
			}},
		{name: "intent beats a read error",
			edit: func(s *StandaloneSnapshot) {
				s.Run.Reconcile.Intent = IntentCancel
				s.ReadErrors = []ReadError{{Source: "pod"}}
			},
			want: standaloneWant(Transition{From: StandaloneRunning, To: StandaloneCancelled, Patch: &Patch{ClearIntent: true}, Reason: "intent-cancel"})},
		{name: "read error defers with backoff",
			edit: func(s *StandaloneSnapshot) {
				s.ReadErrors = []ReadError{{Source: "pod", Message: "timeout"}}
				s.Pod.Phase = PodError // would fail the run without the read error
			},
			check: func(t *testing.T, s *StandaloneSnapshot, a Action) {
				d, ok := a.(DeferWithBackoff)
				require.True(t, ok, "want DeferWithBackoff, got %#v", a)
				require.Equal(t, 1, d.Attempts)
				require.Equal(t, "read-failed", d.Reason)
				require.GreaterOrEqual(t, d.Until.Sub(s.Now), 30*time.Second)
				require.LessOrEqual(t, d.Until.Sub(s.Now), 33*time.Second)
			}},

		// Control intents.
		{name: "cancel moves a queued run to cancelled",
			edit: func(s *StandaloneSnapshot) { s.Run.State, s.Run.Reconcile.Intent = StandaloneQueued, IntentCancel },
			want: standaloneWant(Transition{From: StandaloneQueued, To: StandaloneCancelled, Patch: &Patch{ClearIntent: true}, Reason: "intent-cancel"})},
		{name: "cancel moves a running run to cancelled",
			edit: func(s *StandaloneSnapshot) { s.Run.Reconcile.Intent = IntentCancel },
			want: standaloneWant(Transition{From: StandaloneRunning, To: StandaloneCancelled, Patch: &Patch{ClearIntent: true}, Reason: "intent-cancel"})},
		{name: "cancel on a finished run is cleared",
			edit: func(s *StandaloneSnapshot) { s.Run.State, s.Run.Reconcile.Intent = StandaloneFailed, IntentCancel },
			want: standaloneWant(ClearControlIntent{Intent: IntentCancel, Reason: "cancel-not-applicable"})},
		{name: "retry requeues a failed run with retries left",
			edit: func(s *StandaloneSnapshot) {
				s.Run.State, s.Run.Reconcile.Intent, s.Run.RetryCount = StandaloneFailed, IntentRetry, 1
			},
			want: standaloneWant(Transition{From: StandaloneFailed, To: StandaloneQueued,
				Patch: &Patch{ClearIntent: true, RetryCount: propPtr(2)}, Reason: "intent-retry"})},
		{name: "retry requeues a cancelled run",
			edit: func(s *StandaloneSnapshot) { s.Run.State, s.Run.Reconcile.Intent = StandaloneCancelled, IntentRetry },
			want: standaloneWant(Transition{From: StandaloneCancelled, To: StandaloneQueued,
				Patch: &Patch{ClearIntent: true, RetryCount: propPtr(1)}, Reason: "intent-retry"})},
		{name: "retry with retries used up is cleared",
			edit: func(s *StandaloneSnapshot) {
				s.Run.State, s.Run.Reconcile.Intent, s.Run.RetryCount = StandaloneFailed, IntentRetry, 2
			},
			want: standaloneWant(ClearControlIntent{Intent: IntentRetry, Reason: "retries-exhausted"})},
		{name: "retry on a run that is not failed or cancelled is cleared",
			edit: func(s *StandaloneSnapshot) { s.Run.State, s.Run.Reconcile.Intent = StandaloneCompleted, IntentRetry },
			want: standaloneWant(ClearControlIntent{Intent: IntentRetry, Reason: "retry-not-applicable"})},
		{name: "restart requeues a finished run resetting the retry count",
			edit: func(s *StandaloneSnapshot) {
				s.Run.State, s.Run.Reconcile.Intent, s.Run.RetryCount = StandaloneCompleted, IntentRestart, 2
			},
			want: standaloneWant(Transition{From: StandaloneCompleted, To: StandaloneQueued,
				Patch: &Patch{ClearIntent: true, RetryCount: propPtr(0)}, Reason: "intent-restart"})},
		{name: "restart on an unfinished run is cleared",
			edit: func(s *StandaloneSnapshot) { s.Run.Reconcile.Intent = IntentRestart },
			want: standaloneWant(ClearControlIntent{Intent: IntentRestart, Reason: "restart-not-applicable"})},
		{name: "resume is not a standalone intent and is cleared",
			edit: func(s *StandaloneSnapshot) { s.Run.State, s.Run.Reconcile.Intent = StandaloneFailed, IntentResume },
			want: standaloneWant(ClearControlIntent{Intent: IntentResume, Reason: "intent-unsupported"})},

		// queued.
		{name: "queued with capacity enqueues the agent",
			edit: func(s *StandaloneSnapshot) { s.Run.State = StandaloneQueued },
			want: standaloneWant(EnqueueAgent{From: StandaloneQueued, To: StandaloneRunning, Reason: "capacity-available"})},
		{name: "queued with capacity full requeues soon",
			edit: func(s *StandaloneSnapshot) { s.Run.State, s.Capacity.GlobalActive = StandaloneQueued, 4 },
			check: func(t *testing.T, s *StandaloneSnapshot, a Action) {
				r, ok := a.(RequeueSoon)
				require.True(t, ok, "want RequeueSoon, got %#v", a)
				require.Equal(t, "capacity-full", r.Reason)
				require.GreaterOrEqual(t, r.At.Sub(s.Now), 15*time.Second)
				require.Less(t, r.At.Sub(s.Now), 20*time.Second)
			}},
		{name: "a queued run of a disabled workflow fails, even with capacity full",
			edit: func(s *StandaloneSnapshot) {
				s.Run.State, s.Settings.WorkflowDisabled, s.Capacity.GlobalActive = StandaloneQueued, true, 4
			},
			want: standaloneFinished(StandaloneQueued, StandaloneFailed, "workflow-disabled")},

		// running.
		{name: "a pod that exited 0 completes the run",
			edit: func(s *StandaloneSnapshot) { s.Pod.Phase, s.Pod.ExitCode = PodTerminated, exit(0) },
			want: standaloneFinished(StandaloneRunning, StandaloneCompleted, "pod-succeeded")},
		{name: "success beats a stale heartbeat",
			edit: func(s *StandaloneSnapshot) {
				s.Pod.Phase, s.Pod.ExitCode, s.Heartbeat = PodTerminated, exit(0), s.Now.Add(-time.Hour)
			},
			want: standaloneFinished(StandaloneRunning, StandaloneCompleted, "pod-succeeded")},
		{name: "a pod that exited non-zero fails the run",
			edit: func(s *StandaloneSnapshot) { s.Pod.Phase, s.Pod.ExitCode = PodTerminated, exit(1) },
			want: standaloneFinished(StandaloneRunning, StandaloneFailed, "pod-dead")},
		{name: "an errored pod fails the run",
			edit: func(s *StandaloneSnapshot) { s.Pod.Phase = PodError },
			want: standaloneFinished(StandaloneRunning, StandaloneFailed, "pod-dead")},
		{name: "pod death beats stall",
			edit: func(s *StandaloneSnapshot) { s.Pod.Phase, s.Heartbeat = PodError, s.Now.Add(-time.Hour) },
			want: standaloneFinished(StandaloneRunning, StandaloneFailed, "pod-dead")},
		{name: "a pod unknown within its grace is waited for",
			edit: func(s *StandaloneSnapshot) { s.Pod.Phase, s.Pod.Since = PodUnknown, s.Now.Add(-time.Minute) },
			want: func(s *StandaloneSnapshot) Action {
				return Noop{WakeAt: s.Now.Add(4 * time.Minute), Reason: "pod-unknown"}
			}},
		{name: "a pod unknown within its grace with a stale heartbeat is a stall",
			edit: func(s *StandaloneSnapshot) {
				s.Pod.Phase, s.Pod.Since, s.Heartbeat = PodUnknown, s.Now.Add(-time.Minute), s.Now.Add(-time.Hour)
			},
			want: standaloneFinished(StandaloneRunning, StandaloneFailed, "stalled")},
		{name: "a pod unknown past its configured grace fails the run saying so",
			edit: func(s *StandaloneSnapshot) {
				s.Pod.Phase, s.Pod.Since, s.Settings.UnknownPodGrace = PodUnknown, s.Now.Add(-2*time.Minute), Duration(2*time.Minute)
			},
			want: standaloneFinished(StandaloneRunning, StandaloneFailed, "pod-unknown-past-grace")},
		{name: "a failed capacity read does not hold back a running run's health checks",
			edit: func(s *StandaloneSnapshot) {
				s.Pod.Phase = PodError
				s.ReadErrors = []ReadError{{Source: SourceCapacity}}
			},
			want: standaloneFinished(StandaloneRunning, StandaloneFailed, "pod-dead")},
		{name: "a failed capacity read defers the launch",
			edit: func(s *StandaloneSnapshot) {
				s.Run.State = StandaloneQueued
				s.ReadErrors = []ReadError{{Source: SourceCapacity}}
			},
			check: func(t *testing.T, _ *StandaloneSnapshot, a Action) {
				d, ok := a.(DeferWithBackoff)
				require.True(t, ok, "want DeferWithBackoff, got %#v", a)
				require.Equal(t, "read-failed", d.Reason)
			}},
		{name: "a heartbeat older than the threshold is a stall",
			edit: func(s *StandaloneSnapshot) { s.Heartbeat = s.Now.Add(-16 * time.Minute) },
			want: standaloneFinished(StandaloneRunning, StandaloneFailed, "stalled")},
		{name: "a heartbeat within the threshold is healthy",
			edit: func(s *StandaloneSnapshot) { s.Heartbeat = s.Now.Add(-15 * time.Minute) },
			want: standaloneWant(Noop{Reason: "agent-running"})},
		{name: "no pod observed yet waits for it",
			edit: func(s *StandaloneSnapshot) { s.Pod = nil },
			want: standaloneWant(Noop{Reason: "awaiting-pod"})},
		{name: "no pod and a stale heartbeat is a stall",
			edit: func(s *StandaloneSnapshot) { s.Pod, s.Heartbeat = nil, s.Now.Add(-20*time.Minute) },
			want: standaloneFinished(StandaloneRunning, StandaloneFailed, "stalled")},

		// failed.
		{name: "a failed run waits for its retry backoff",
			edit: standaloneFailedAgo(10*time.Second, 0),
			want: func(s *StandaloneSnapshot) Action {
				return Noop{WakeAt: s.Run.FinishedAt.Add(30 * time.Second), Reason: "retry-scheduled"}
			}},
		{name: "the retry backoff doubles per retry",
			edit: standaloneFailedAgo(50*time.Second, 1),
			want: func(s *StandaloneSnapshot) Action {
				return Noop{WakeAt: s.Run.FinishedAt.Add(time.Minute), Reason: "retry-scheduled"}
			}},
		{name: "a configured retry backoff replaces the default",
			edit: standaloneSeq(standaloneFailedAgo(10*time.Second, 0), func(s *StandaloneSnapshot) {
				s.Settings.RetryBackoff = Duration(5 * time.Second)
			}),
			want: standaloneWant(Transition{From: StandaloneFailed, To: StandaloneQueued, Patch: &Patch{RetryCount: propPtr(1)}, Reason: "auto-retry"})},
		{name: "the retry backoff is capped at one hour",
			edit: standaloneSeq(standaloneFailedAgo(59*time.Minute, 20), func(s *StandaloneSnapshot) { s.Run.MaxRetries = 30 }),
			want: func(s *StandaloneSnapshot) Action {
				return Noop{WakeAt: s.Run.FinishedAt.Add(time.Hour), Reason: "retry-scheduled"}
			}},
		{name: "a due retry requeues the run counting it",
			edit: standaloneFailedAgo(30*time.Second, 0),
			want: standaloneWant(Transition{From: StandaloneFailed, To: StandaloneQueued, Patch: &Patch{RetryCount: propPtr(1)}, Reason: "auto-retry"})},
		{name: "a failed run with no retries left stays failed",
			edit: standaloneFailedAgo(time.Hour, 2),
			want: standaloneWant(Noop{Reason: "retries-exhausted"})},

		// Terminal states.
		{name: "completed is terminal",
			edit: func(s *StandaloneSnapshot) { s.Run.State = StandaloneCompleted },
			want: standaloneWant(Noop{Reason: "terminal-state"})},
		{name: "cancelled is terminal and never auto-retried",
			edit: func(s *StandaloneSnapshot) {
				s.Run.State, s.Run.FinishedAt = StandaloneCancelled, s.Now.Add(-time.Hour)
			},
			want: standaloneWant(Noop{Reason: "terminal-state"})},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			s := standaloneSetup(t)
			row.edit(s)
			a := DecideStandalone(s)
			if row.check != nil {
				row.check(t, s, a)
				return
			}
			require.Equal(t, row.want(s), a)
		})
	}
}

// standaloneSeq combines edits of a standalone snapshot.
func standaloneSeq(edits ...func(s *StandaloneSnapshot)) func(s *StandaloneSnapshot) {
	return func(s *StandaloneSnapshot) {
		for _, e := range edits {
			e(s)
		}
	}
}
