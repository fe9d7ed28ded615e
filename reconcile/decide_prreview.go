package reconcile

// defaultMaxReruns caps automatic PR review re-runs when Settings.MaxReruns
// is not set.
const defaultMaxReruns = 10

// DecidePRReview returns the one action for an external pull-request review.
//
// Precedence, first match wins:
//
//  1. Backoff: while Reconcile.BackoffUntil is after Now → Noop{WakeAt:
//     BackoffUntil} ("backoff-active").
//  2. Control intent (applied with Patch.ClearIntent in the same Transition):
//     - cancel: queued, reviewing or ready → cancelled ("intent-cancel");
//     on a terminal state it is cleared ("cancel-not-applicable").
//     - rereview: reviewing, ready, submitted, stale or failed → queued with
//     ReviewDone=false and Reruns=0, because a manual rereview resets the
//     automatic re-run budget ("intent-rereview"). Cleared on queued
//     ("rereview-not-applicable") and on cancelled ("cancelled-is-final").
//     - any other intent is cleared ("intent-unsupported").
//  3. A failed read of a fact the state needs → DeferWithBackoff
//     ("read-failed"); never a transition. Capacity is needed only to launch
//     from queued; a failed read of another source defers every decision.
//  4. A closed or merged PR (PR.State != open) while the review is queued,
//     reviewing or ready → MarkStale ("pr-closed").
//  5. The state switch:
//     - queued: no PR observed → Noop ("pr-missing"); capacity full →
//     RequeueSoon ("capacity-full"); else LaunchReviewRun queued → reviewing
//     at the PR's head SHA ("review-launched").
//     - reviewing, in this order: a new head SHA (PR.HeadSHA != ReviewedSHA)
//     → re-run or stale (below), because a review of a superseded commit is
//     obsolete whatever its pod does; ReviewDone → ready ("review-done");
//     no pod observed yet → failed when the heartbeat is stale ("stalled"),
//     else Noop ("awaiting-pod"), since the launch precedes the pod; pod
//     unknown within Settings.UnknownPodGrace (default 5 min) of Pod.Since
//     → failed on a stale heartbeat ("stalled"), else Noop waking at the
//     grace's end ("pod-unknown"); pod unknown past its grace → failed
//     ("pod-unknown-past-grace"); pod errored or terminated → failed
//     ("pod-dead"); else Noop ("review-in-progress").
//     - ready: no PR observed → Noop ("pr-missing"); head SHA still equals
//     ReviewedSHA → SubmitReview ready → submitted ("review-ready"); else
//     re-run or stale.
//     - submitted: an open PR with a new head SHA re-runs when allowed
//     (below); otherwise Noop ("terminal-state").
//     - stale, failed, cancelled: Noop ("terminal-state"); only the rereview
//     intent leaves stale and failed.
//
// Re-run or stale: with Settings.RerunOnPush and Reruns below
// Settings.MaxReruns (default 10), the review goes back to queued with
// Reruns+1 and ReviewDone=false ("rerun-on-push"); otherwise reviewing and
// ready become stale ("pr-moved-on") and submitted stays put. Reruns
// therefore never exceeds the cap.
func DecidePRReview(s *PRReviewSnapshot) Action {
	w, r := &s.World, s.Run.Reconcile
	if a, ok := backoffActive(w, r); ok {
		return a
	}
	if r.Intent != IntentNone {
		return prReviewIntent(s)
	}
	if a, ok := readFailed(w, r, needsOf(KindPRReview, s.Run.State)); ok {
		return a
	}
	run := &s.Run
	if s.PR != nil && s.PR.State != PROpen && reviewActive(run.State) {
		return MarkStale{From: run.State, To: ReviewStale, Reason: "pr-closed"}
	}
	switch run.State {
	case ReviewQueued:
		if s.PR == nil {
			return Noop{Reason: "pr-missing"}
		}
		if !w.Capacity.Available() {
			return requeueSoon(w, "capacity-full")
		}
		return LaunchReviewRun{From: ReviewQueued, To: ReviewRunning, HeadSHA: s.PR.HeadSHA, Reason: "review-launched"}
	case ReviewRunning:
		if s.PR != nil && s.PR.HeadSHA != run.ReviewedSHA {
			return reviewRerunOrStale(s)
		}
		if run.ReviewDone {
			return Transition{From: ReviewRunning, To: ReviewReady, Reason: "review-done"}
		}
		if w.Pod == nil {
			// The launch precedes the pod: wait for it, as standalone
			// runs do, unless the heartbeat went stale meanwhile.
			if heartbeatStale(w) {
				return Transition{From: ReviewRunning, To: ReviewFailed, Reason: "stalled"}
			}
			return Noop{Reason: "awaiting-pod"}
		}
		switch until, waiting, lost := unknownPod(w); {
		case waiting:
			if heartbeatStale(w) {
				return Transition{From: ReviewRunning, To: ReviewFailed, Reason: "stalled"}
			}
			return Noop{WakeAt: until, Reason: "pod-unknown"}
		case lost:
			return Transition{From: ReviewRunning, To: ReviewFailed, Reason: reasonUnknownPod}
		}
		if w.Pod.Dead() {
			return Transition{From: ReviewRunning, To: ReviewFailed, Reason: "pod-dead"}
		}
		return Noop{Reason: "review-in-progress"}
	case ReviewReady:
		if s.PR == nil {
			return Noop{Reason: "pr-missing"}
		}
		if s.PR.HeadSHA == run.ReviewedSHA {
			return SubmitReview{From: ReviewReady, To: ReviewSubmitted, Reason: "review-ready"}
		}
		return reviewRerunOrStale(s)
	case ReviewSubmitted:
		if s.PR != nil && s.PR.State == PROpen && s.PR.HeadSHA != run.ReviewedSHA && reviewMayRerun(s) {
			return reviewRerun(s)
		}
		return Noop{Reason: "terminal-state"}
	case ReviewStale, ReviewFailed, ReviewCancelled:
		return Noop{Reason: "terminal-state"}
	}
	return Noop{Reason: "unknown-state"}
}

