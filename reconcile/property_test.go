package reconcile

import (
	"regexp"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// propBase is the fixed origin of generated times: decisions never read the
// clock, so generated snapshots are placed around it.
var propBase = time.Date(2026, time.November, 20, 0, 0, 0, 0, time.UTC)

// propReason is the shape of every reason code: stable kebab-case.
var propReason = regexp.MustCompile(`^[a-z]+(-[a-z]+)*$`)

// propPtr returns a pointer to v, for expected patches.
func propPtr[T any](v T) *T { return &v }

// propGenWorld generates the World part of a snapshot, every field included:
// now across two days (so off-peak windows both allow and refuse), nil and
// dead pods, heartbeats on both sides of any stall threshold, capacity full
// and free, every settings knob, and read errors in a minority of cases.
func propGenWorld(t *rapid.T) World {
	now := propBase.Add(time.Duration(rapid.Int64Range(0, int64(48*time.Hour)).Draw(t, "now")))
	w := World{
		Now:        now,
		JitterSeed: rapid.Uint64().Draw(t, "jitter_seed"),
		Heartbeat:  propGenTimeNear(t, now, "heartbeat"),
		Capacity: Capacity{
			GlobalActive: rapid.IntRange(0, 4).Draw(t, "capacity.global_active"),
			GlobalLimit:  rapid.IntRange(0, 4).Draw(t, "capacity.global_limit"),
			RepoActive:   rapid.IntRange(0, 3).Draw(t, "capacity.repo_active"),
			RepoLimit:    rapid.IntRange(0, 3).Draw(t, "capacity.repo_limit"),
		},
		Settings: propGenSettings(t),
	}
	if rapid.IntRange(0, 4).Draw(t, "has_pod") > 0 {
		w.Pod = propGenPod(t)
	}
	if n := rapid.IntRange(0, 8).Draw(t, "read_errors.len"); n > 6 {
		for i := 0; i < n-6; i++ {
			w.ReadErrors = append(w.ReadErrors, ReadError{
				Source:  rapid.SampledFrom([]string{"run", "pod", "pr", "capacity", "dependencies", "heartbeat"}).Draw(t, "read_errors.source"),
				Message: propGenText(t, "read_errors.message"),
			})
		}
	}
	return w
}

// propGenPod generates a pod in any phase, with or without an exit code.
func propGenPod(t *rapid.T) *Pod {
	p := &Pod{
		Name:      propGenText(t, "pod.name"),
		Phase:     rapid.SampledFrom([]PodPhase{PodPending, PodRunning, PodReady, PodError, PodTerminated, PodUnknown}).Draw(t, "pod.phase"),
		LastError: propGenText(t, "pod.last_error"),
	}
	if rapid.IntRange(0, 3).Draw(t, "pod.has_exit_code") > 0 {
		c := rapid.SampledFrom([]int{0, 0, 1, 137}).Draw(t, "pod.exit_code")
		p.ExitCode = &c
	}
	return p
}

// propGenSettings generates every settings knob, zero (default) values
// included.
func propGenSettings(t *rapid.T) Settings {
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
		WorkflowDisabled: rapid.IntRange(0, 4).Draw(t, "settings.workflow_disabled") == 0,
		RetryBackoff:     dur("settings.retry_backoff", time.Second),
		RerunOnPush:      rapid.Bool().Draw(t, "settings.rerun_on_push"),
		MaxReruns:        rapid.IntRange(0, 12).Draw(t, "settings.max_reruns"),
		PodLifecycle:     rapid.SampledFrom([]PodLifecycle{"", LifecycleAlwaysOn, LifecycleSticky, LifecycleOnDemand}).Draw(t, "settings.pod_lifecycle"),
		KeepWarm:         dur("settings.keep_warm", time.Minute),
		MaxTurnDuration:  dur("settings.max_turn_duration", time.Minute),
		FailureLimit:     rapid.IntRange(0, 5).Draw(t, "settings.failure_limit"),
	}
}

// propGenReconcile generates the reconcile columns: any intent, including
// ones a kind does not support (none two times in three), and a backoff that
// is absent (most often), past, exactly now or future.
func propGenReconcile(t *rapid.T, now time.Time) Reconcile {
	r := Reconcile{Attempts: rapid.IntRange(0, 8).Draw(t, "reconcile.attempts")}
	if rapid.IntRange(0, 1).Draw(t, "reconcile.has_backoff") == 1 {
		r.BackoffUntil = propGenTimeNear(t, now, "reconcile.backoff_until")
	}
	if rapid.IntRange(0, 2).Draw(t, "reconcile.has_intent") == 0 {
		r.Intent = rapid.SampledFrom([]Intent{IntentCancel, IntentRetry, IntentResume, IntentRestart, IntentRereview, IntentPause, IntentArchive}).Draw(t, "reconcile.control_intent")
	}
	return r
}

// propOffsets are offsets from now that straddle every threshold the
// decisions use (stall default 15 min, retry delays, backoff), so drawing
// from them reaches both sides of each rule; rapid's bias towards small
// values would otherwise keep random offsets close to now.
var propOffsets = []time.Duration{
	-3 * time.Hour, -61 * time.Minute, -31 * time.Minute, -16 * time.Minute, -15 * time.Minute, -14 * time.Minute,
	-5 * time.Minute, -time.Minute, -time.Second, time.Second, time.Minute, 30 * time.Minute, 2 * time.Hour,
}

