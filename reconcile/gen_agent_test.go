package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// agentHelperBase is the fixed origin of generated times: decisions never
// read the clock, so generated snapshots are placed around it.
var agentHelperBase = time.Date(2026, time.March, 14, 12, 0, 0, 0, time.UTC)

// genAgentSnapshot generates valid persistent-agent snapshots covering every
// field: all states and intents, nil and dead pods, read errors, backoff in
// the past or future, every pod lifecycle and warm windows on both sides of
// now. Generated values survive EncodeSnapshot/DecodeSnapshot unchanged.
func genAgentSnapshot() *rapid.Generator[*AgentSnapshot] {
	return rapid.Custom(func(t *rapid.T) *AgentSnapshot {
		w := agentHelperGenWorld(t)
		return &AgentSnapshot{
			Run: AgentRun{
				ID:                  agentHelperGenID(t, "run.id"),
				State:               rapid.SampledFrom(AgentMachine.States).Draw(t, "run.state"),
				Version:             rapid.Int64Range(0, 1<<40).Draw(t, "run.version"),
				PendingMessages:     rapid.IntRange(0, 3).Draw(t, "run.pending_messages"),
				ConsecutiveFailures: rapid.IntRange(0, 5).Draw(t, "run.consecutive_failures"),
				TurnStartedAt:       agentHelperGenTimeNear(t, w.Now, "run.turn_started_at"),
				TurnDone:            rapid.Bool().Draw(t, "run.turn_done"),
				KeepWarmUntil:       agentHelperGenTimeNear(t, w.Now, "run.keep_warm_until"),
				PodHeld:             rapid.Bool().Draw(t, "run.pod_held"),
				Error:               agentHelperGenText(t, "run.error"),
				Reconcile:           agentHelperGenReconcile(t, w.Now),
			},
			World: w,
		}
	})
}

// agentHelperGenWorld generates the World part shared by every kind.
func agentHelperGenWorld(t *rapid.T) World {
	now := agentHelperBase.Add(time.Duration(rapid.Int64Range(0, int64(48*time.Hour)).Draw(t, "now")))
	w := World{
		Now:        now,
		JitterSeed: rapid.Uint64().Draw(t, "jitter_seed"),
		Heartbeat:  agentHelperGenTimeNear(t, now, "heartbeat"),
		Capacity: Capacity{
			GlobalActive: rapid.IntRange(0, 4).Draw(t, "capacity.global_active"),
			GlobalLimit:  rapid.IntRange(0, 4).Draw(t, "capacity.global_limit"),
			RepoActive:   rapid.IntRange(0, 4).Draw(t, "capacity.repo_active"),
			RepoLimit:    rapid.IntRange(0, 4).Draw(t, "capacity.repo_limit"),
		},
		Settings: agentHelperGenSettings(t),
	}
	if rapid.Bool().Draw(t, "has_pod") {
		w.Pod = agentHelperGenPod(t)
	}
	if n := rapid.IntRange(0, 4).Draw(t, "read_errors.len"); n > 2 {
		// Read errors in a minority of snapshots, one or two at a time.
		for i := 0; i < n-2; i++ {
			w.ReadErrors = append(w.ReadErrors, ReadError{
				Source:  rapid.SampledFrom([]string{"run", "pod", "pr", "capacity", "heartbeat"}).Draw(t, "read_errors.source"),
				Message: agentHelperGenText(t, "read_errors.message"),
			})
		}
	}
	return w
}

// agentHelperGenPod generates a pod in any phase, with or without an exit code.
func agentHelperGenPod(t *rapid.T) *Pod {
	p := &Pod{
		Name:      agentHelperGenText(t, "pod.name"),
		Phase:     rapid.SampledFrom([]PodPhase{PodPending, PodRunning, PodReady, PodError, PodTerminated, PodUnknown}).Draw(t, "pod.phase"),
		LastError: agentHelperGenText(t, "pod.last_error"),
	}
	if rapid.Bool().Draw(t, "pod.has_exit_code") {
		c := rapid.IntRange(0, 2).Draw(t, "pod.exit_code")
		p.ExitCode = &c
	}
	return p
}

