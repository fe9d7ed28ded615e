package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// repoSetup returns a healthy running repo run: live pod, fresh heartbeat,
// free capacity, no PR yet, auto-resume on and every other knob at its
// default.
func repoSetup(t *testing.T) *RepoSnapshot {
	t.Helper()
	now := time.Date(2026, time.November, 20, 14, 0, 0, 0, time.UTC)
	return &RepoSnapshot{
		Run: RepoRun{ID: "task-1", State: RepoRunning, Version: 7, Repo: "acme/api", MaxRetries: 2, SessionID: "sess-1"},
		World: World{
			Now:        now,
			JitterSeed: 42,
			Pod:        &Pod{Name: "agent-1", Phase: PodRunning},
			Heartbeat:  now.Add(-time.Minute),
			Capacity:   Capacity{GlobalActive: 1, GlobalLimit: 4, RepoActive: 0, RepoLimit: 2},
			Settings:   Settings{AutoResume: true},
		},
	}
}

// repoTestPR is the observed open PR of the rule tests.
func repoTestPR() *PullRequest {
	return &PullRequest{URL: "https://git.example.com/acme/api/pull/7", Number: 7, State: PROpen, Mergeable: true,
		Checks: ChecksPending, Review: ReviewNone, HeadSHA: "a1b2c3"}
}

// repoTestFields are repoTestPR's fields as stored on the run, edited by fn.
func repoTestFields(fn func(f *PRFields)) *PRFields {
	f := &PRFields{URL: "https://git.example.com/acme/api/pull/7", Number: 7, State: PROpen,
		Checks: ChecksPending, Review: ReviewNone, HeadSHA: "a1b2c3"}
	if fn != nil {
		fn(f)
	}
	return f
}

// repoDetected is repoTestPR as pr-detected records it: without checks
// and review.
func repoDetected() *PRFields {
	return repoTestFields(func(f *PRFields) { f.Checks, f.Review = "", "" })
}

// repoWithPR puts the run in pr_opened with repoTestPR observed and
// recorded, then lets edit change the observation.
func repoWithPR(edit func(pr *PullRequest)) func(s *RepoSnapshot) {
	return func(s *RepoSnapshot) {
		s.Run.State = RepoPROpened
		s.Run.PR = *repoTestFields(nil)
		s.PR = repoTestPR()
		if edit != nil {
			edit(s.PR)
		}
	}
}

// repoIn returns an edit that sets the run's state.
func repoIn(st State) func(s *RepoSnapshot) {
	return func(s *RepoSnapshot) { s.Run.State = st }
}

// repoRow is one rule of the repo decision: an edit of repoSetup and the
// expected action, or a check for actions that carry jitter.
type repoRow struct {
	name  string
	edit  func(s *RepoSnapshot)
	want  func(s *RepoSnapshot) Action
	check func(t *testing.T, s *RepoSnapshot, a Action)
}

// repoWant returns a fixed expected action.
func repoWant(a Action) func(*RepoSnapshot) Action { return func(*RepoSnapshot) Action { return a } }

// repoRequeueSoon checks a RequeueSoon with reason, 15–20 s after now.
func repoRequeueSoon(reason string) func(t *testing.T, s *RepoSnapshot, a Action) {
	return func(t *testing.T, s *RepoSnapshot, a Action) {
		r, ok := a.(RequeueSoon)
		require.True(t, ok, "want RequeueSoon, got %#v", a)
		require.Equal(t, reason, r.Reason)
		require.GreaterOrEqual(t, r.At.Sub(s.Now), 15*time.Second)
		require.Less(t, r.At.Sub(s.Now), 20*time.Second)
	}
}

// repoDeferred checks a DeferWithBackoff for a failed read.
func repoDeferred(t *testing.T, _ *RepoSnapshot, a Action) {
	d, ok := a.(DeferWithBackoff)
	require.True(t, ok, "want DeferWithBackoff, got %#v", a)
	require.Equal(t, "read-failed", d.Reason)
}

// repoDeps returns an edit that sets the dependencies' states.
func repoDeps(states ...State) func(s *RepoSnapshot) {
	return func(s *RepoSnapshot) {
		for i, st := range states {
			s.Dependencies = append(s.Dependencies, Dependency{ID: string(rune('a' + i)), State: st})
		}
	}
}

// repoSeq combines edits.
func repoSeq(edits ...func(s *RepoSnapshot)) func(s *RepoSnapshot) {
	return func(s *RepoSnapshot) {
		for _, e := range edits {
			e(s)
		}
	}
}

