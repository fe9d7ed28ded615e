package reconcile

import "time"

// Persistent-agent defaults used when Settings leaves a knob at zero.
const (
	defaultFailureLimit    = 3
	defaultMaxTurnDuration = time.Hour
)

// DecideAgent returns the one action for a persistent agent. The machine is
// cyclic: a turn goes idle → queued → provisioning → running → idle.
//
// Precedence, first match wins:
//
//  1. Backoff: while Reconcile.BackoffUntil is after Now → Noop{WakeAt:
//     BackoffUntil} ("backoff-active").
//  2. Control intent (applied with Patch.ClearIntent in the same action):
//     - any intent on an archived agent is cleared ("archived-is-final");
//     archived is never revived.
//     - pause: idle, queued, provisioning or running → paused
//     ("intent-pause"); else cleared ("pause-not-applicable").
//     - resume: paused or failed → idle with ConsecutiveFailures=0
//     ("intent-resume"); else cleared ("resume-not-applicable").
//     - archive: any other state → archived ("intent-archive").
//     - restart: any other state → idle with ConsecutiveFailures=0 and
//     TurnDone=false ("intent-restart"); an idle agent gets the same reset
//     as a PatchStatus, since idle → idle is not an edge.
//     - cancel, retry and rereview are cleared ("intent-unsupported").
//     Resume and restart also zero TurnStartedAt, so the next turn's clock
//     starts afresh.
//  3. A failed read of a fact the state needs → DeferWithBackoff
//     ("read-failed"); never a transition. Capacity is needed only to launch
//     from queued; a failed read of another source defers every decision.
//  4. The state switch:
//     - idle: PendingMessages > 0 → queued ("pending-messages"). Otherwise
//     the pod lifecycle (Settings.PodLifecycle; empty or unknown means
//     on-demand) decides the held pod's fate: on-demand → ReleasePod
//     ("on-demand-release"); sticky → ReleasePod once Now >= KeepWarmUntil
//     ("keep-warm-expired"), before that Noop{WakeAt: KeepWarmUntil}
//     ("keep-warm"); always-on → Noop ("always-on"). No pod held → Noop
//     ("idle").
//     - queued: capacity full → RequeueSoon ("capacity-full"); else
//     EnqueueTurn queued → provisioning with TurnMessages=PendingMessages
//     ("turn-enqueued").
//     - provisioning: pod running or ready → running with TurnDone=false and
//     TurnStartedAt=Now unless already set ("pod-running"); no pod yet →
//     Noop ("awaiting-pod"); pod pending → Noop ("pod-pending"); pod
//     unknown within Settings.UnknownPodGrace (default 5 min) of Pod.Since
//     → Noop waking at its end ("pod-unknown"), past it → turn failure
//     ("pod-unknown-past-grace"); pod errored or terminated → turn failure
//     ("pod-dead").
//     - running, in this order: TurnDone → turn success ("turn-done"); pod
//     unknown past its grace → turn failure ("pod-unknown-past-grace"); pod
//     missing or dead (not unknown within its grace) → turn failure
//     ("pod-dead"); TurnStartedAt unset →
//     PatchStatus TurnStartedAt=Now ("turn-start-recorded"); Now past
//     TurnStartedAt + Settings.MaxTurnDuration (default 1 h) → turn failure
//     ("turn-timeout"); pod unknown within its grace ending before the turn
//     deadline → Noop{WakeAt: the grace's end} ("pod-unknown"); else
//     Noop{WakeAt: the turn deadline} ("turn-running").
//     - paused: Noop ("paused"); failed: Noop ("failed-awaiting-resume");
//     archived: Noop ("archived").
//
// Pausing, archiving or restarting an agent whose pod runs or is held lets
// the pod go (ReleasesPod), as does every move out of provisioning or
// running.
//
// Turn success → idle with PendingMessages reduced by TurnMessages (a
// message that arrived during the turn stays pending and starts the next
// one), TurnMessages=0, ConsecutiveFailures=0, TurnStartedAt zeroed and
// PodHeld=false for on-demand (true otherwise); sticky also sets
// KeepWarmUntil=Now+Settings.KeepWarm. Turn failure → ConsecutiveFailures+1,
// TurnStartedAt and TurnMessages zeroed (every pending message waits for the
// next turn) and PodHeld=false (the failed turn's pod is let go),
// moving to idle, or to failed once the count reaches Settings.FailureLimit
// (default 3); the count never exceeds the limit.
func DecideAgent(s *AgentSnapshot) Action {
	w, r := &s.World, s.Run.Reconcile
	if a, ok := backoffActive(w, r); ok {
		return a
	}
	if r.Intent != IntentNone {
		return agentIntent(s)
	}
	if a, ok := readFailed(w, r, needsOf(KindPersistentAgent, s.Run.State)); ok {
		return a
	}
	run := &s.Run
	switch run.State {
	case AgentIdle:
		return agentIdle(s)
	case AgentQueued:
		if !w.Capacity.Available() {
			return requeueSoon(w, "capacity-full")
		}
		b := &agentPatchBuf{turnMessages: run.PendingMessages}
		b.p = Patch{TurnMessages: &b.turnMessages}
		return EnqueueTurn{From: AgentQueued, To: AgentProvisioning, Patch: &b.p, Reason: "turn-enqueued"}
	case AgentProvisioning:
		if w.Pod == nil {
			return Noop{Reason: "awaiting-pod"}
		}
		switch until, waiting, lost := unknownPod(w); {
		case waiting:
			return Noop{WakeAt: until, Reason: "pod-unknown"}
		case lost:
			return agentTurnFailed(s, reasonUnknownPod)
		}
		switch w.Pod.Phase {
		case PodRunning, PodReady:
			return agentTurnStarted(s)
		case PodPending:
			return Noop{Reason: "pod-pending"}
		}
		return agentTurnFailed(s, "pod-dead")
	case AgentRunning:
		if run.TurnDone {
			return agentTurnSucceeded(s)
		}
		until, waiting, lost := unknownPod(w)
		switch {
		case lost:
			return agentTurnFailed(s, reasonUnknownPod)
		case !waiting && w.Pod.Dead():
			return agentTurnFailed(s, "pod-dead")
		}
		if run.TurnStartedAt.IsZero() {
			b := &agentPatchBuf{startedAt: w.Now}
			return PatchStatus{Patch: Patch{TurnStartedAt: &b.startedAt}, Reason: "turn-start-recorded"}
		}
		deadline := run.TurnStartedAt.Add(w.Settings.MaxTurnDuration.Or(defaultMaxTurnDuration))
		if w.Now.After(deadline) {
			return agentTurnFailed(s, "turn-timeout")
		}
		if waiting && until.Before(deadline) {
			return Noop{WakeAt: until, Reason: "pod-unknown"}
		}
		return Noop{WakeAt: deadline, Reason: "turn-running"}
	case AgentPaused:
		return Noop{Reason: "paused"}
	case AgentFailed:
		return Noop{Reason: "failed-awaiting-resume"}
	case AgentArchived:
		return Noop{Reason: "archived"}
	}
	return Noop{Reason: "unknown-state"}
}

