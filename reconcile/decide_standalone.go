package reconcile

import "time"

// Retry backoff of failed standalone runs when Settings.RetryBackoff is not
// set: 30 s, doubling per retry, capped at one hour.
const (
	defaultRetryBackoff = 30 * time.Second
	maxRetryBackoff     = time.Hour
)

// DecideStandalone returns the one action for a standalone workflow run (one
// agent run with no repository or pull request).
//
// Precedence, first match wins:
//
//  1. Backoff: while Reconcile.BackoffUntil is after Now → Noop{WakeAt:
//     BackoffUntil} ("backoff-active").
//  2. Control intent, applied with Patch.ClearIntent in the same Transition,
//     and only along an edge of StandaloneMachine:
//     - cancel: queued or running → cancelled ("intent-cancel"); else
//     cleared ("cancel-not-applicable").
//     - retry: failed or cancelled with RetryCount < MaxRetries → queued with
//     RetryCount+1 ("intent-retry"); cleared when the retries are used up
//     ("retries-exhausted") or the run is not failed or cancelled
//     ("retry-not-applicable").
//     - restart: completed, failed or cancelled → queued with RetryCount=0
//     ("intent-restart"); else cleared ("restart-not-applicable").
//     - any other intent is cleared ("intent-unsupported").
//  3. A failed read of a fact the state needs → DeferWithBackoff
//     ("read-failed"); never a transition. Capacity is needed only to launch
//     from queued; a failed read of another source defers every decision.
//  4. The state switch:
//     - queued: the workflow is disabled (Settings.WorkflowDisabled) →
//     failed ("workflow-disabled"); capacity full → RequeueSoon
//     ("capacity-full"); else EnqueueAgent queued → running
//     ("capacity-available").
//     - running, in this order: the pod exited 0 → completed
//     ("pod-succeeded"); no pod observed yet → failed when the heartbeat is
//     stale ("stalled"), else Noop ("awaiting-pod"), since the launch
//     precedes the pod; pod unknown within Settings.UnknownPodGrace
//     (default 5 min) of Pod.Since → failed on a stale heartbeat
//     ("stalled"), else Noop waking at the grace's end ("pod-unknown"); pod
//     unknown past its grace → failed ("pod-unknown-past-grace"); pod
//     errored or terminated non-zero → failed ("pod-dead"); heartbeat older than Settings.StallThreshold (default
//     15 min) → failed ("stalled"); else Noop ("agent-running"). A run with
//     no heartbeat yet is never stalled.
//     - failed with RetryCount < MaxRetries: the retry is due at FinishedAt +
//     RetryDelay(RetryCount, Settings.RetryBackoff (default 30 s), 1 h);
//     before that Noop{WakeAt: due} ("retry-scheduled"), at or after it →
//     queued with RetryCount+1 ("auto-retry"). A run with no FinishedAt is
//     retried at once.
//     - failed with no retries left → Noop ("retries-exhausted").
//     - completed, cancelled: Noop ("terminal-state"); only intents move
//     them.
//
// Every move into completed or failed that is not an intent records
// FinishedAt=Now, which the retry backoff counts from.
func DecideStandalone(s *StandaloneSnapshot) Action {
	w, r := &s.World, s.Run.Reconcile
	if a, ok := backoffActive(w, r); ok {
		return a
	}
	if r.Intent != IntentNone {
		return standaloneIntent(s)
	}
	if a, ok := readFailed(w, r, needsOf(KindStandalone, s.Run.State)); ok {
		return a
	}
	switch s.Run.State {
	case StandaloneQueued:
		if w.Settings.WorkflowDisabled {
			return standaloneFinish(w, StandaloneQueued, StandaloneFailed, "workflow-disabled")
		}
		if !w.Capacity.Available() {
			return requeueSoon(w, "capacity-full")
		}
		return EnqueueAgent{From: StandaloneQueued, To: StandaloneRunning, Reason: "capacity-available"}
	case StandaloneRunning:
		return standaloneRunning(w)
	case StandaloneFailed:
		return standaloneFailed(s)
	case StandaloneCompleted, StandaloneCancelled:
		return Noop{Reason: "terminal-state"}
	}
	return Noop{Reason: "unknown-state"}
}

