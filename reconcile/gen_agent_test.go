package reconcile

import (
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// agentGenStates draws idle and running, the richest states, more often.
var agentGenStates = append(append([]State(nil), AgentMachine.States...), AgentIdle, AgentRunning, AgentRunning)

// genAgentSnapshot generates valid persistent-agent snapshots covering every
// field: all states and intents, nil and dead pods, read errors, backoff in
// the past or future, every pod lifecycle and warm windows on both sides of
// now. Generated values survive EncodeSnapshot/DecodeSnapshot unchanged.
func genAgentSnapshot() *rapid.Generator[*AgentSnapshot] {
	return rapid.Custom(func(t *rapid.T) *AgentSnapshot {
		w := propGenWorld(t)
		return &AgentSnapshot{
			Run: AgentRun{
				ID:                  propGenID(t, "run.id"),
				State:               rapid.SampledFrom(agentGenStates).Draw(t, "run.state"),
				Version:             rapid.Int64Range(0, 1<<40).Draw(t, "run.version"),
				PendingMessages:     rapid.SampledFrom([]int{0, 0, 1, 3}).Draw(t, "run.pending_messages"),
				ConsecutiveFailures: rapid.IntRange(0, 5).Draw(t, "run.consecutive_failures"),
				TurnStartedAt:       propGenTimeNear(t, w.Now, "run.turn_started_at"),
				TurnDone:            rapid.Bool().Draw(t, "run.turn_done"),
				KeepWarmUntil:       propGenTimeNear(t, w.Now, "run.keep_warm_until"),
				PodHeld:             rapid.Bool().Draw(t, "run.pod_held"),
				Error:               propGenText(t, "run.error"),
				Reconcile:           propGenReconcile(t, w.Now),
			},
			World: w,
		}
	})
}

// agentHarness is the property harness of persistent agents: archived,
// the one terminal state, is never left.
func agentHarness() kindHarness {
	return kindHarness{
		kind: KindPersistentAgent, file: "decide_agent.go", decide: "DecideAgent",
		direct:           func(s Snapshot) Action { return DecideAgent(s.(*AgentSnapshot)) },
		gen:              propAsSnapshot(genAgentSnapshot()),
		clone:            func(s Snapshot) Snapshot { return agentClone(s.(*AgentSnapshot)) },
		mayLeaveTerminal: func(Snapshot, Edge) bool { return false },
		check:            func(t *rapid.T, s Snapshot, a Action) { agentCheck(t, s.(*AgentSnapshot), a) },
		draws:            8000,
	}
}

// agentCheck asserts the invariants of agent decisions: failures counted
// and capped, failed exactly at the limit, running only on a live pod,
// paused, failed and archived act only on an intent, pods released only
// when held and not always-on.
func agentCheck(t *rapid.T, s *AgentSnapshot, a Action) {
	limit := s.Settings.FailureLimit
	if limit <= 0 {
		limit = 3
	}
	if p := propPatchOf(a); p != nil && p.ConsecutiveFailures != nil {
		require.LessOrEqual(t, *p.ConsecutiveFailures, limit, "failures never pass the limit")
		require.GreaterOrEqual(t, *p.ConsecutiveFailures, 0)
	}
	if mv, ok := a.(Moving); ok {
		e := mv.Move()
		require.NotEqual(t, AgentArchived, e.From, "archived is never left")
		if p := propPatchOf(a); p != nil && p.ConsecutiveFailures != nil && !p.ClearIntent {
			require.Equal(t, *p.ConsecutiveFailures == limit, e.To == AgentFailed, "failed exactly when failures reach the limit")
		}
		if e.To == AgentFailed {
			require.NotNil(t, propPatchOf(a).ConsecutiveFailures, "failing records the count")
		}
		if e.To == AgentRunning {
			require.Contains(t, []PodPhase{PodRunning, PodReady}, s.Pod.Phase, "running only on a live pod")
		}
	}
	if s.Run.Reconcile.Intent == IntentNone && !s.Now.Before(s.Run.Reconcile.BackoffUntil) && len(s.ReadErrors) == 0 {
		switch s.Run.State {
		case AgentPaused, AgentFailed, AgentArchived:
			require.Equal(t, TypeNoop, a.Type(), "%s acts only on an intent", s.Run.State)
		}
	}
	if a.Type() == TypeReleasePod {
		require.Equal(t, AgentIdle, s.Run.State)
		require.True(t, s.Run.PodHeld, "only a held pod is released")
		require.NotEqual(t, LifecycleAlwaysOn, s.Settings.PodLifecycle, "always-on never releases")
		require.Zero(t, s.Run.PendingMessages)
	}
}

// agentClone deep-copies an agent snapshot.
func agentClone(s *AgentSnapshot) *AgentSnapshot {
	c := *s
	c.World = propCloneWorld(s.World)
	return &c
}