// agentIntent applies (or clears) the agent's control intent.
func agentIntent(s *AgentSnapshot) Action {
	from, in := s.Run.State, s.Run.Reconcile.Intent
	if from == AgentArchived {
		return ClearControlIntent{Intent: in, Reason: "archived-is-final"}
	}
	switch in {
	case IntentPause:
		switch from {
		case AgentIdle, AgentQueued, AgentProvisioning, AgentRunning:
			return Transition{From: from, To: AgentPaused, Patch: &Patch{ClearIntent: true}, Reason: "intent-pause"}
		}
		return ClearControlIntent{Intent: in, Reason: "pause-not-applicable"}
	case IntentResume:
		switch from {
		case AgentPaused, AgentFailed:
			return Transition{From: from, To: AgentIdle, Patch: agentResetPatch(false), Reason: "intent-resume"}
		}
		return ClearControlIntent{Intent: in, Reason: "resume-not-applicable"}
	case IntentArchive:
		return applyIntent(&AgentMachine, in, from, AgentArchived, &Patch{ClearIntent: true}, "intent-archive")
	case IntentRestart:
		if from == AgentIdle {
			return PatchStatus{Patch: *agentResetPatch(true), Reason: "intent-restart"}
		}
		return applyIntent(&AgentMachine, in, from, AgentIdle, agentResetPatch(true), "intent-restart")
	}
	return ClearControlIntent{Intent: in, Reason: "intent-unsupported"}
}

