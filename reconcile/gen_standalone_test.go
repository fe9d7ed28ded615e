package reconcile

import (
	"testing"

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

// TestGenStandaloneSnapshotIsValid checks the generator's contract: every
// generated snapshot is valid and survives the recorded-snapshot format.
func TestGenStandaloneSnapshotIsValid(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := genStandaloneSnapshot().Draw(t, "snapshot")
		enc, err := EncodeSnapshot(s)
		require.NoError(t, err)
		got, err := DecodeSnapshot(enc)
		require.NoError(t, err)
		require.Equal(t, Snapshot(s), got)
	})
}

// TestGenStandaloneSnapshotReachesEveryRule checks that the generator
// exercises every documented rule of DecideStandalone, so the property tests
// cover them all.
func TestGenStandaloneSnapshotReachesEveryRule(t *testing.T) {
	t.Parallel()
	seen := propReasonsReached(genStandaloneSnapshot(), DecideStandalone, 3000)
	for _, reason := range []string{
		"backoff-active", "read-failed",
		"intent-cancel", "cancel-not-applicable", "intent-retry", "retries-exhausted", "retry-not-applicable",
		"intent-restart", "restart-not-applicable", "intent-unsupported",
		"workflow-disabled", "capacity-full", "capacity-available",
		"pod-succeeded", "awaiting-pod", "pod-dead", "stalled", "agent-running",
		"retry-scheduled", "auto-retry", "terminal-state",
	} {
		require.Positive(t, seen[reason], "no generated snapshot reached %q (seen: %v)", reason, seen)
	}
}
