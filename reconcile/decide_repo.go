package reconcile

import "time"

// Defaults used when Settings leaves a knob at zero.
const (
	defaultStallThreshold = 15 * time.Minute
	defaultMaxAutoResumes = 10
)

// DecideRepo returns the one action for a repo run (an agent working in a
// repository until its pull request merges).
//
// Precedence, first match wins:
//
//  1. Backoff: while Reconcile.BackoffUntil is after Now → Noop{WakeAt:
//     BackoffUntil} ("backoff-active").
//  2. Control intent, applied with Patch.ClearIntent in the same Transition,
//     and only along an edge of RepoMachine:
//     - cancel: any non-terminal state → cancelled ("intent-cancel"); on a
//     terminal state it is cleared ("cancel-not-applicable").
//     - retry: failed or cancelled with RetryCount < MaxRetries → queued with
//     RetryCount+1 and AutoResumes=0 ("intent-retry"); cleared when the
//     retries are used up ("retries-exhausted") or the run is not failed or
//     cancelled ("retry-not-applicable").
//     - resume: needs_attention → queued with AutoResumes=0 and
//     ResumeTrigger "manual" ("intent-resume"); else cleared
//     ("resume-not-applicable").
//     - restart: completed, failed or cancelled → queued with RetryCount=0,
//     AutoResumes=0 and the agent session reset ("intent-restart"); else
//     cleared ("restart-not-applicable").
//     - any other intent is cleared ("intent-unsupported").
//     Retry, resume and restart are manual actions, so each resets the
//     automatic-resume budget; retry and restart clear ResumeTrigger.
//  3. A failed read of a fact the state needs → DeferWithBackoff
//     ("read-failed"); never a transition. Capacity is needed only to launch
//     from queued, dependencies only while pending or waiting_on_deps; a
//     failed read of another source defers every decision.
//  4. The state switch:
//     - pending: a dependency failed or cancelled → failed
//     ("dependency-failed"); no dependencies → queued ("no-dependencies");
//     all completed → queued ("dependencies-completed"); else →
//     waiting_on_deps ("waiting-on-deps").
//     - waiting_on_deps: a dependency failed or cancelled → failed
//     ("dependency-failed"); all completed → queued
//     ("dependencies-completed"); else Noop ("waiting-on-deps").
//     - queued: capacity full (global or per repo) → RequeueSoon
//     ("capacity-full"); outside the off-peak window → RequeueSoon
//     ("off-peak"); else RequeueForAgent queued → provisioning carrying
//     the run's ResumeTrigger ("capacity-available"): the one launch.
//     - provisioning: no pod yet → Noop ("awaiting-pod"); pod pending → Noop
//     ("pod-pending"); pod unknown within Settings.UnknownPodGrace (default
//     5 min) of Pod.Since → Noop waking at its end ("pod-unknown"), past it
//     → failed ("pod-unknown-past-grace"); pod running or ready → running
//     ("pod-ready"); pod errored or terminated → failed ("pod-dead").
//     - running, in this order: an open PR that is not yet recorded (stored
//     PR URL empty or different) → pr_opened, recording the PR without its
//     checks and review, so a problem it already has (CI failing when it is
//     first seen) is new in pr_opened and reacted to ("pr-detected"), which
//     beats pod death; the pod exited 0 → pr_opened
//     when the run already has a PR recorded (Run.PR.URL), as after an
//     automatic resume, whether or not this snapshot observes it
//     ("agent-finished"; pr_opened waits for the observation), else
//     needs_attention ("finished-without-pr"), because an agent that ends
//     without a PR needs a human; no pod → failed ("pod-missing"); pod
//     unknown within its grace → failed on a stale heartbeat ("stalled"),
//     else Noop waking at the grace's end ("pod-unknown"); pod unknown past
//     its grace → failed ("pod-unknown-past-grace"); pod errored or
//     terminated non-zero → failed ("pod-dead"), which beats stall;
//     heartbeat older than
//     Settings.StallThreshold (default 15 min) → failed ("stalled"); else
//     Noop ("agent-running"). A run with no heartbeat yet is never stalled.
//     - pr_opened: see the PR rules below.
//     - needs_attention: the PR merged → completed ("pr-merged"); the PR
//     closed → failed ("pr-closed"); else Noop ("awaiting-intent"): only a
//     resume (or cancel) intent moves it on.
//     - completed, failed, cancelled: Noop ("terminal-state"); only intents
//     move them.
//
// PR rules (pr_opened), in this order, because settling the PR's fate comes
// before reacting to it, a problem comes before progress, and recording
// comes last:
//
//  1. No PR observed → Noop ("pr-not-observed").
//  2. Merged → completed ("pr-merged"); closed unmerged → failed
//     ("pr-closed"). Both record the PR fields. Any state but open, closed
//     and merged → Noop ("pr-state-unknown").
//  3. Checks newly conflicts or newly failing (observed value differs from
//     the stored Run.PR.Checks) → auto-resume ("conflicts-auto-resume",
//     "ci-failing-auto-resume").
//  4. Review newly changes_requested → auto-resume
//     ("changes-requested-auto-resume").
//  5. Approved, checks passing, Settings.AutoMerge on, not Cautious and
//     every blocking subtask completed → AutoMergePR ("auto-merge-ready").
//  6. Settings.ReviewEnabled and no review launched yet (ReviewRunning
//     false), with checks passing for the on_ci_pass trigger (the default)
//     or at any CI status for on_pr_open → LaunchReview ("launch-review").
//  7. Observed URL, number, state, checks, review or head SHA differ from
//     the stored Run.PR → PatchStatus recording them ("pr-drift").
//  8. Else Noop ("pr-steady").
//
// Auto-resume: with Settings.AutoResume on and AutoResumes below
// Settings.MaxAutoResumes (default 10), ResumeAgent pr_opened → queued with
// AutoResumes+1, ResumeTrigger set to the trigger and the observed PR
// recorded (it launches nothing: the launch is the RequeueForAgent out of
// queued, so a resume launches once); otherwise → needs_attention
// with the PR recorded ("conflicts-needs-attention",
// "ci-failing-needs-attention", "changes-requested-needs-attention").
// Recording the PR makes both edge-triggered: the same observation never
// resumes twice, and AutoResumes never exceeds the cap.
func DecideRepo(s *RepoSnapshot) Action {
	w, r := &s.World, s.Run.Reconcile
	if a, ok := backoffActive(w, r); ok {
		return a
	}
	if r.Intent != IntentNone {
		return repoIntent(s)
	}
	if a, ok := readFailed(w, r, needsOf(KindRepo, s.Run.State)); ok {
		return a
	}
	switch s.Run.State {
	case RepoPending:
		return repoPending(s)
	case RepoWaitingOnDeps:
		return repoWaitingOnDeps(s)
	case RepoQueued:
		if !w.Capacity.Available() {
			return requeueSoon(w, "capacity-full")
		}
		if !w.Settings.OffPeak.Allows(w.Now) {
			return requeueSoon(w, "off-peak")
		}
		return RequeueForAgent{From: RepoQueued, To: RepoProvisioning, Trigger: s.Run.ResumeTrigger, Reason: "capacity-available"}
	case RepoProvisioning:
		return repoProvisioning(w)
	case RepoRunning:
		return repoRunning(s)
	case RepoPROpened:
		return repoPROpened(s)
	case RepoNeedsAttention:
		if pr := s.PR; pr != nil {
			if prMerged(pr) {
				return Transition{From: RepoNeedsAttention, To: RepoCompleted, Patch: repoPRPatch(pr), Reason: "pr-merged"}
			}
			if pr.State == PRClosed {
				return Transition{From: RepoNeedsAttention, To: RepoFailed, Patch: repoPRPatch(pr), Reason: "pr-closed"}
			}
		}
		return Noop{Reason: "awaiting-intent"}
	case RepoCompleted, RepoFailed, RepoCancelled:
		return Noop{Reason: "terminal-state"}
	}
	return Noop{Reason: "unknown-state"}
}