// propGenTimeNear generates zero, now, an offset from propOffsets, or a
// time within three hours either side of now.
func propGenTimeNear(t *rapid.T, now time.Time, label string) time.Time {
	switch rapid.IntRange(0, 5).Draw(t, label+".kind") {
	case 0:
		return time.Time{}
	case 1:
		return now
	case 2, 3:
		return now.Add(rapid.SampledFrom(propOffsets).Draw(t, label+".offset"))
	}
	return now.Add(time.Duration(rapid.Int64Range(-int64(3*time.Hour), int64(3*time.Hour)).Draw(t, label)))
}

// propGenID generates a non-empty identifier.
func propGenID(t *rapid.T, label string) string {
	return rapid.StringMatching(`[a-z0-9]{1,8}(-[a-z0-9]{1,8})?`).Draw(t, label)
}

// propGenText generates short, possibly empty, free text.
func propGenText(t *rapid.T, label string) string {
	return rapid.StringMatching(`[a-zA-Z0-9 .:-]{0,12}`).Draw(t, label)
}

// propCloneWorld deep-copies a World.
func propCloneWorld(w World) World {
	if w.Pod != nil {
		p := *w.Pod
		if p.ExitCode != nil {
			p.ExitCode = propPtr(*p.ExitCode)
		}
		w.Pod = &p
	}
	if w.ReadErrors != nil {
		w.ReadErrors = append([]ReadError(nil), w.ReadErrors...)
	}
	return w
}

// propPatchOf returns the patch an action writes, or nil.
func propPatchOf(a Action) *Patch {
	switch a := a.(type) {
	case Transition:
		return a.Patch
	case PatchStatus:
		return &a.Patch
	case ResumeAgent:
		return a.Patch
	}
	return nil
}

// propCheckCommon asserts the invariants every kind's decision keeps, for
// any snapshot: a kebab-case reason; moves start at the run's state and are
// edges of the machine; terminal states are left only through an intent
// (or a move mayLeaveTerminal allows); an active backoff is always a noop; an
// intent is always applied or cleared and nothing else clears one; a read
// error never moves or patches except through an intent, and without an
// intent defers with the documented backoff; full capacity launches nothing.
func propCheckCommon(t *rapid.T, s Snapshot, a Action, mayLeaveTerminal func(Edge) bool) {
	m := MachineFor(s.Ref().Kind)
	w, r, st := s.Observed(), s.Controls(), s.RunState()
	require.NotNil(t, a)
	require.Regexp(t, propReason, a.Why(), "reason of %#v", a)
	p := propPatchOf(a)
	appliesIntent := p != nil && p.ClearIntent

	if mv, ok := a.(Moving); ok {
		e := mv.Move()
		require.Equal(t, st, e.From, "a move starts from the run's state")
		require.True(t, m.Allowed(e.From, e.To), "edge %s → %s is not in the %s machine", e.From, e.To, m.Kind)
		if m.IsTerminal(st) && !appliesIntent {
			require.True(t, mayLeaveTerminal(e), "terminal %s left without an intent: %#v", st, a)
		}
	}
	if n, ok := a.(Noop); ok && !n.WakeAt.IsZero() {
		require.False(t, n.WakeAt.Before(w.Now), "a wake-up is never in the past")
	}
	if w.Now.Before(r.BackoffUntil) {
		require.Equal(t, Noop{WakeAt: r.BackoffUntil, Reason: "backoff-active"}, a, "active backoff is always a noop")
		return
	}
	if r.Intent == IntentNone {
		require.False(t, appliesIntent, "no intent, nothing to clear")
		require.NotEqual(t, TypeClearControlIntent, a.Type())
	} else {
		c, cleared := a.(ClearControlIntent)
		require.True(t, appliesIntent || (cleared && c.Intent == r.Intent), "an intent is applied or cleared: %#v", a)
		if appliesIntent {
			require.Equal(t, TypeTransition, a.Type(), "an intent is applied by a transition")
		}
	}
	if readFailedFor(w, needsOf(s.Ref().Kind, st)) {
		_, moving := a.(Moving)
		if moving || a.Type() == TypePatchStatus {
			require.True(t, appliesIntent, "a read error never moves or patches except through an intent: %#v", a)
		}
		if r.Intent == IntentNone {
			d, ok := a.(DeferWithBackoff)
			require.True(t, ok, "a read error defers: %#v", a)
			require.Equal(t, r.Attempts+1, d.Attempts)
			base := BackoffBase << min(max(r.Attempts, 0), BackoffMaxShift)
			require.GreaterOrEqual(t, d.Until.Sub(w.Now), base)
			require.LessOrEqual(t, d.Until.Sub(w.Now), base+base/10)
		}
	}
	if !w.Capacity.Available() {
		switch a.Type() {
		case TypeRequeueForAgent, TypeEnqueueAgent, TypeEnqueueTurn, TypeLaunchReviewRun:
			t.Fatalf("full capacity launched: %#v", a)
		}
	}
}

// propReasonsReached decides n generated snapshots and returns how often
// each reason came up.
func propReasonsReached[S any](gen *rapid.Generator[S], decide func(S) Action, n int) map[string]int {
	seen := map[string]int{}
	for i := range n {
		seen[decide(gen.Example(i)).Why()]++
	}
	return seen
}
