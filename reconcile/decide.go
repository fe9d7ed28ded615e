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

// readFailed is rule 3 of every kind: a failed read defers with exponential
// backoff and never transitions.
func readFailed(w *World, r Reconcile) (Action, bool) {
	if len(w.ReadErrors) == 0 {
		return nil, false
	}
	return DeferWithBackoff{
		Until:    w.Now.Add(BackoffDelay(r.Attempts, w.JitterSeed)),
		Attempts: r.Attempts + 1,
		Reason:   "read-failed",
	}, true
}

// wakeSoon is the delay of RequeueSoon before jitter.
const wakeSoon = 15 * time.Second

// requeueSoon asks for another pass shortly, jittered from the seed so that
// many runs waiting on the same capacity do not wake together.
func requeueSoon(w *World, reason string) Action {
	j := time.Duration(mix(w.JitterSeed) % uint64(5*time.Second))
	return RequeueSoon{At: w.Now.Add(wakeSoon + j), Reason: reason}
}
