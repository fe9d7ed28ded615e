package reconcile

import (
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// genStandaloneSnapshot generates valid standalone snapshots covering every
// field: all states and intents (unsupported ones included), retries left or
// used up, FinishedAt absent or on either side of the retry due time, nil,
// live, succeeded and dead pods, stale and fresh heartbeats, full and free
// capacity, disabled workflows, read errors and backoff in the past or
// future. Generated values survive EncodeSnapshot/DecodeSnapshot unchanged.
func genStandaloneSnapshot() *rapid.Generator[*StandaloneSnapshot] {
	return rapid.Custom(func(t *rapid.T) *StandaloneSnapshot {
		w := propGenWorld(t)
		return &StandaloneSnapshot{
			Run: StandaloneRun{
				ID:         propGenID(t, "run.id"),
				State:      rapid.SampledFrom(StandaloneMachine.States).Draw(t, "run.state"),
				Version:    rapid.Int64Range(0, 1<<40).Draw(t, "run.version"),
				Workflow:   propGenID(t, "run.workflow"),
				RetryCount: rapid.IntRange(0, 4).Draw(t, "run.retry_count"),
				MaxRetries: rapid.IntRange(0, 4).Draw(t, "run.max_retries"),
				FinishedAt: propGenTimeNear(t, w.Now, "run.finished_at"),
				Error:      propGenText(t, "run.error"),
				Reconcile:  propGenReconcile(t, w.Now),
			},
			World: w,
		}
	})
}

// standaloneClone deep-copies a standalone snapshot.
func standaloneClone(s *StandaloneSnapshot) *StandaloneSnapshot {
	c := *s
	c.World = propCloneWorld(s.World)
	return &c
}

// standaloneHarness is the property harness of standalone runs. The one
// move out of a terminal state without an intent is the automatic retry of
// a failed run.
func standaloneHarness() kindHarness {
	return kindHarness{
		kind: KindStandalone, file: "decide_standalone.go", decide: "DecideStandalone",
		direct:           func(s Snapshot) Action { return DecideStandalone(s.(*StandaloneSnapshot)) },
		gen:              propAsSnapshot(genStandaloneSnapshot()),
		clone:            func(s Snapshot) Snapshot { return standaloneClone(s.(*StandaloneSnapshot)) },
		mayLeaveTerminal: func(_ Snapshot, e Edge) bool { return e == Edge{StandaloneFailed, StandaloneQueued} },
		check:            func(t *rapid.T, s Snapshot, a Action) { standaloneCheck(t, s.(*StandaloneSnapshot), a) },
		draws:            3000,
	}
}

// standaloneCheck asserts the invariants of standalone decisions: retries
// counted and capped, finishing records FinishedAt, completed only on exit
// 0, automatic retries wait for their backoff, disabled workflows never
// launch.
func standaloneCheck(t *rapid.T, s *StandaloneSnapshot, a Action) {
	p := propPatchOf(a)
	if p != nil && p.RetryCount != nil && *p.RetryCount > 0 {
		require.LessOrEqual(t, *p.RetryCount, s.Run.MaxRetries, "a retry never passes MaxRetries")
		require.Equal(t, s.Run.RetryCount+1, *p.RetryCount, "each retry is counted")
	}
	if mv, ok := a.(Moving); ok {
		e := mv.Move()
		if (e.To == StandaloneCompleted || e.To == StandaloneFailed) && !p.ClearIntent {
			require.Equal(t, s.Now, *p.FinishedAt, "finishing records FinishedAt=Now")
		}
		if e.To == StandaloneCompleted {
			require.True(t, s.Pod.Succeeded(), "completed only when the pod exited 0")
		}
		if e == (Edge{StandaloneFailed, StandaloneQueued}) && !p.ClearIntent {
			due := s.Run.FinishedAt.Add(RetryDelay(s.Run.RetryCount, s.Settings.RetryBackoff.Or(30*time.Second), time.Hour))
			require.False(t, s.Now.Before(due), "an automatic retry waits for its backoff")
		}
	}
	if a.Type() == TypeEnqueueAgent {
		require.False(t, s.Settings.WorkflowDisabled, "a disabled workflow never launches")
	}
	if n, ok := a.(Noop); ok && n.Reason == "retry-scheduled" {
		require.Equal(t, StandaloneFailed, s.Run.State)
		require.LessOrEqual(t, n.WakeAt.Sub(s.Run.FinishedAt), time.Hour, "retry delay is capped at one hour")
	}
}
