package reconcile

import "time"

// Snapshot is the frozen input of one decision: one of *RepoSnapshot,
// *StandaloneSnapshot, *PRReviewSnapshot or *AgentSnapshot.
type Snapshot interface {
	// Ref names the run the snapshot observes.
	Ref() RunRef
	// RunState is the run's stored state.
	RunState() State
	// RunVersion is the run's stored version, the CAS token of the executor.
	RunVersion() int64
	// Controls returns the run's reconcile columns.
	Controls() Reconcile
	// Observed returns what the snapshot saw besides the run row.
	Observed() *World
	sealedSnapshot()
}

// Ref names the run.
func (s *RepoSnapshot) Ref() RunRef { return RunRef{Kind: KindRepo, ID: s.Run.ID} }

// Ref names the run.
func (s *StandaloneSnapshot) Ref() RunRef { return RunRef{Kind: KindStandalone, ID: s.Run.ID} }

// Ref names the run.
func (s *PRReviewSnapshot) Ref() RunRef { return RunRef{Kind: KindPRReview, ID: s.Run.ID} }

// Ref names the run.
func (s *AgentSnapshot) Ref() RunRef { return RunRef{Kind: KindPersistentAgent, ID: s.Run.ID} }

// RunState is the stored state.
func (s *RepoSnapshot) RunState() State { return s.Run.State }

// RunState is the stored state.
func (s *StandaloneSnapshot) RunState() State { return s.Run.State }

// RunState is the stored state.
func (s *PRReviewSnapshot) RunState() State { return s.Run.State }

// RunState is the stored state.
func (s *AgentSnapshot) RunState() State { return s.Run.State }

// RunVersion is the stored version.
func (s *RepoSnapshot) RunVersion() int64 { return s.Run.Version }

// RunVersion is the stored version.
func (s *StandaloneSnapshot) RunVersion() int64 { return s.Run.Version }

// RunVersion is the stored version.
func (s *PRReviewSnapshot) RunVersion() int64 { return s.Run.Version }

// RunVersion is the stored version.
func (s *AgentSnapshot) RunVersion() int64 { return s.Run.Version }

// Controls returns the reconcile columns.
func (s *RepoSnapshot) Controls() Reconcile { return s.Run.Reconcile }

// Controls returns the reconcile columns.
func (s *StandaloneSnapshot) Controls() Reconcile { return s.Run.Reconcile }

// Controls returns the reconcile columns.
func (s *PRReviewSnapshot) Controls() Reconcile { return s.Run.Reconcile }

// Controls returns the reconcile columns.
func (s *AgentSnapshot) Controls() Reconcile { return s.Run.Reconcile }

// Observed returns the world view.
func (s *RepoSnapshot) Observed() *World { return &s.World }

// Observed returns the world view.
func (s *StandaloneSnapshot) Observed() *World { return &s.World }

// Observed returns the world view.
func (s *PRReviewSnapshot) Observed() *World { return &s.World }

// Observed returns the world view.
func (s *AgentSnapshot) Observed() *World { return &s.World }

func (*RepoSnapshot) sealedSnapshot()       {}
func (*StandaloneSnapshot) sealedSnapshot() {}
func (*PRReviewSnapshot) sealedSnapshot()   {}
func (*AgentSnapshot) sealedSnapshot()      {}

// Decide returns the one action for the snapshot. It is pure: the same
// snapshot always yields the same action.
func Decide(s Snapshot) Action {
	switch s := s.(type) {
	case *RepoSnapshot:
		return DecideRepo(s)
	case *StandaloneSnapshot:
		return DecideStandalone(s)
	case *PRReviewSnapshot:
		return DecidePRReview(s)
	case *AgentSnapshot:
		return DecideAgent(s)
	}
	return Noop{Reason: "unknown-snapshot"}
}

// backoffActive is rule 1 of every kind: while the reconcile backoff is in
// the future, do nothing and report the wake-up time.
func backoffActive(w *World, r Reconcile) (Action, bool) {
	if !r.BackoffUntil.IsZero() && w.Now.Before(r.BackoffUntil) {
		return Noop{WakeAt: r.BackoffUntil, Reason: "backoff-active"}, true
	}
	return nil, false
}