// agentHelperGenSettings generates every settings knob, zero (default)
// values included.
func agentHelperGenSettings(t *rapid.T) Settings {
	dur := func(label string, unit time.Duration) Duration {
		return Duration(time.Duration(rapid.IntRange(0, 90).Draw(t, label)) * unit)
	}
	return Settings{
		StallThreshold: dur("settings.stall_threshold", time.Minute),
		AutoMerge:      rapid.Bool().Draw(t, "settings.auto_merge"),
		Cautious:       rapid.Bool().Draw(t, "settings.cautious"),
		AutoResume:     rapid.Bool().Draw(t, "settings.auto_resume"),
		MaxAutoResumes: rapid.IntRange(0, 12).Draw(t, "settings.max_auto_resumes"),
		ReviewEnabled:  rapid.Bool().Draw(t, "settings.review_enabled"),
		ReviewTrigger:  rapid.SampledFrom([]ReviewTrigger{"", ReviewOnCIPass, ReviewOnPROpen}).Draw(t, "settings.review_trigger"),
		OffPeak: OffPeak{
			Only:      rapid.Bool().Draw(t, "settings.off_peak.only"),
			StartHour: rapid.IntRange(0, 23).Draw(t, "settings.off_peak.start_hour"),
			EndHour:   rapid.IntRange(0, 23).Draw(t, "settings.off_peak.end_hour"),
		},
		WorkflowDisabled: rapid.Bool().Draw(t, "settings.workflow_disabled"),
		RetryBackoff:     dur("settings.retry_backoff", time.Second),
		RerunOnPush:      rapid.Bool().Draw(t, "settings.rerun_on_push"),
		MaxReruns:        rapid.IntRange(0, 12).Draw(t, "settings.max_reruns"),
		PodLifecycle:     rapid.SampledFrom([]PodLifecycle{"", LifecycleAlwaysOn, LifecycleSticky, LifecycleOnDemand}).Draw(t, "settings.pod_lifecycle"),
		KeepWarm:         dur("settings.keep_warm", time.Minute),
		MaxTurnDuration:  dur("settings.max_turn_duration", time.Minute),
		FailureLimit:     rapid.IntRange(0, 5).Draw(t, "settings.failure_limit"),
	}
}

// agentHelperGenReconcile generates the reconcile columns: any intent (none
// half of the time), backoff absent, past, exactly now or future.
func agentHelperGenReconcile(t *rapid.T, now time.Time) Reconcile {
	intents := []Intent{IntentCancel, IntentRetry, IntentResume, IntentRestart, IntentRereview, IntentPause, IntentArchive}
	r := Reconcile{
		Attempts:     rapid.IntRange(0, 8).Draw(t, "reconcile.attempts"),
		BackoffUntil: agentHelperGenTimeNear(t, now, "reconcile.backoff_until"),
	}
	if rapid.Bool().Draw(t, "reconcile.has_intent") {
		r.Intent = rapid.SampledFrom(intents).Draw(t, "reconcile.control_intent")
	}
	return r
}

// agentHelperGenTimeNear generates zero, now, or a time within three hours
// either side of now.
func agentHelperGenTimeNear(t *rapid.T, now time.Time, label string) time.Time {
	switch rapid.IntRange(0, 3).Draw(t, label+".kind") {
	case 0:
		return time.Time{}
	case 1:
		return now
	}
	return now.Add(time.Duration(rapid.Int64Range(-int64(3*time.Hour), int64(3*time.Hour)).Draw(t, label)))
}

// agentHelperGenID generates a non-empty identifier.
func agentHelperGenID(t *rapid.T, label string) string {
	return rapid.StringMatching(`[a-z0-9]{1,8}(-[a-z0-9]{1,8})?`).Draw(t, label)
}

// agentHelperGenText generates short, possibly empty, free text.
func agentHelperGenText(t *rapid.T, label string) string {
	return rapid.StringMatching(`[a-zA-Z0-9 .:-]{0,16}`).Draw(t, label)
}

// TestGenAgentSnapshotIsValid checks the generator's contract: every
// generated snapshot is valid and survives the recorded-snapshot format.
func TestGenAgentSnapshotIsValid(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := genAgentSnapshot().Draw(t, "snapshot")
		enc, err := EncodeSnapshot(s)
		require.NoError(t, err)
		got, err := DecodeSnapshot(enc)
		require.NoError(t, err)
		require.Equal(t, Snapshot(s), got)
	})
}