// repoIntent applies (or clears) the run's control intent.
func repoIntent(s *RepoSnapshot) Action {
	run := &s.Run
	from, in := run.State, run.Reconcile.Intent
	switch in {
	case IntentCancel:
		if RepoMachine.IsTerminal(from) {
			return ClearControlIntent{Intent: IntentCancel, Reason: "cancel-not-applicable"}
		}
		return applyIntent(&RepoMachine, in, from, RepoCancelled, &Patch{ClearIntent: true}, "intent-cancel")
	case IntentRetry:
		if from != RepoFailed && from != RepoCancelled {
			return ClearControlIntent{Intent: IntentRetry, Reason: "retry-not-applicable"}
		}
		if run.RetryCount >= run.MaxRetries {
			return ClearControlIntent{Intent: IntentRetry, Reason: "retries-exhausted"}
		}
		return applyIntent(&RepoMachine, in, from, RepoQueued, repoManualPatch(max(run.RetryCount, 0)+1, true, false, ""), "intent-retry")
	case IntentResume:
		if from != RepoNeedsAttention {
			return ClearControlIntent{Intent: IntentResume, Reason: "resume-not-applicable"}
		}
		return applyIntent(&RepoMachine, in, from, RepoQueued, repoManualPatch(0, false, false, triggerManual), "intent-resume")
	case IntentRestart:
		if !RepoMachine.IsTerminal(from) {
			return ClearControlIntent{Intent: IntentRestart, Reason: "restart-not-applicable"}
		}
		return applyIntent(&RepoMachine, in, from, RepoQueued, repoManualPatch(0, true, true, ""), "intent-restart")
	}
	return clearUnsupported(in)
}