// fact names what a decision needs from a secondary source of the
// snapshot, so a failed read of that source defers only the decisions that
// need it.
type fact uint8

// The secondary facts. A read error of any other source (the pod, the PR,
// the heartbeat, or a source this kernel does not know) is needed by every
// decision.
const (
	// needsCapacity: the launch from queued.
	needsCapacity fact = 1 << iota
	// needsDependencies: a repo run's pending and waiting_on_deps states.
	needsDependencies
)

// Read-error sources the engine records for its secondary reads.
const (
	SourceCapacity     = "capacity"
	SourceDependencies = "dependencies"
)

// readFailed is rule 3 of every kind: a failed read of a fact the run's
// state needs defers with exponential backoff and never transitions. A
// failed read of capacity or dependencies does not hold back decisions that
// read neither (a running run's health checks, PR reactions).
func readFailed(w *World, r Reconcile, needs fact) (Action, bool) {
	if !readFailedFor(w, needs) {
		return nil, false
	}
	return DeferWithBackoff{
		Until:    w.Now.Add(BackoffDelay(r.Attempts, w.JitterSeed)),
		Attempts: r.Attempts + 1,
		Reason:   "read-failed",
	}, true
}

// readFailedFor reports whether a read error concerns a fact in needs, or a
// source every decision needs.
func readFailedFor(w *World, needs fact) bool {
	for i := range w.ReadErrors {
		switch w.ReadErrors[i].Source {
		case SourceCapacity:
			if needs&needsCapacity == 0 {
				continue
			}
		case SourceDependencies:
			if needs&needsDependencies == 0 {
				continue
			}
		}
		return true
	}
	return false
}

// needsOf is what a run of kind k in state st needs from the secondary
// sources: capacity to launch from queued, and a repo run's dependencies
// while it is pending or waiting on them.
func needsOf(k RunKind, st State) fact {
	switch {
	case k == KindRepo && (st == RepoPending || st == RepoWaitingOnDeps):
		return needsDependencies
	case k == KindRepo && st == RepoQueued, k == KindStandalone && st == StandaloneQueued,
		k == KindPRReview && st == ReviewQueued, k == KindPersistentAgent && st == AgentQueued:
		return needsCapacity
	}
	return 0
}

// unknownPod says how an observed pod in the unknown phase is treated: for
// Settings.UnknownPodGrace (default 5 min) after Pod.Since it counts as not
// yet observed (waiting is true and the decision wakes at until); after
// that, or when Since is unset, the pod is lost ("pod-unknown-past-grace").
// A pod in any other phase is not unknown (both results false).
func unknownPod(w *World) (until time.Time, waiting, lost bool) {
	if w.Pod == nil || w.Pod.Phase != PodUnknown {
		return time.Time{}, false, false
	}
	if w.Pod.Since.IsZero() {
		return time.Time{}, false, true
	}
	until = w.Pod.Since.Add(w.Settings.UnknownPodGrace.Or(defaultUnknownPodGrace))
	if w.Now.Before(until) {
		return until, true, false
	}
	return time.Time{}, false, true
}

// defaultUnknownPodGrace is how long a pod may stay in the unknown phase
// when Settings.UnknownPodGrace is not set.
const defaultUnknownPodGrace = 5 * time.Minute

// reasonUnknownPod is the reason of a failure for a pod that stayed in the
// unknown phase past its grace period.
const reasonUnknownPod = "pod-unknown-past-grace"

// wakeSoon is the delay of RequeueSoon before jitter.
const wakeSoon = 15 * time.Second

// requeueSoon asks for another pass shortly, jittered from the seed so that
// many runs waiting on the same capacity do not wake together.
func requeueSoon(w *World, reason string) Action {
	j := time.Duration(mix(w.JitterSeed) % uint64(5*time.Second))
	return RequeueSoon{At: w.Now.Add(wakeSoon + j), Reason: reason}
}
