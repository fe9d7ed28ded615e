package policy

import (
	"errors"
	"iter"
	"slices"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// SnapshotKind is the kind of a recorded desired-release decision, as
// reconciler decide tells it from a run's snapshot.
const SnapshotKind = "release-target"

// ChooseSnapshot is the whole input of one desired-release decision, as
// the chain recorded it: replaying it (Replay) gives the same Choice, as
// Choose is pure. Candidates are the versions the decision read, newest
// first (Choose stops at the first allowed one, so later versions are not
// there). When a force-deploy or a rollback chose the version before
// Choose ran, Override says so and Candidates is empty.
type ChooseSnapshot struct {
	Kind       string                `json:"kind"`
	Target     release.ReleaseTarget `json:"target"`
	Policies   []Policy              `json:"policies"`
	Base       Input                 `json:"base"`
	Exclude    map[string]string     `json:"exclude,omitempty"`
	Candidates []SnapshotCandidate   `json:"candidates"`
	Override   *Override             `json:"override,omitempty"`
}

// Facts counts what s holds that grows with its deployment's size: the
// deployment's targets, the jobs, and the targets of every environment
// state (the base's and each candidate's).
func (s *ChooseSnapshot) Facts() int {
	n := len(s.Base.DeploymentTargets) + len(s.Base.Jobs) + len(s.Base.Dependencies)
	for _, e := range s.Base.SystemEnvironments {
		n += len(e.Targets)
	}
	for _, c := range s.Candidates {
		for _, e := range c.Environments {
			n += len(e.Targets)
		}
	}
	return n
}

// SnapshotCandidate is a recorded Candidate.
type SnapshotCandidate struct {
	Version      release.DeploymentVersion `json:"version"`
	Approvals    []release.Approval        `json:"approvals,omitempty"`
	Skips        []release.PolicySkip      `json:"skips,omitempty"`
	Environments []EnvironmentState        `json:"environments,omitempty"`
}

// Override is a version chosen before Choose ran: by a force-deploy or a
// rollback rule (How), for Reason.
type Override struct {
	How     string                    `json:"how"`
	Version release.DeploymentVersion `json:"version"`
	Reason  string                    `json:"reason"`
}

// Recorder records the candidates Choose reads from a stream, in order.
type Recorder struct {
	Candidates []SnapshotCandidate
}

// Wrap streams seq through, recording each candidate it yields.
func (r *Recorder) Wrap(seq iter.Seq2[Candidate, error]) iter.Seq2[Candidate, error] {
	return func(yield func(Candidate, error) bool) {
		for c, err := range seq {
			if err == nil {
				r.Candidates = append(r.Candidates, SnapshotCandidate(c))
			}
			if !yield(c, err) {
				return
			}
		}
	}
}

// Candidate is c as Choose reads it.
func (c *SnapshotCandidate) Candidate() Candidate { return Candidate(*c) }

// Replay decides s again: the override's version when it has one, else
// Choose over the recorded candidates.
func (s *ChooseSnapshot) Replay() (Choice, error) {
	if s.Kind != SnapshotKind {
		return Choice{}, errors.New("kind: want " + SnapshotKind + ", got " + s.Kind)
	}
	if o := s.Override; o != nil {
		v := o.Version
		return Choice{Version: &v, Reasons: []string{o.Reason}}, nil
	}
	return Choose(ChooseParams{Policies: s.Policies, Base: s.Base, Exclude: s.Exclude}, func(yield func(Candidate, error) bool) {
		for i := range s.Candidates {
			if !yield(s.Candidates[i].Candidate(), nil) {
				return
			}
		}
	})
}

// Verdicts are every rule's verdict on the chosen version of ch, or on the
// newest candidate examined when none was chosen (nil when there is none).
func (s *ChooseSnapshot) Verdicts(ch *Choice) []RuleVerdict {
	if s.Override != nil {
		return nil
	}
	i := len(s.Candidates) - 1
	if ch.Version == nil {
		i = slices.IndexFunc(s.Candidates, func(c SnapshotCandidate) bool {
			cand := c.Candidate()
			in := cand.Input(s.Base)
			_, excluded := s.Exclude[c.Version.ID]
			return in.IsCandidate() && !excluded
		})
	}
	if i < 0 {
		return nil
	}
	c := s.Candidates[i].Candidate()
	return Explain(s.Policies, c.Input(s.Base))
}