// clearUnsupported clears an intent the kind does not support. Each known
// intent gets a constant literal, so the common cases do not allocate.
func clearUnsupported(in Intent) Action {
	switch in {
	case IntentCancel:
		return ClearControlIntent{Intent: IntentCancel, Reason: "intent-unsupported"}
	case IntentRetry:
		return ClearControlIntent{Intent: IntentRetry, Reason: "intent-unsupported"}
	case IntentResume:
		return ClearControlIntent{Intent: IntentResume, Reason: "intent-unsupported"}
	case IntentRestart:
		return ClearControlIntent{Intent: IntentRestart, Reason: "intent-unsupported"}
	case IntentRereview:
		return ClearControlIntent{Intent: IntentRereview, Reason: "intent-unsupported"}
	case IntentPause:
		return ClearControlIntent{Intent: IntentPause, Reason: "intent-unsupported"}
	case IntentArchive:
		return ClearControlIntent{Intent: IntentArchive, Reason: "intent-unsupported"}
	}
	return ClearControlIntent{Intent: in, Reason: "intent-unsupported"}
}

// applyIntent moves the run from → to for its control intent, writing p
// (which clears the intent) in the same update. A move that is not an edge
// of m is refused by clearing the intent instead, so an intent can never
// take the run off its machine.
func applyIntent(m *Machine, in Intent, from, to State, p *Patch, reason string) Action {
	if !m.Allowed(from, to) {
		return ClearControlIntent{Intent: in, Reason: "intent-not-allowed"}
	}
	return Transition{From: from, To: to, Patch: p, Reason: reason}
}

// repoDependencies summarises the dependencies: whether one failed or was
// cancelled, and whether all completed (true when there are none).
func repoDependencies(deps []Dependency) (failed, completed bool) {
	completed = true
	for i := range deps {
		switch deps[i].State {
		case RepoCompleted:
		case RepoFailed, RepoCancelled:
			return true, false
		default:
			completed = false
		}
	}
	return false, completed
}

// repoPending decides a pending run from its dependencies.
func repoPending(s *RepoSnapshot) Action {
	failed, completed := repoDependencies(s.Dependencies)
	switch {
	case failed:
		return Transition{From: RepoPending, To: RepoFailed, Reason: "dependency-failed"}
	case len(s.Dependencies) == 0:
		return Transition{From: RepoPending, To: RepoQueued, Reason: "no-dependencies"}
	case completed:
		return Transition{From: RepoPending, To: RepoQueued, Reason: "dependencies-completed"}
	}
	return Transition{From: RepoPending, To: RepoWaitingOnDeps, Reason: "waiting-on-deps"}
}

// repoWaitingOnDeps decides a run that waits for its dependencies.
func repoWaitingOnDeps(s *RepoSnapshot) Action {
	failed, completed := repoDependencies(s.Dependencies)
	switch {
	case failed:
		return Transition{From: RepoWaitingOnDeps, To: RepoFailed, Reason: "dependency-failed"}
	case completed:
		return Transition{From: RepoWaitingOnDeps, To: RepoQueued, Reason: "dependencies-completed"}
	}
	return Noop{Reason: "waiting-on-deps"}
}

// triggerManual is the resume trigger of a manual resume intent.
const triggerManual = "manual"

