package reconcile

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"testing"
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
		w.Pod = propGenPod(t, now)
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

// propGenPod generates a pod in any phase, with or without an exit code,
// observed in its phase since a time near now (always for an unknown pod).
func propGenPod(t *rapid.T, now time.Time) *Pod {
	p := &Pod{
		Name:      propGenText(t, "pod.name"),
		Phase:     rapid.SampledFrom([]PodPhase{PodPending, PodRunning, PodReady, PodError, PodTerminated, PodUnknown}).Draw(t, "pod.phase"),
		LastError: propGenText(t, "pod.last_error"),
	}
	if p.Phase == PodUnknown || rapid.IntRange(0, 3).Draw(t, "pod.has_since") == 0 {
		// An unknown pod's Since decides its grace: draw it on both sides.
		p.Since = propGenTimeNear(t, now, "pod.since")
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
		StallThreshold:  dur("settings.stall_threshold", time.Minute),
		UnknownPodGrace: dur("settings.unknown_pod_grace", time.Minute),
		AutoMerge:       rapid.Bool().Draw(t, "settings.auto_merge"),
		Cautious:        rapid.Bool().Draw(t, "settings.cautious"),
		AutoResume:      rapid.Bool().Draw(t, "settings.auto_resume"),
		MaxAutoResumes:  rapid.IntRange(0, 12).Draw(t, "settings.max_auto_resumes"),
		ReviewEnabled:   rapid.Bool().Draw(t, "settings.review_enabled"),
		ReviewTrigger:   rapid.SampledFrom([]ReviewTrigger{"", ReviewOnCIPass, ReviewOnPROpen}).Draw(t, "settings.review_trigger"),
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
		if appliesIntent && a.Type() != TypeTransition {
			// idle → idle is not an edge: an idle agent's restart is a
			// PatchStatus, the one intent not applied by a transition.
			require.Equal(t, TypePatchStatus, a.Type(), "an intent is applied by a transition: %#v", a)
			require.Equal(t, Edge{AgentIdle, AgentIdle}, Edge{st, AgentIdle}, "only an idle agent's restart patches in place")
			require.Equal(t, IntentRestart, r.Intent)
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

// kindHarness is the property harness of one run kind: its generator and
// the invariants its decisions keep on top of propCheckCommon. One harness
// per kind, all run by the same tests below.
type kindHarness struct {
	kind RunKind
	// file and decide name the kind's decision source and function; the
	// reasons its doc comment lists are the rules the generator must reach.
	file, decide string
	// direct calls the kind's Decide function itself.
	direct func(Snapshot) Action
	gen    *rapid.Generator[Snapshot]
	clone  func(Snapshot) Snapshot
	// mayLeaveTerminal reports whether a move out of a terminal state
	// without an intent is one the kind's rules allow.
	mayLeaveTerminal func(Snapshot, Edge) bool
	// check asserts the kind's own invariants for s and its action a.
	check func(t *rapid.T, s Snapshot, a Action)
	// draws is how many generated snapshots must reach every rule.
	draws int
}

// propHarnesses lists the harness of every run kind.
func propHarnesses() []kindHarness {
	return []kindHarness{repoHarness(), standaloneHarness(), prReviewHarness(), agentHarness()}
}

// propNotReasons are quoted words of the decision sources and their doc
// comments that are not reasons: resume triggers.
var propNotReasons = []string{"conflicts", "ci-failing", "changes-requested", "manual"}

// propInvalidInputReasons are the reasons a Decide function returns only
// for a snapshot Validate refuses (a state outside the kind's machine):
// defensive fallbacks that keep a decision on its machine.
// TestDecideInvalidStateNeverMoves reaches them.
var propInvalidInputReasons = []string{"unknown-state", "intent-not-allowed"}

// propEachKind runs fn for every kind's harness, each as a parallel subtest.
func propEachKind(t *testing.T, fn func(t *testing.T, h kindHarness)) {
	for _, h := range propHarnesses() {
		t.Run(string(h.kind), func(t *testing.T) {
			t.Parallel()
			fn(t, h)
		})
	}
}

// propAsSnapshot widens a kind's generator to Snapshot.
func propAsSnapshot[S Snapshot](g *rapid.Generator[S]) *rapid.Generator[Snapshot] {
	return rapid.Custom(func(t *rapid.T) Snapshot { return g.Draw(t, "snapshot") })
}

// TestGenSnapshotIsValid checks every generator's contract: a generated
// snapshot is valid and survives the recorded-snapshot format.
func TestGenSnapshotIsValid(t *testing.T) {
	t.Parallel()
	propEachKind(t, func(t *testing.T, h kindHarness) {
		rapid.Check(t, func(t *rapid.T) {
			s := h.gen.Draw(t, "snapshot")
			require.Equal(t, h.kind, s.Ref().Kind)
			require.NoError(t, Validate(s))
			enc, err := EncodeSnapshot(s)
			require.NoError(t, err)
			got, err := DecodeSnapshot(enc)
			require.NoError(t, err)
			require.Equal(t, s, got)
		})
	})
}

// TestDecideProperties checks, for every kind, the invariants every
// decision keeps (pure, deterministic, dispatched by Decide, propCheckCommon)
// and the kind's own.
func TestDecideProperties(t *testing.T) {
	t.Parallel()
	propEachKind(t, func(t *testing.T, h kindHarness) {
		rapid.Check(t, func(t *rapid.T) {
			s := h.gen.Draw(t, "snapshot")
			before := h.clone(s)
			a := Decide(s)
			require.Equal(t, before, s, "a decision never mutates its snapshot")
			require.Equal(t, a, Decide(h.clone(s)), "same snapshot, same action")
			require.Equal(t, a, h.direct(s), "Decide dispatches to %s", h.decide)
			propCheckCommon(t, s, a, func(e Edge) bool { return h.mayLeaveTerminal(s, e) })
			h.check(t, s, a)
		})
	})
}

// TestGenReachesEveryRule checks, for every kind, that the generator
// exercises every rule of its Decide function: each reason the doc comment
// lists comes up within the draws, and nothing undocumented does.
func TestGenReachesEveryRule(t *testing.T) {
	t.Parallel()
	propEachKind(t, func(t *testing.T, h kindHarness) {
		documented := propDocumentedReasons(t, h.file, h.decide)
		seen := map[string]int{}
		for i := range h.draws {
			seen[Decide(h.gen.Example(i)).Why()]++
		}
		for _, reason := range documented {
			require.Positive(t, seen[reason], "no generated snapshot reached %q (seen: %v)", reason, seen)
		}
		for reason := range seen {
			require.Contains(t, documented, reason, "%s returned %q, which its doc comment does not list", h.decide, reason)
		}
		t.Logf("%d draws reached all %d documented reasons: %v", h.draws, len(documented), seen)
	})
}

// TestDecideReasonsAreDocumented checks that every reason constant in a
// kind's decision source is documented (so TestGenReachesEveryRule reaches
// it) or returned only for invalid input (so
// TestDecideInvalidStateNeverMoves reaches it): no rule hides from the
// harness.
func TestDecideReasonsAreDocumented(t *testing.T) {
	t.Parallel()
	for _, h := range propHarnesses() {
		documented := propDocumentedReasons(t, h.file, h.decide)
		for _, reason := range propSourceReasons(t, h.file) {
			if slices.Contains(propNotReasons, reason) || slices.Contains(propInvalidInputReasons, reason) {
				continue
			}
			require.Contains(t, documented, reason, "%s: reason %q is in the code but not in the doc comment of %s", h.file, reason, h.decide)
		}
	}
}

// TestDecideInvalidStateNeverMoves decides snapshots whose state is not of
// their kind (Validate refuses them; a library caller might not), with
// every intent: the decision is a noop or clears the intent, never a move
// off the machine, and between them the kinds reach every invalid-input
// reason.
func TestDecideInvalidStateNeverMoves(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, h := range propHarnesses() {
		for i := range 200 {
			s := h.gen.Example(i)
			propSetState(s, "bogus")
			require.Error(t, Validate(s))
			a := Decide(s)
			_, moving := a.(Moving)
			require.False(t, moving, "%s: an invalid state moved: %#v", h.kind, a)
			require.Contains(t, []ActionType{TypeNoop, TypeClearControlIntent, TypeDeferWithBackoff}, a.Type(), "%s: %#v", h.kind, a)
			seen[a.Why()] = true
		}
	}
	for _, reason := range propInvalidInputReasons {
		require.True(t, seen[reason], "no invalid snapshot reached %q (seen: %v)", reason, seen)
	}
}

// propSetState overwrites the run state of a generated snapshot.
func propSetState(s Snapshot, st State) {
	switch s := s.(type) {
	case *RepoSnapshot:
		s.Run.State = st
	case *StandaloneSnapshot:
		s.Run.State = st
	case *PRReviewSnapshot:
		s.Run.State = st
	case *AgentSnapshot:
		s.Run.State = st
	}
}

// propDocumentedReasons returns the quoted reasons ("kebab-case") that the
// doc comment of function fn in file lists (propNotReasons aside), with
// backoff-active and read-failed (rules 1 and 3 of every kind, documented
// there too).
func propDocumentedReasons(t testing.TB, file, fn string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
	require.NoError(t, err)
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == fn && fd.Doc != nil {
			var out []string
			for _, m := range propQuoted.FindAllStringSubmatch(fd.Doc.Text(), -1) {
				if !slices.Contains(out, m[1]) && !slices.Contains(propNotReasons, m[1]) {
					out = append(out, m[1])
				}
			}
			sort.Strings(out)
			require.Contains(t, out, "backoff-active")
			require.Contains(t, out, "read-failed")
			return out
		}
	}
	t.Fatalf("%s: no documented func %s", file, fn)
	return nil
}

// propQuoted finds a quoted kebab-case word.
var propQuoted = regexp.MustCompile(`"([a-z]+(?:-[a-z]+)*)"`)

// propSourceReasons returns the kebab-case string constants in the
// function bodies and variables of file: every reason the code can return.
func propSourceReasons(t testing.TB, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	require.NoError(t, err)
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		if _, ok := n.(*ast.ImportSpec); ok {
			return false
		}
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		v, err := strconv.Unquote(lit.Value)
		if err == nil && propReason.MatchString(v) && !slices.Contains(out, v) {
			out = append(out, v)
		}
		return true
	})
	return out
}

// propRequireRequeueSoon asserts a RequeueSoon with the reason, due
// 15 s (plus at most 5 s of jitter) after now.
func propRequireRequeueSoon(t *testing.T, a Action, now time.Time, reason string) {
	t.Helper()
	r, ok := a.(RequeueSoon)
	require.True(t, ok, "got %#v", a)
	require.Equal(t, reason, r.Reason)
	require.GreaterOrEqual(t, r.At.Sub(now), 15*time.Second)
	require.Less(t, r.At.Sub(now), 20*time.Second)
}