// standaloneIntent applies (or clears) the run's control intent.
func standaloneIntent(s *StandaloneSnapshot) Action {
	run := &s.Run
	from, in := run.State, run.Reconcile.Intent
	switch in {
	case IntentCancel:
		if from != StandaloneQueued && from != StandaloneRunning {
			return ClearControlIntent{Intent: IntentCancel, Reason: "cancel-not-applicable"}
		}
		return applyIntent(&StandaloneMachine, in, from, StandaloneCancelled, &Patch{ClearIntent: true}, "intent-cancel")
	case IntentRetry:
		if from != StandaloneFailed && from != StandaloneCancelled {
			return ClearControlIntent{Intent: IntentRetry, Reason: "retry-not-applicable"}
		}
		if run.RetryCount >= run.MaxRetries {
			return ClearControlIntent{Intent: IntentRetry, Reason: "retries-exhausted"}
		}
		return applyIntent(&StandaloneMachine, in, from, StandaloneQueued, standaloneRetryPatch(max(run.RetryCount, 0)+1, true), "intent-retry")
	case IntentRestart:
		if !StandaloneMachine.IsTerminal(from) {
			return ClearControlIntent{Intent: IntentRestart, Reason: "restart-not-applicable"}
		}
		return applyIntent(&StandaloneMachine, in, from, StandaloneQueued, standaloneRetryPatch(0, true), "intent-restart")
	}
	return clearUnsupported(in)
}

// standaloneRunning decides a run whose agent is working.
func standaloneRunning(w *World) Action {
	pod := w.Pod
	until, waiting, lost := unknownPod(w)
	switch {
	case waiting:
		if heartbeatStale(w) {
			return standaloneFinish(w, StandaloneRunning, StandaloneFailed, "stalled")
		}
		return Noop{WakeAt: until, Reason: "pod-unknown"}
	case lost:
		return standaloneFinish(w, StandaloneRunning, StandaloneFailed, reasonUnknownPod)
	case pod.Succeeded():
		return standaloneFinish(w, StandaloneRunning, StandaloneCompleted, "pod-succeeded")
	case pod == nil:
		if heartbeatStale(w) {
			return standaloneFinish(w, StandaloneRunning, StandaloneFailed, "stalled")
		}
		return Noop{Reason: "awaiting-pod"}
	case pod.Dead():
		return standaloneFinish(w, StandaloneRunning, StandaloneFailed, "pod-dead")
	case heartbeatStale(w):
		return standaloneFinish(w, StandaloneRunning, StandaloneFailed, "stalled")
	}
	return Noop{Reason: "agent-running"}
}

// standaloneFailed retries a failed run after its backoff while retries
// remain.
func standaloneFailed(s *StandaloneSnapshot) Action {
	run, w := &s.Run, &s.World
	if run.RetryCount >= run.MaxRetries {
		return Noop{Reason: "retries-exhausted"}
	}
	due := run.FinishedAt.Add(RetryDelay(run.RetryCount, w.Settings.RetryBackoff.Or(defaultRetryBackoff), maxRetryBackoff))
	if w.Now.Before(due) {
		return Noop{WakeAt: due, Reason: "retry-scheduled"}
	}
	return Transition{From: StandaloneFailed, To: StandaloneQueued, Patch: standaloneRetryPatch(max(run.RetryCount, 0)+1, false), Reason: "auto-retry"}
}

// standalonePatchBuf holds a standalone patch and the values it points at,
// so a patch costs one allocation.
type standalonePatchBuf struct {
	p       Patch
	retries int
	at      time.Time
}

// standaloneFinish moves the run into completed or failed, recording
// FinishedAt=Now.
func standaloneFinish(w *World, from, to State, reason string) Action {
	b := &standalonePatchBuf{at: w.Now}
	b.p.FinishedAt = &b.at
	return Transition{From: from, To: to, Patch: &b.p, Reason: reason}
}

// standaloneRetryPatch is the patch of a move back to queued: RetryCount set
// to retries, and the intent cleared when clearIntent.
func standaloneRetryPatch(retries int, clearIntent bool) *Patch {
	b := &standalonePatchBuf{retries: retries}
	b.p = Patch{ClearIntent: clearIntent, RetryCount: &b.retries}
	return &b.p
}