func TestDecideRepoRules(t *testing.T) {
	t.Parallel()
	clearOnly := &Patch{ClearIntent: true}
	exit := func(code int) *int { return &code }
	rows := []repoRow{
		// Precedence.
		{name: "backoff active is a noop until it ends, before intents and read errors",
			edit: func(s *RepoSnapshot) {
				s.Run.Reconcile = Reconcile{Intent: IntentCancel, BackoffUntil: s.Now.Add(time.Minute)}
				s.ReadErrors = []ReadError{{Source: "pod", Message: "timeout"}}
			},
			want: func(s *RepoSnapshot) Action { return Noop{WakeAt: s.Now.Add(time.Minute), Reason: "backoff-active"} }},
		{name: "backoff in the past is ignored",
			edit: func(s *RepoSnapshot) { s.Run.Reconcile.BackoffUntil = s.Now.Add(-time.Second) },
			want: repoWant(Noop{Reason: "agent-running"})},
		{name: "intent beats a read error",
			edit: func(s *RepoSnapshot) {
				s.Run.Reconcile.Intent = IntentCancel
				s.ReadErrors = []ReadError{{Source: "pod"}}
			},
			want: repoWant(Transition{From: RepoRunning, To: RepoCancelled, Patch: clearOnly, Reason: "intent-cancel"})},
		{name: "read error defers with backoff",
			edit: func(s *RepoSnapshot) {
				s.Run.Reconcile.Attempts = 2
				s.ReadErrors = []ReadError{{Source: "pr", Message: "rate limited"}}
				s.Pod.Phase = PodError // would fail the run without the read error
			},
			check: func(t *testing.T, s *RepoSnapshot, a Action) {
				d, ok := a.(DeferWithBackoff)
				require.True(t, ok, "want DeferWithBackoff, got %#v", a)
				require.Equal(t, 3, d.Attempts)
				require.Equal(t, "read-failed", d.Reason)
				require.GreaterOrEqual(t, d.Until.Sub(s.Now), 2*time.Minute)
				require.LessOrEqual(t, d.Until.Sub(s.Now), 2*time.Minute+12*time.Second)
			}},

		// Control intents.
		{name: "cancel moves a non-terminal run to cancelled",
			edit: func(s *RepoSnapshot) { s.Run.State, s.Run.Reconcile.Intent = RepoPROpened, IntentCancel },
			want: repoWant(Transition{From: RepoPROpened, To: RepoCancelled, Patch: clearOnly, Reason: "intent-cancel"})},
		{name: "cancel on a terminal run is cleared",
			edit: func(s *RepoSnapshot) { s.Run.State, s.Run.Reconcile.Intent = RepoCompleted, IntentCancel },
			want: repoWant(ClearControlIntent{Intent: IntentCancel, Reason: "cancel-not-applicable"})},
		{name: "retry requeues a failed run with retries left and resets auto-resumes",
			edit: func(s *RepoSnapshot) {
				s.Run.State, s.Run.Reconcile.Intent, s.Run.RetryCount, s.Run.AutoResumes = RepoFailed, IntentRetry, 1, 4
			},
			want: repoWant(Transition{From: RepoFailed, To: RepoQueued,
				Patch: &Patch{ClearIntent: true, RetryCount: propPtr(2), AutoResumes: propPtr(0), ResumeTrigger: propPtr("")}, Reason: "intent-retry"})},
		{name: "retry requeues a cancelled run",
			edit: func(s *RepoSnapshot) { s.Run.State, s.Run.Reconcile.Intent = RepoCancelled, IntentRetry },
			want: repoWant(Transition{From: RepoCancelled, To: RepoQueued,
				Patch: &Patch{ClearIntent: true, RetryCount: propPtr(1), AutoResumes: propPtr(0), ResumeTrigger: propPtr("")}, Reason: "intent-retry"})},
		{name: "retry with retries used up is cleared",
			edit: func(s *RepoSnapshot) {
				s.Run.State, s.Run.Reconcile.Intent, s.Run.RetryCount = RepoFailed, IntentRetry, 2
			},
			want: repoWant(ClearControlIntent{Intent: IntentRetry, Reason: "retries-exhausted"})},
		{name: "retry on a run that is not failed or cancelled is cleared",
			edit: func(s *RepoSnapshot) { s.Run.Reconcile.Intent = IntentRetry },
			want: repoWant(ClearControlIntent{Intent: IntentRetry, Reason: "retry-not-applicable"})},
		{name: "resume requeues a run that needs attention and resets auto-resumes",
			edit: func(s *RepoSnapshot) {
				s.Run.State, s.Run.Reconcile.Intent, s.Run.AutoResumes = RepoNeedsAttention, IntentResume, 10
			},
			want: repoWant(Transition{From: RepoNeedsAttention, To: RepoQueued,
				Patch: &Patch{ClearIntent: true, AutoResumes: propPtr(0), ResumeTrigger: propPtr("manual")}, Reason: "intent-resume"})},
		{name: "resume elsewhere is cleared",
			edit: func(s *RepoSnapshot) { s.Run.State, s.Run.Reconcile.Intent = RepoFailed, IntentResume },
			want: repoWant(ClearControlIntent{Intent: IntentResume, Reason: "resume-not-applicable"})},
		{name: "restart requeues a terminal run resetting retries, auto-resumes and session",
			edit: func(s *RepoSnapshot) {
				s.Run.State, s.Run.Reconcile.Intent, s.Run.RetryCount, s.Run.AutoResumes = RepoCompleted, IntentRestart, 2, 3
			},
			want: repoWant(Transition{From: RepoCompleted, To: RepoQueued,
				Patch: &Patch{ClearIntent: true, RetryCount: propPtr(0), ResetSession: true, AutoResumes: propPtr(0), ResumeTrigger: propPtr("")}, Reason: "intent-restart"})},
		{name: "restart on a non-terminal run is cleared",
			edit: func(s *RepoSnapshot) { s.Run.Reconcile.Intent = IntentRestart },
			want: repoWant(ClearControlIntent{Intent: IntentRestart, Reason: "restart-not-applicable"})},
		{name: "an intent repo runs do not support is cleared",
			edit: func(s *RepoSnapshot) { s.Run.Reconcile.Intent = IntentPause },
			want: repoWant(ClearControlIntent{Intent: IntentPause, Reason: "intent-unsupported"})},

		// pending and waiting_on_deps.
		{name: "pending without dependencies is queued",
			edit: repoIn(RepoPending),
			want: repoWant(Transition{From: RepoPending, To: RepoQueued, Reason: "no-dependencies"})},
		{name: "pending with all dependencies completed is queued",
			edit: repoSeq(repoIn(RepoPending), repoDeps(RepoCompleted, RepoCompleted)),
			want: repoWant(Transition{From: RepoPending, To: RepoQueued, Reason: "dependencies-completed"})},
		{name: "pending with an unfinished dependency waits on it",
			edit: repoSeq(repoIn(RepoPending), repoDeps(RepoCompleted, RepoRunning)),
			want: repoWant(Transition{From: RepoPending, To: RepoWaitingOnDeps, Reason: "waiting-on-deps"})},
		{name: "pending with a failed dependency fails, even with others unfinished",
			edit: repoSeq(repoIn(RepoPending), repoDeps(RepoRunning, RepoFailed)),
			want: repoWant(Transition{From: RepoPending, To: RepoFailed, Reason: "dependency-failed"})},
		{name: "pending with a cancelled dependency fails",
			edit: repoSeq(repoIn(RepoPending), repoDeps(RepoCancelled)),
			want: repoWant(Transition{From: RepoPending, To: RepoFailed, Reason: "dependency-failed"})},
		{name: "waiting with a failed dependency fails",
			edit: repoSeq(repoIn(RepoWaitingOnDeps), repoDeps(RepoCompleted, RepoCancelled)),
			want: repoWant(Transition{From: RepoWaitingOnDeps, To: RepoFailed, Reason: "dependency-failed"})},
		{name: "waiting with all dependencies completed is queued",
			edit: repoSeq(repoIn(RepoWaitingOnDeps), repoDeps(RepoCompleted)),
			want: repoWant(Transition{From: RepoWaitingOnDeps, To: RepoQueued, Reason: "dependencies-completed"})},
		{name: "waiting with an unfinished dependency keeps waiting",
			edit: repoSeq(repoIn(RepoWaitingOnDeps), repoDeps(RepoPROpened)),
			want: repoWant(Noop{Reason: "waiting-on-deps"})},

		// queued.
		{name: "queued with capacity hands the run to an agent",
			edit: repoIn(RepoQueued),
			want: repoWant(RequeueForAgent{From: RepoQueued, To: RepoProvisioning, Reason: "capacity-available"})},
		{name: "queued after a resume hands the run to an agent resuming on the trigger",
			edit: repoSeq(repoIn(RepoQueued), func(s *RepoSnapshot) { s.Run.ResumeTrigger = "ci-failing" }),
			want: repoWant(RequeueForAgent{From: RepoQueued, To: RepoProvisioning, Trigger: "ci-failing", Reason: "capacity-available"})},
		{name: "queued with a failed capacity read defers",
			edit:  repoSeq(repoIn(RepoQueued), func(s *RepoSnapshot) { s.ReadErrors = []ReadError{{Source: SourceCapacity}} }),
			check: repoDeferred},
		{name: "pending with a failed dependencies read defers",
			edit:  repoSeq(repoIn(RepoPending), repoDeps(RepoCompleted), func(s *RepoSnapshot) { s.ReadErrors = []ReadError{{Source: SourceDependencies}} }),
			check: repoDeferred},
		{name: "waiting on dependencies with a failed dependencies read defers",
			edit:  repoSeq(repoIn(RepoWaitingOnDeps), repoDeps(RepoFailed), func(s *RepoSnapshot) { s.ReadErrors = []ReadError{{Source: SourceDependencies}} }),
			check: repoDeferred},
		{name: "pending with a failed capacity read still decides on its dependencies",
			edit: repoSeq(repoIn(RepoPending), repoDeps(RepoCompleted), func(s *RepoSnapshot) { s.ReadErrors = []ReadError{{Source: SourceCapacity}} }),
			want: repoWant(Transition{From: RepoPending, To: RepoQueued, Reason: "dependencies-completed"})},
		{name: "queued with a failed dependencies read still launches",
			edit: repoSeq(repoIn(RepoQueued), func(s *RepoSnapshot) { s.ReadErrors = []ReadError{{Source: SourceDependencies}} }),
			want: repoWant(RequeueForAgent{From: RepoQueued, To: RepoProvisioning, Reason: "capacity-available"})},
		{name: "a running run's health checks go on despite failed capacity and dependencies reads",
			edit: func(s *RepoSnapshot) {
				s.Pod.Phase = PodError
				s.ReadErrors = []ReadError{{Source: SourceCapacity}, {Source: SourceDependencies}}
			},
			want: repoWant(Transition{From: RepoRunning, To: RepoFailed, Reason: "pod-dead"})},
		{name: "PR reactions go on despite a failed capacity read",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.State, pr.Merged = PRMerged, true }), func(s *RepoSnapshot) {
				s.ReadErrors = []ReadError{{Source: SourceCapacity}}
			}),
			want: repoWant(Transition{From: RepoPROpened, To: RepoCompleted, Reason: "pr-merged",
				Patch: &Patch{PR: repoTestFields(func(f *PRFields) { f.State = PRMerged })}})},
		{name: "queued with global capacity full requeues soon",
			edit:  repoSeq(repoIn(RepoQueued), func(s *RepoSnapshot) { s.Capacity.GlobalActive = 4 }),
			check: repoRequeueSoon("capacity-full")},
		{name: "queued with the repo's capacity full requeues soon",
			edit:  repoSeq(repoIn(RepoQueued), func(s *RepoSnapshot) { s.Capacity.RepoActive = 2 }),
			check: repoRequeueSoon("capacity-full")},
		{name: "queued outside the off-peak window requeues soon",
			edit: repoSeq(repoIn(RepoQueued), func(s *RepoSnapshot) {
				s.Settings.OffPeak = OffPeak{Only: true, StartHour: 22, EndHour: 6} // now is 14:00 UTC
			}),
			check: repoRequeueSoon("off-peak")},
		{name: "queued inside the off-peak window hands the run to an agent",
			edit: repoSeq(repoIn(RepoQueued), func(s *RepoSnapshot) {
				s.Settings.OffPeak = OffPeak{Only: true, StartHour: 13, EndHour: 15}
			}),
			want: repoWant(RequeueForAgent{From: RepoQueued, To: RepoProvisioning, Reason: "capacity-available"})},

		// provisioning.
		{name: "provisioning without a pod waits",
			edit: repoSeq(repoIn(RepoProvisioning), func(s *RepoSnapshot) { s.Pod = nil }),
			want: repoWant(Noop{Reason: "awaiting-pod"})},
		{name: "provisioning with a pending pod waits",
			edit: repoSeq(repoIn(RepoProvisioning), func(s *RepoSnapshot) { s.Pod.Phase = PodPending }),
			want: repoWant(Noop{Reason: "pod-pending"})},
		{name: "provisioning with a running pod is running",
			edit: repoIn(RepoProvisioning),
			want: repoWant(Transition{From: RepoProvisioning, To: RepoRunning, Reason: "pod-ready"})},
		{name: "provisioning with a ready pod is running",
			edit: repoSeq(repoIn(RepoProvisioning), func(s *RepoSnapshot) { s.Pod.Phase = PodReady }),
			want: repoWant(Transition{From: RepoProvisioning, To: RepoRunning, Reason: "pod-ready"})},
		{name: "provisioning with an errored pod fails",
			edit: repoSeq(repoIn(RepoProvisioning), func(s *RepoSnapshot) { s.Pod.Phase = PodError }),
			want: repoWant(Transition{From: RepoProvisioning, To: RepoFailed, Reason: "pod-dead"})},
		{name: "provisioning with a terminated pod fails",
			edit: repoSeq(repoIn(RepoProvisioning), func(s *RepoSnapshot) { s.Pod.Phase, s.Pod.ExitCode = PodTerminated, exit(0) }),
			want: repoWant(Transition{From: RepoProvisioning, To: RepoFailed, Reason: "pod-dead"})},
		{name: "provisioning with a pod unknown within the default 5 min grace waits for its end",
			edit: repoSeq(repoIn(RepoProvisioning), func(s *RepoSnapshot) { s.Pod.Phase, s.Pod.Since = PodUnknown, s.Now.Add(-4*time.Minute) }),
			want: func(s *RepoSnapshot) Action { return Noop{WakeAt: s.Now.Add(time.Minute), Reason: "pod-unknown"} }},
		{name: "provisioning with a pod unknown past its configured grace fails saying so",
			edit: repoSeq(repoIn(RepoProvisioning), func(s *RepoSnapshot) {
				s.Pod.Phase, s.Pod.Since, s.Settings.UnknownPodGrace = PodUnknown, s.Now.Add(-time.Minute), Duration(time.Minute)
			}),
			want: repoWant(Transition{From: RepoProvisioning, To: RepoFailed, Reason: "pod-unknown-past-grace"})},
		{name: "provisioning with a pod unknown since an unrecorded time fails at once",
			edit: repoSeq(repoIn(RepoProvisioning), func(s *RepoSnapshot) { s.Pod.Phase = PodUnknown }),
			want: repoWant(Transition{From: RepoProvisioning, To: RepoFailed, Reason: "pod-unknown-past-grace"})},

		// running.
		{name: "running with a new open PR moves to pr_opened recording it",
			edit: func(s *RepoSnapshot) { s.PR = repoTestPR() },
			want: repoWant(Transition{From: RepoRunning, To: RepoPROpened, Patch: &Patch{PR: repoDetected()}, Reason: "pr-detected"})},
		{name: "running with an open PR other than the recorded one moves to pr_opened",
			edit: func(s *RepoSnapshot) {
				s.PR = repoTestPR()
				s.Run.PR = *repoTestFields(func(f *PRFields) { f.URL, f.Number = "https://git.example.com/acme/api/pull/6", 6 })
			},
			want: repoWant(Transition{From: RepoRunning, To: RepoPROpened, Patch: &Patch{PR: repoDetected()}, Reason: "pr-detected"})},
		{name: "PR detection beats pod death",
			edit: func(s *RepoSnapshot) { s.PR, s.Pod.Phase, s.Pod.LastError = repoTestPR(), PodError, "OOMKilled" },
			want: repoWant(Transition{From: RepoRunning, To: RepoPROpened, Patch: &Patch{PR: repoDetected()}, Reason: "pr-detected"})},
		{name: "a closed PR is not detected",
			edit: func(s *RepoSnapshot) { s.PR = repoTestPR(); s.PR.State = PRClosed },
			want: repoWant(Noop{Reason: "agent-running"})},
		{name: "running with its PR already recorded keeps running",
			edit: func(s *RepoSnapshot) { s.PR, s.Run.PR = repoTestPR(), *repoTestFields(nil) },
			want: repoWant(Noop{Reason: "agent-running"})},
		{name: "an agent that exits 0 with a recorded PR returns to pr_opened",
			edit: func(s *RepoSnapshot) {
				s.PR, s.Run.PR = repoTestPR(), *repoTestFields(nil)
				s.Pod.Phase, s.Pod.ExitCode = PodTerminated, exit(0)
			},
			want: repoWant(Transition{From: RepoRunning, To: RepoPROpened, Reason: "agent-finished"})},
		{name: "a PR first seen with CI already failing is a new problem in pr_opened",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.Checks = ChecksFailing }), func(s *RepoSnapshot) {
				s.Run.PR = *repoDetected()
				s.Settings.AutoResume = false
			}),
			want: repoWant(Transition{From: RepoPROpened, To: RepoNeedsAttention, Reason: "ci-failing-needs-attention",
				Patch: &Patch{PR: repoTestFields(func(f *PRFields) { f.Checks = ChecksFailing })}})},
		{name: "an agent that exits 0 with a recorded PR not observed now returns to pr_opened, as documented",
			edit: func(s *RepoSnapshot) {
				s.Run.PR = *repoTestFields(nil)
				s.Pod.Phase, s.Pod.ExitCode = PodTerminated, exit(0)
			},
			want: repoWant(Transition{From: RepoRunning, To: RepoPROpened, Reason: "agent-finished"})},
		{name: "an agent that exits 0 without a PR needs attention",
			edit: func(s *RepoSnapshot) { s.Pod.Phase, s.Pod.ExitCode = PodTerminated, exit(0) },
			want: repoWant(Transition{From: RepoRunning, To: RepoNeedsAttention, Reason: "finished-without-pr"})},
		{name: "running without a pod fails",
			edit: func(s *RepoSnapshot) { s.Pod = nil },
			want: repoWant(Transition{From: RepoRunning, To: RepoFailed, Reason: "pod-missing"})},
		{name: "running with an errored pod fails",
			edit: func(s *RepoSnapshot) { s.Pod.Phase = PodError },
			want: repoWant(Transition{From: RepoRunning, To: RepoFailed, Reason: "pod-dead"})},
		{name: "running with a pod that exited non-zero fails",
			edit: func(s *RepoSnapshot) { s.Pod.Phase, s.Pod.ExitCode = PodTerminated, exit(1) },
			want: repoWant(Transition{From: RepoRunning, To: RepoFailed, Reason: "pod-dead"})},
		{name: "pod death beats stall",
			edit: func(s *RepoSnapshot) { s.Pod.Phase, s.Heartbeat = PodError, s.Now.Add(-time.Hour) },
			want: repoWant(Transition{From: RepoRunning, To: RepoFailed, Reason: "pod-dead"})},
		{name: "running with a pod unknown within its grace keeps running until the grace ends",
			edit: func(s *RepoSnapshot) { s.Pod.Phase, s.Pod.Since = PodUnknown, s.Now.Add(-time.Minute) },
			want: func(s *RepoSnapshot) Action { return Noop{WakeAt: s.Now.Add(4 * time.Minute), Reason: "pod-unknown"} }},
		{name: "running with a pod unknown within its grace still stalls on a stale heartbeat",
			edit: func(s *RepoSnapshot) {
				s.Pod.Phase, s.Pod.Since, s.Heartbeat = PodUnknown, s.Now.Add(-time.Minute), s.Now.Add(-time.Hour)
			},
			want: repoWant(Transition{From: RepoRunning, To: RepoFailed, Reason: "stalled"})},
		{name: "running with a pod unknown past its grace fails saying so, before stall",
			edit: func(s *RepoSnapshot) {
				s.Pod.Phase, s.Pod.Since, s.Heartbeat = PodUnknown, s.Now.Add(-6*time.Minute), s.Now.Add(-time.Hour)
			},
			want: repoWant(Transition{From: RepoRunning, To: RepoFailed, Reason: "pod-unknown-past-grace"})},
		{name: "a heartbeat older than the default 15 min threshold is a stall",
			edit: func(s *RepoSnapshot) { s.Heartbeat = s.Now.Add(-16 * time.Minute) },
			want: repoWant(Transition{From: RepoRunning, To: RepoFailed, Reason: "stalled"})},
		{name: "a heartbeat within the default threshold is not a stall",
			edit: func(s *RepoSnapshot) { s.Heartbeat = s.Now.Add(-15 * time.Minute) },
			want: repoWant(Noop{Reason: "agent-running"})},
		{name: "a configured stall threshold replaces the default",
			edit: func(s *RepoSnapshot) {
				s.Settings.StallThreshold = Duration(5 * time.Minute)
				s.Heartbeat = s.Now.Add(-6 * time.Minute)
			},
			want: repoWant(Transition{From: RepoRunning, To: RepoFailed, Reason: "stalled"})},
		{name: "a run without a heartbeat yet is not stalled",
			edit: func(s *RepoSnapshot) { s.Heartbeat = time.Time{} },
			want: repoWant(Noop{Reason: "agent-running"})},

		// pr_opened.
		{name: "pr_opened without an observed PR waits",
			edit: repoSeq(repoWithPR(nil), func(s *RepoSnapshot) { s.PR = nil }),
			want: repoWant(Noop{Reason: "pr-not-observed"})},
		{name: "a merged PR completes the run",
			edit: repoWithPR(func(pr *PullRequest) { pr.State, pr.Merged, pr.Checks = PRMerged, true, ChecksFailing }),
			want: repoWant(Transition{From: RepoPROpened, To: RepoCompleted, Reason: "pr-merged",
				Patch: &Patch{PR: repoTestFields(func(f *PRFields) { f.State, f.Checks = PRMerged, ChecksFailing })}})},
		{name: "a PR closed without merging fails the run",
			edit: repoWithPR(func(pr *PullRequest) { pr.State = PRClosed }),
			want: repoWant(Transition{From: RepoPROpened, To: RepoFailed, Reason: "pr-closed",
				Patch: &Patch{PR: repoTestFields(func(f *PRFields) { f.State = PRClosed })}})},
		{name: "new conflicts resume the agent",
			edit: repoWithPR(func(pr *PullRequest) { pr.Checks = ChecksConflicts }),
			want: repoWant(ResumeAgent{From: RepoPROpened, To: RepoQueued, Trigger: "conflicts", Reason: "conflicts-auto-resume",
				Patch: &Patch{AutoResumes: propPtr(1), ResumeTrigger: propPtr("conflicts"), PR: repoTestFields(func(f *PRFields) { f.Checks = ChecksConflicts })}})},
		{name: "newly failing CI resumes the agent",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.Checks = ChecksFailing }), func(s *RepoSnapshot) { s.Run.AutoResumes = 3 }),
			want: repoWant(ResumeAgent{From: RepoPROpened, To: RepoQueued, Trigger: "ci-failing", Reason: "ci-failing-auto-resume",
				Patch: &Patch{AutoResumes: propPtr(4), ResumeTrigger: propPtr("ci-failing"), PR: repoTestFields(func(f *PRFields) { f.Checks = ChecksFailing })}})},
		{name: "CI that was already failing does not resume again",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.Checks = ChecksFailing }), func(s *RepoSnapshot) { s.Run.PR.Checks = ChecksFailing }),
			want: repoWant(Noop{Reason: "pr-steady"})},
		{name: "newly failing CI with auto-resume off needs attention",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.Checks = ChecksFailing }), func(s *RepoSnapshot) { s.Settings.AutoResume = false }),
			want: repoWant(Transition{From: RepoPROpened, To: RepoNeedsAttention, Reason: "ci-failing-needs-attention",
				Patch: &Patch{PR: repoTestFields(func(f *PRFields) { f.Checks = ChecksFailing })}})},
		{name: "new conflicts with the auto-resume cap reached need attention",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.Checks = ChecksConflicts }), func(s *RepoSnapshot) {
				s.Settings.MaxAutoResumes, s.Run.AutoResumes = 2, 2
			}),
			want: repoWant(Transition{From: RepoPROpened, To: RepoNeedsAttention, Reason: "conflicts-needs-attention",
				Patch: &Patch{PR: repoTestFields(func(f *PRFields) { f.Checks = ChecksConflicts })}})},
		{name: "the default auto-resume cap is 10",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.Checks = ChecksFailing }), func(s *RepoSnapshot) { s.Run.AutoResumes = 10 }),
			want: repoWant(Transition{From: RepoPROpened, To: RepoNeedsAttention, Reason: "ci-failing-needs-attention",
				Patch: &Patch{PR: repoTestFields(func(f *PRFields) { f.Checks = ChecksFailing })}})},
		{name: "newly requested changes resume the agent",
			edit: repoWithPR(func(pr *PullRequest) { pr.Review = ReviewChangesRequested }),
			want: repoWant(ResumeAgent{From: RepoPROpened, To: RepoQueued, Trigger: "changes-requested", Reason: "changes-requested-auto-resume",
				Patch: &Patch{AutoResumes: propPtr(1), ResumeTrigger: propPtr("changes-requested"), PR: repoTestFields(func(f *PRFields) { f.Review = ReviewChangesRequested })}})},
		{name: "newly failing CI beats newly requested changes",
			edit: repoWithPR(func(pr *PullRequest) { pr.Checks, pr.Review = ChecksFailing, ReviewChangesRequested }),
			want: repoWant(ResumeAgent{From: RepoPROpened, To: RepoQueued, Trigger: "ci-failing", Reason: "ci-failing-auto-resume",
				Patch: &Patch{AutoResumes: propPtr(1), ResumeTrigger: propPtr("ci-failing"), PR: repoTestFields(func(f *PRFields) { f.Checks, f.Review = ChecksFailing, ReviewChangesRequested })}})},
		{name: "requested changes already recorded do not resume again",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.Review = ReviewChangesRequested }), func(s *RepoSnapshot) {
				s.Run.PR.Review = ReviewChangesRequested
			}),
			want: repoWant(Noop{Reason: "pr-steady"})},
		{name: "newly requested changes with auto-resume off need attention",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.Review = ReviewChangesRequested }), func(s *RepoSnapshot) { s.Settings.AutoResume = false }),
			want: repoWant(Transition{From: RepoPROpened, To: RepoNeedsAttention, Reason: "changes-requested-needs-attention",
				Patch: &Patch{PR: repoTestFields(func(f *PRFields) { f.Review = ReviewChangesRequested })}})},
		{name: "an approved, passing PR with auto-merge on is merged",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.Checks, pr.Review = ChecksPassing, ReviewApproved }), func(s *RepoSnapshot) {
				s.Settings.AutoMerge = true
				s.Run.PR.Checks, s.Run.PR.Review = ChecksPassing, ReviewApproved
				s.Subtasks = []Subtask{{ID: "t1", State: RepoCompleted, Blocking: true}, {ID: "t2", State: RepoRunning}}
			}),
			want: repoWant(AutoMergePR{PRURL: "https://git.example.com/acme/api/pull/7", HeadSHA: "a1b2c3", Reason: "auto-merge-ready"})},
		{name: "cautious mode never auto-merges",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.Checks, pr.Review = ChecksPassing, ReviewApproved }), func(s *RepoSnapshot) {
				s.Settings.AutoMerge, s.Settings.Cautious = true, true
				s.Run.PR.Checks, s.Run.PR.Review = ChecksPassing, ReviewApproved
			}),
			want: repoWant(Noop{Reason: "pr-steady"})},
		{name: "an unfinished blocking subtask holds auto-merge",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.Checks, pr.Review = ChecksPassing, ReviewApproved }), func(s *RepoSnapshot) {
				s.Settings.AutoMerge = true
				s.Run.PR.Checks, s.Run.PR.Review = ChecksPassing, ReviewApproved
				s.Subtasks = []Subtask{{ID: "t1", State: RepoRunning, Blocking: true}}
			}),
			want: repoWant(Noop{Reason: "pr-steady"})},
		{name: "auto-merge waits for approval",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.Checks, pr.Review = ChecksPassing, ReviewCommented }), func(s *RepoSnapshot) {
				s.Settings.AutoMerge = true
				s.Run.PR.Checks, s.Run.PR.Review = ChecksPassing, ReviewCommented
			}),
			want: repoWant(Noop{Reason: "pr-steady"})},
		{name: "auto-merge waits for passing CI",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.Review = ReviewApproved }), func(s *RepoSnapshot) {
				s.Settings.AutoMerge = true
				s.Run.PR.Review = ReviewApproved
			}),
			want: repoWant(Noop{Reason: "pr-steady"})},
		{name: "auto-merge beats review launch",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.Checks, pr.Review = ChecksPassing, ReviewApproved }), func(s *RepoSnapshot) {
				s.Settings.AutoMerge, s.Settings.ReviewEnabled = true, true
			}),
			want: repoWant(AutoMergePR{PRURL: "https://git.example.com/acme/api/pull/7", HeadSHA: "a1b2c3", Reason: "auto-merge-ready"})},
		{name: "passing CI launches the review (on_ci_pass is the default trigger)",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.Checks = ChecksPassing }), func(s *RepoSnapshot) { s.Settings.ReviewEnabled = true }),
			want: repoWant(LaunchReview{PRURL: "https://git.example.com/acme/api/pull/7", Reason: "launch-review"})},
		{name: "on_ci_pass waits for passing CI",
			edit: repoSeq(repoWithPR(nil), func(s *RepoSnapshot) {
				s.Settings.ReviewEnabled, s.Settings.ReviewTrigger = true, ReviewOnCIPass
			}),
			want: repoWant(Noop{Reason: "pr-steady"})},
		{name: "on_pr_open launches the review whatever CI says",
			edit: repoSeq(repoWithPR(nil), func(s *RepoSnapshot) {
				s.Settings.ReviewEnabled, s.Settings.ReviewTrigger = true, ReviewOnPROpen
			}),
			want: repoWant(LaunchReview{PRURL: "https://git.example.com/acme/api/pull/7", Reason: "launch-review"})},
		{name: "a running review is not launched again",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.Checks = ChecksPassing }), func(s *RepoSnapshot) {
				s.Settings.ReviewEnabled, s.Run.ReviewRunning = true, true
				s.Run.PR.Checks = ChecksPassing
			}),
			want: repoWant(Noop{Reason: "pr-steady"})},
		{name: "drifted PR fields are recorded",
			edit: repoWithPR(func(pr *PullRequest) { pr.Checks, pr.HeadSHA = ChecksPassing, "d4e5f6" }),
			want: repoWant(PatchStatus{Reason: "pr-drift",
				Patch: Patch{PR: repoTestFields(func(f *PRFields) { f.Checks, f.HeadSHA = ChecksPassing, "d4e5f6" })}})},
		{name: "a PR that matches its record is steady",
			edit: repoWithPR(nil),
			want: repoWant(Noop{Reason: "pr-steady"})},

		// needs_attention and terminal states.
		{name: "needs_attention waits for an intent",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.Checks = ChecksFailing }), repoIn(RepoNeedsAttention)),
			want: repoWant(Noop{Reason: "awaiting-intent"})},
		{name: "needs_attention completes when the PR merges",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.State, pr.Merged = PRMerged, true }), repoIn(RepoNeedsAttention)),
			want: repoWant(Transition{From: RepoNeedsAttention, To: RepoCompleted, Reason: "pr-merged",
				Patch: &Patch{PR: repoTestFields(func(f *PRFields) { f.State = PRMerged })}})},
		{name: "needs_attention fails when the PR closes",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.State = PRClosed }), repoIn(RepoNeedsAttention)),
			want: repoWant(Transition{From: RepoNeedsAttention, To: RepoFailed, Reason: "pr-closed",
				Patch: &Patch{PR: repoTestFields(func(f *PRFields) { f.State = PRClosed })}})},
		{name: "completed is terminal",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.Checks = ChecksFailing }), repoIn(RepoCompleted)),
			want: repoWant(Noop{Reason: "terminal-state"})},
		{name: "failed is terminal even with an open PR",
			edit: repoSeq(repoWithPR(func(pr *PullRequest) { pr.Checks = ChecksFailing }), repoIn(RepoFailed)),
			want: repoWant(Noop{Reason: "terminal-state"})},
		{name: "cancelled is terminal",
			edit: repoIn(RepoCancelled),
			want: repoWant(Noop{Reason: "terminal-state"})},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			s := repoSetup(t)
			row.edit(s)
			a := DecideRepo(s)
			if row.check != nil {
				row.check(t, s, a)
				return
			}
			require.Equal(t, row.want(s), a)
		})
	}
}

// TestDecideRepoCancelEveryActiveState checks the cancel rule on every
// non-terminal state of the machine.
func TestDecideRepoCancelEveryActiveState(t *testing.T) {
	t.Parallel()
	for _, st := range RepoMachine.States {
		if RepoMachine.IsTerminal(st) {
			continue
		}
		s := repoSetup(t)
		s.Run.State, s.Run.Reconcile.Intent = st, IntentCancel
		require.Equal(t, Transition{From: st, To: RepoCancelled, Patch: &Patch{ClearIntent: true}, Reason: "intent-cancel"}, DecideRepo(s), "cancel from %s", st)
	}
}

// TestDecideRepoOffPeakWrapsMidnight checks that a window like 22–06
// allows launches after midnight.
func TestDecideRepoOffPeakWrapsMidnight(t *testing.T) {
	t.Parallel()
	s := repoSetup(t)
	s.Run.State = RepoQueued
	s.Settings.OffPeak = OffPeak{Only: true, StartHour: 22, EndHour: 6}
	s.Now = time.Date(2026, time.November, 21, 3, 0, 0, 0, time.UTC)
	require.Equal(t, RequeueForAgent{From: RepoQueued, To: RepoProvisioning, Reason: "capacity-available"}, DecideRepo(s))
}