// repoProvisioning decides a run whose pod is being provisioned.
func repoProvisioning(w *World) Action {
	pod := w.Pod
	until, waiting, lost := unknownPod(w)
	switch {
	case waiting:
		return Noop{WakeAt: until, Reason: "pod-unknown"}
	case lost:
		return Transition{From: RepoProvisioning, To: RepoFailed, Reason: reasonUnknownPod}
	case pod == nil:
		return Noop{Reason: "awaiting-pod"}
	case pod.Phase == PodRunning || pod.Phase == PodReady:
		return Transition{From: RepoProvisioning, To: RepoRunning, Reason: "pod-ready"}
	case pod.Phase == PodPending:
		return Noop{Reason: "pod-pending"}
	}
	return Transition{From: RepoProvisioning, To: RepoFailed, Reason: "pod-dead"}
}

// repoRunning decides a run whose agent is working: PR detection beats pod
// death, which beats stall.
func repoRunning(s *RepoSnapshot) Action {
	run, pr, pod := &s.Run, s.PR, s.Pod
	if pr != nil && prOpen(pr) && (run.PR.URL == "" || run.PR.URL != pr.URL) {
		// Record the PR without its checks and review, so a problem it
		// already has counts as new in pr_opened and is reacted to.
		b := repoPRBuf(pr)
		b.pr.Checks, b.pr.Review = "", ""
		return Transition{From: RepoRunning, To: RepoPROpened, Patch: &b.p, Reason: "pr-detected"}
	}
	until, waiting, lost := unknownPod(&s.World)
	switch {
	case pod.Succeeded():
		if run.PR.URL != "" {
			return Transition{From: RepoRunning, To: RepoPROpened, Reason: "agent-finished"}
		}
		return Transition{From: RepoRunning, To: RepoNeedsAttention, Reason: "finished-without-pr"}
	case pod == nil:
		return Transition{From: RepoRunning, To: RepoFailed, Reason: "pod-missing"}
	case waiting:
		if heartbeatStale(&s.World) {
			return Transition{From: RepoRunning, To: RepoFailed, Reason: "stalled"}
		}
		return Noop{WakeAt: until, Reason: "pod-unknown"}
	case lost:
		return Transition{From: RepoRunning, To: RepoFailed, Reason: reasonUnknownPod}
	case pod.Dead():
		return Transition{From: RepoRunning, To: RepoFailed, Reason: "pod-dead"}
	case heartbeatStale(&s.World):
		return Transition{From: RepoRunning, To: RepoFailed, Reason: "stalled"}
	}
	return Noop{Reason: "agent-running"}
}

// heartbeatStale reports whether the agent's last heartbeat is older than
// the stall threshold. A run that has not sent a heartbeat yet is not stale.
func heartbeatStale(w *World) bool {
	return !w.Heartbeat.IsZero() && w.Now.Sub(w.Heartbeat) > w.Settings.StallThreshold.Or(defaultStallThreshold)
}

// prProblem names one PR problem an agent can fix: the ResumeAgent trigger
// and the reasons of the resume and of the needs_attention fallback.
type prProblem struct {
	trigger, resume, attention string
}

// The PR problems that resume the agent.
var (
	prConflicts        = prProblem{"conflicts", "conflicts-auto-resume", "conflicts-needs-attention"}
	prCIFailing        = prProblem{"ci-failing", "ci-failing-auto-resume", "ci-failing-needs-attention"}
	prChangesRequested = prProblem{"changes-requested", "changes-requested-auto-resume", "changes-requested-needs-attention"}
)

// repoPROpened applies the PR rules of DecideRepo in their documented order.
func repoPROpened(s *RepoSnapshot) Action {
	pr, stored := s.PR, &s.Run.PR
	if pr == nil {
		return Noop{Reason: "pr-not-observed"}
	}
	if prMerged(pr) {
		return Transition{From: RepoPROpened, To: RepoCompleted, Patch: repoPRPatch(pr), Reason: "pr-merged"}
	}
	if pr.State == PRClosed {
		return Transition{From: RepoPROpened, To: RepoFailed, Patch: repoPRPatch(pr), Reason: "pr-closed"}
	}
	if pr.State != PROpen {
		return Noop{Reason: "pr-state-unknown"}
	}
	if pr.Checks == ChecksConflicts && stored.Checks != ChecksConflicts {
		return repoPRProblem(s, &prConflicts)
	}
	if pr.Checks == ChecksFailing && stored.Checks != ChecksFailing {
		return repoPRProblem(s, &prCIFailing)
	}
	if pr.Review == ReviewChangesRequested && stored.Review != ReviewChangesRequested {
		return repoPRProblem(s, &prChangesRequested)
	}
	if repoMergeReady(s) {
		return AutoMergePR{PRURL: pr.URL, HeadSHA: pr.HeadSHA, Reason: "auto-merge-ready"}
	}
	if repoReviewDue(s) {
		return LaunchReview{PRURL: pr.URL, Reason: "launch-review"}
	}
	if prFieldsOf(pr) != *stored {
		f := new(PRFields) // allocated only when there is drift
		*f = prFieldsOf(pr)
		return PatchStatus{Patch: Patch{PR: f}, Reason: "pr-drift"}
	}
	return Noop{Reason: "pr-steady"}
}

