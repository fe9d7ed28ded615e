package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// agentApply plays an action on the snapshot as the executor would: the
// move, its patch, and a launch forgetting the previous pod. It returns how
// many pending messages the action counted as read.
func agentApply(s *AgentSnapshot, a Action) (read int) {
	before := s.Run.PendingMessages
	apply := func(p *Patch) {
		if p == nil {
			return
		}
		setIfProp(&s.Run.ConsecutiveFailures, p.ConsecutiveFailures)
		setIfProp(&s.Run.TurnStartedAt, p.TurnStartedAt)
		setIfProp(&s.Run.TurnDone, p.TurnDone)
		setIfProp(&s.Run.KeepWarmUntil, p.KeepWarmUntil)
		setIfProp(&s.Run.PodHeld, p.PodHeld)
		setIfProp(&s.Run.PendingMessages, p.PendingMessages)
		setIfProp(&s.Run.TurnMessages, p.TurnMessages)
		if p.ClearIntent {
			s.Run.Reconcile.Intent = IntentNone
		}
	}
	switch a := a.(type) {
	case Transition:
		apply(a.Patch)
		s.Run.State = a.To
		if ReleasesPod(s, a) {
			s.Pod = nil
		}
	case EnqueueTurn:
		apply(a.Patch)
		s.Run.State, s.Run.TurnDone, s.Pod = a.To, false, nil
	case PatchStatus:
		apply(&a.Patch)
	case ReleasePod:
		s.Run.PodHeld, s.Pod = false, nil
	}
	return before - s.Run.PendingMessages
}

func setIfProp[T any](dst, src *T) {
	if src != nil {
		*dst = *src
	}
}

// TestAgentMessagesAreNeverDropped: over any interleaving of messages, pod
// starts, turn ends and decision passes, a turn's end counts as read only
// messages that were pending when the turn was enqueued, and once the agent
// is left to finish its turns every message sent has been read by a turn.
func TestAgentMessagesAreNeverDropped(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		now := time.Date(2026, time.November, 28, 9, 0, 0, 0, time.UTC)
		s := &AgentSnapshot{Run: AgentRun{ID: "agent", State: AgentIdle},
			World: World{Now: now, Capacity: Capacity{GlobalLimit: 4}}}
		sent, read := 0, 0
		pass := func() {
			s.Now = s.Now.Add(time.Second)
			startedFor := s.Run.TurnMessages
			n := agentApply(s, Decide(s))
			require.GreaterOrEqual(t, n, 0)
			if n > 0 {
				require.LessOrEqual(t, n, startedFor, "a turn's end read more messages than it was started for")
			}
			read += n
			require.GreaterOrEqual(t, s.Run.PendingMessages, 0)
			require.LessOrEqual(t, s.Run.TurnMessages, s.Run.PendingMessages)
		}
		steps := rapid.IntRange(1, 80).Draw(t, "steps")
		for range steps {
			switch rapid.IntRange(0, 3).Draw(t, "event") {
			case 0: // a message (the inbox cap is not the subject here)
				if s.Run.PendingMessages < MaxInbox {
					s.Run.PendingMessages++
					sent++
				}
			case 1: // the turn's pod comes up
				if s.Run.State == AgentProvisioning {
					s.Pod = &Pod{Name: "p", Phase: PodRunning}
				}
			case 2: // the agent halts its turn
				if s.Run.State == AgentRunning {
					s.Run.TurnDone = true
				}
			case 3:
				pass()
			}
		}
		for range 200 {
			if s.Run.State == AgentIdle && s.Run.PendingMessages == 0 {
				break
			}
			switch s.Run.State {
			case AgentProvisioning:
				s.Pod = &Pod{Name: "p", Phase: PodRunning}
			case AgentRunning:
				s.Run.TurnDone = true
			}
			pass()
		}
		require.Equal(t, AgentIdle, s.Run.State)
		require.Zero(t, s.Run.PendingMessages, "a message was never read")
		require.Equal(t, sent, read, "every message sent was read by a turn")
	})
}