// prReviewIntent applies (or clears) the run's control intent.
func prReviewIntent(s *PRReviewSnapshot) Action {
	from, in := s.Run.State, s.Run.Reconcile.Intent
	switch in {
	case IntentCancel:
		if reviewActive(from) {
			return Transition{From: from, To: ReviewCancelled, Patch: &Patch{ClearIntent: true}, Reason: "intent-cancel"}
		}
		return ClearControlIntent{Intent: in, Reason: "cancel-not-applicable"}
	case IntentRereview:
		switch from {
		case ReviewRunning, ReviewReady, ReviewSubmitted, ReviewStale, ReviewFailed:
			return Transition{From: from, To: ReviewQueued, Patch: reviewRequeuePatch(0, true), Reason: "intent-rereview"}
		case ReviewCancelled:
			return ClearControlIntent{Intent: in, Reason: "cancelled-is-final"}
		}
		return ClearControlIntent{Intent: in, Reason: "rereview-not-applicable"}
	}
	return ClearControlIntent{Intent: in, Reason: "intent-unsupported"}
}

// reviewActive reports whether st is a non-terminal review state.
func reviewActive(st State) bool {
	return st == ReviewQueued || st == ReviewRunning || st == ReviewReady
}

// reviewMayRerun reports whether a new head SHA may re-run the review.
func reviewMayRerun(s *PRReviewSnapshot) bool {
	limit := s.Settings.MaxReruns
	if limit <= 0 {
		limit = defaultMaxReruns
	}
	return s.Settings.RerunOnPush && s.Run.Reruns < limit
}

// reviewRerun sends the review back to queued, counting the re-run.
func reviewRerun(s *PRReviewSnapshot) Action {
	return Transition{From: s.Run.State, To: ReviewQueued, Patch: reviewRequeuePatch(max(s.Run.Reruns, 0)+1, false), Reason: "rerun-on-push"}
}

// reviewRerunOrStale re-runs a reviewing or ready review whose PR moved on,
// or marks it stale when re-runs are off or used up.
func reviewRerunOrStale(s *PRReviewSnapshot) Action {
	if reviewMayRerun(s) {
		return reviewRerun(s)
	}
	return MarkStale{From: s.Run.State, To: ReviewStale, Reason: "pr-moved-on"}
}

// reviewPatchBuf holds a requeue patch and the values it points at, so the
// patch costs one allocation.
type reviewPatchBuf struct {
	p      Patch
	reruns int
	done   bool
}

// reviewRequeuePatch is the patch of a move back to queued: Reruns set to
// reruns and ReviewDone cleared.
func reviewRequeuePatch(reruns int, clearIntent bool) *Patch {
	b := &reviewPatchBuf{reruns: reruns}
	b.p = Patch{ClearIntent: clearIntent, Reruns: &b.reruns, ReviewDone: &b.done}
	return &b.p
}