// repoPRProblem resumes the agent on a newly observed PR problem while the
// automatic-resume budget lasts, and asks for a human otherwise.
func repoPRProblem(s *RepoSnapshot, p *prProblem) Action {
	limit := s.Settings.MaxAutoResumes
	if limit <= 0 {
		limit = defaultMaxAutoResumes
	}
	if s.Settings.AutoResume && s.Run.AutoResumes < limit {
		b := repoPRBuf(s.PR)
		b.resumes = max(s.Run.AutoResumes, 0) + 1
		b.p.AutoResumes = &b.resumes
		b.trigger = p.trigger
		b.p.ResumeTrigger = &b.trigger
		return ResumeAgent{From: RepoPROpened, To: RepoQueued, Trigger: p.trigger, Patch: &b.p, Reason: p.resume}
	}
	return Transition{From: RepoPROpened, To: RepoNeedsAttention, Patch: repoPRPatch(s.PR), Reason: p.attention}
}

// repoMergeReady reports whether the PR may be merged automatically.
func repoMergeReady(s *RepoSnapshot) bool {
	st, pr := &s.Settings, s.PR
	if !st.AutoMerge || st.Cautious || pr.Review != ReviewApproved || pr.Checks != ChecksPassing {
		return false
	}
	for i := range s.Subtasks {
		if s.Subtasks[i].Blocking && s.Subtasks[i].State != RepoCompleted {
			return false
		}
	}
	return true
}

// repoReviewDue reports whether an automatic code review should launch.
// An empty or unknown trigger means on_ci_pass.
func repoReviewDue(s *RepoSnapshot) bool {
	st := &s.Settings
	if !st.ReviewEnabled || s.Run.ReviewRunning {
		return false
	}
	return st.ReviewTrigger == ReviewOnPROpen || s.PR.Checks == ChecksPassing
}

// prMerged reports whether the observed PR is merged.
func prMerged(pr *PullRequest) bool { return pr.Merged || pr.State == PRMerged }

// prOpen reports whether the observed PR is open.
func prOpen(pr *PullRequest) bool { return pr.State == PROpen && !pr.Merged }

// prFieldsOf returns the fields of an observed PR that a run stores.
func prFieldsOf(pr *PullRequest) PRFields {
	st := pr.State
	if pr.Merged {
		st = PRMerged
	}
	return PRFields{URL: pr.URL, Number: pr.Number, State: st, Checks: pr.Checks, Review: pr.Review, HeadSHA: pr.HeadSHA}
}

// repoPatchBuf holds a repo patch and the values it points at, so a patch
// costs one allocation.
type repoPatchBuf struct {
	p                Patch
	pr               PRFields
	retries, resumes int
	trigger          string
}

// repoPRBuf returns a patch buffer whose patch records the observed PR.
func repoPRBuf(pr *PullRequest) *repoPatchBuf {
	b := &repoPatchBuf{pr: prFieldsOf(pr)}
	b.p.PR = &b.pr
	return b
}

// repoPRPatch returns a patch recording the observed PR.
func repoPRPatch(pr *PullRequest) *Patch { return &repoPRBuf(pr).p }

// repoManualPatch is the patch of a manual retry, resume or restart: the
// intent cleared, AutoResumes=0, RetryCount=retries when setRetries, the
// agent session reset when resetSession, and the resume trigger set to
// trigger (empty for retry and restart, which start the agent afresh).
func repoManualPatch(retries int, setRetries, resetSession bool, trigger string) *Patch {
	b := &repoPatchBuf{retries: retries, trigger: trigger}
	b.p = Patch{ClearIntent: true, AutoResumes: &b.resumes, ResetSession: resetSession, ResumeTrigger: &b.trigger}
	if setRetries {
		b.p.RetryCount = &b.retries
	}
	return &b.p
}
