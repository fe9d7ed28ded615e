package reconcile

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIntentAction: the verdict on an intent is the kind's intent rule, on
// a copy (the snapshot keeps its own intent).
func TestIntentAction(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		snap   Snapshot
		in     Intent
		reason string
		to     State // "" when refused
	}{
		{"repo cancel running", &RepoSnapshot{Run: RepoRun{State: RepoRunning}}, IntentCancel, "intent-cancel", RepoCancelled},
		{"repo cancel completed", &RepoSnapshot{Run: RepoRun{State: RepoCompleted}}, IntentCancel, "cancel-not-applicable", ""},
		{"repo restart failed", &RepoSnapshot{Run: RepoRun{State: RepoFailed}}, IntentRestart, "intent-restart", RepoQueued},
		{"repo pause", &RepoSnapshot{Run: RepoRun{State: RepoRunning}}, IntentPause, "intent-unsupported", ""},
		{"standalone cancel queued", &StandaloneSnapshot{Run: StandaloneRun{State: StandaloneQueued}}, IntentCancel, "intent-cancel", StandaloneCancelled},
		{"review rereview submitted", &PRReviewSnapshot{Run: PRReviewRun{State: ReviewSubmitted}}, IntentRereview, "intent-rereview", ReviewQueued},
		{"agent pause running", &AgentSnapshot{Run: AgentRun{State: AgentRunning}}, IntentPause, "intent-pause", AgentPaused},
		{"agent resume idle", &AgentSnapshot{Run: AgentRun{State: AgentIdle}}, IntentResume, "resume-not-applicable", ""},
		{"agent archive archived", &AgentSnapshot{Run: AgentRun{State: AgentArchived}}, IntentArchive, "archived-is-final", ""},
		{"agent resume paused", &AgentSnapshot{Run: AgentRun{State: AgentPaused, Reconcile: Reconcile{Intent: IntentPause}}}, IntentResume, "intent-resume", AgentIdle},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.snap.Controls()
			a := IntentAction(tc.snap, tc.in)
			require.Equal(t, tc.reason, a.Why())
			_, refused := a.(ClearControlIntent)
			require.Equal(t, tc.to == "", refused, "refused")
			if m, ok := a.(Moving); ok {
				require.Equal(t, tc.to, m.Move().To)
			}
			require.Equal(t, before, tc.snap.Controls(), "the snapshot is not changed")
		})
	}
	require.Equal(t, "no-intent", IntentAction(&RepoSnapshot{}, IntentNone).Why())
}