// agentIdle decides an idle agent: start a turn for pending messages, else
// keep or release the pod according to the lifecycle mode.
func agentIdle(s *AgentSnapshot) Action {
	run := &s.Run
	if run.PendingMessages > 0 {
		return Transition{From: AgentIdle, To: AgentQueued, Reason: "pending-messages"}
	}
	if !run.PodHeld {
		return Noop{Reason: "idle"}
	}
	switch agentLifecycle(&s.Settings) {
	case LifecycleAlwaysOn:
		return Noop{Reason: "always-on"}
	case LifecycleSticky:
		if s.Now.Before(run.KeepWarmUntil) {
			return Noop{WakeAt: run.KeepWarmUntil, Reason: "keep-warm"}
		}
		return ReleasePod{Reason: "keep-warm-expired"}
	}
	return ReleasePod{Reason: "on-demand-release"}
}

// agentLifecycle is the effective pod lifecycle: on-demand unless always-on
// or sticky is configured.
func agentLifecycle(st *Settings) PodLifecycle {
	switch st.PodLifecycle {
	case LifecycleAlwaysOn, LifecycleSticky:
		return st.PodLifecycle
	}
	return LifecycleOnDemand
}

// agentPatchBuf holds an agent patch and the values it points at, so the
// patch costs one allocation.
type agentPatchBuf struct {
	p         Patch
	failures  int
	startedAt time.Time
	warmUntil time.Time
	turnDone  bool
	podHeld   bool
	// pending and turnMessages are the inbox counts a turn's end writes.
	pending, turnMessages int
}

// agentResetPatch is the patch of resume and restart: failures reset and
// the turn clock zeroed; restart also clears TurnDone.
func agentResetPatch(restart bool) *Patch {
	b := &agentPatchBuf{}
	b.p = Patch{ClearIntent: true, ConsecutiveFailures: &b.failures, TurnStartedAt: &b.startedAt, TurnMessages: &b.turnMessages}
	if restart {
		b.p.TurnDone = &b.turnDone
	}
	return &b.p
}

// agentTurnStarted moves provisioning → running once the pod is up.
func agentTurnStarted(s *AgentSnapshot) Action {
	b := &agentPatchBuf{}
	b.p = Patch{TurnDone: &b.turnDone}
	if s.Run.TurnStartedAt.IsZero() {
		b.startedAt = s.Now
		b.p.TurnStartedAt = &b.startedAt
	}
	return Transition{From: AgentProvisioning, To: AgentRunning, Patch: &b.p, Reason: "pod-running"}
}

// agentTurnSucceeded returns a running agent whose turn halted to idle.
func agentTurnSucceeded(s *AgentSnapshot) Action {
	mode := agentLifecycle(&s.Settings)
	b := &agentPatchBuf{podHeld: mode != LifecycleOnDemand, pending: max(s.Run.PendingMessages-max(s.Run.TurnMessages, 0), 0)}
	b.p = Patch{ConsecutiveFailures: &b.failures, TurnStartedAt: &b.startedAt, PodHeld: &b.podHeld,
		PendingMessages: &b.pending, TurnMessages: &b.turnMessages}
	if mode == LifecycleSticky {
		b.warmUntil = s.Now.Add(s.Settings.KeepWarm.Or(0))
		b.p.KeepWarmUntil = &b.warmUntil
	}
	return Transition{From: AgentRunning, To: AgentIdle, Patch: &b.p, Reason: "turn-done"}
}

// agentTurnFailed counts a failed turn and returns the agent to idle, or to
// failed once the consecutive-failure limit is reached.
func agentTurnFailed(s *AgentSnapshot, reason string) Action {
	limit := s.Settings.FailureLimit
	if limit <= 0 {
		limit = defaultFailureLimit
	}
	b := &agentPatchBuf{failures: max(s.Run.ConsecutiveFailures, 0) + 1}
	to := AgentIdle
	if b.failures >= limit {
		b.failures, to = limit, AgentFailed
	}
	b.p = Patch{ConsecutiveFailures: &b.failures, TurnStartedAt: &b.startedAt, PodHeld: &b.podHeld, TurnMessages: &b.turnMessages}
	return Transition{From: s.Run.State, To: to, Patch: &b.p, Reason: reason}
}
