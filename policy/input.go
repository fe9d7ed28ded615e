package policy

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// JobRecord is a job with the version of the release it ran.
type JobRecord struct {
	release.Job
	VersionID string `json:"version_id"`
}

// TargetState is one release target with its jobs, newest first.
type TargetState struct {
	Target release.ReleaseTarget `json:"target"`
	Jobs   []JobRecord           `json:"jobs,omitempty"`
}

// EnvironmentState is an environment of the deployment's system with the
// deployment's release targets in it.
type EnvironmentState struct {
	Environment release.Environment `json:"environment"`
	Targets     []TargetState       `json:"targets,omitempty"`
	// Progression, when set, summarises the environment for the
	// progression rule instead of Targets: the rule then reads only it
	// (see ProgressionSummary), so a state of any size costs O(1).
	Progression *ProgressionSummary `json:"progression,omitempty"`

	// tally keeps the progression rule's count over Targets per version
	// and rule, shared by the copies of a state made with
	// NewEnvironmentState: every target that reads the state counts once.
	tally *tally
}

// NewEnvironmentState is the state of env with targets, whose progression
// counts are computed once and shared by every evaluation that reads it
// (and its copies): evaluating n targets against it costs O(n + targets),
// not O(n × targets). Targets must not change afterwards.
func NewEnvironmentState(env release.Environment, targets []TargetState) EnvironmentState {
	return EnvironmentState{Environment: env, Targets: targets, tally: &tally{counts: map[tallyKey]tallied{}}}
}

// tally memoizes progression counts; safe for concurrent evaluations.
type tally struct {
	mu     sync.Mutex
	counts map[tallyKey]tallied
}

// tallyKey is what a count depends on: the version and how the rule
// judges a success.
type tallyKey struct {
	version, statuses   string
	requireVerification bool
}

// tallied is a count: the targets whose newest terminal job of the version
// succeeded, and the latest of those successes.
type tallied struct {
	successes int
	latest    time.Time
}

// count returns the tally of key, computing it with f the first time.
func (t *tally) count(key tallyKey, f func() tallied) tallied {
	if t == nil {
		return f()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.counts[key]; ok {
		return c
	}
	c := f()
	t.counts[key] = c
	return c
}

// ProgressionSummary is what the environment-progression rule reads of an
// upstream environment for one version, without its targets: how many
// release targets the deployment has there, and how the newest terminal
// job of the version ended on each target that has one, counted per
// status and verification. A store keeps it up to date in each job's own
// write (ports.ReleaseStore.ProgressionSummary).
type ProgressionSummary struct {
	// VersionID is the version the outcomes count.
	VersionID string `json:"version_id"`
	// Targets counts the deployment's release targets in the environment.
	Targets int `json:"targets"`
	// Outcomes count the targets per status and verification of their
	// newest terminal job of the version; no two share both.
	Outcomes []ProgressionOutcome `json:"outcomes,omitempty"`
}

// ProgressionOutcome counts the targets whose newest terminal job of the
// version ended with Status and Verification, and the latest of those
// jobs' finish times (release.Job.FinishedAt).
type ProgressionOutcome struct {
	Status       release.JobStatus          `json:"status"`
	Verification release.VerificationStatus `json:"verification,omitempty"`
	Targets      int                        `json:"targets"`
	LatestAt     time.Time                  `json:"latest_at"`
}

// SummarizeProgression is the summary of targets for versionID: their
// count and, per status and verification, the targets whose newest
// terminal job of the version (Jobs are newest first) ended so, sorted by
// (status, verification). A state with it decides as one with targets.
func SummarizeProgression(versionID string, targets []TargetState) ProgressionSummary {
	type key struct {
		status       release.JobStatus
		verification release.VerificationStatus
	}
	at := map[key]int{}
	sum := ProgressionSummary{VersionID: versionID, Targets: len(targets)}
	for i := range targets {
		j := newestTerminal(targets[i].Jobs, versionID)
		if j == nil {
			continue
		}
		k := key{j.Status, j.Verification}
		n, ok := at[k]
		if !ok {
			n = len(sum.Outcomes)
			at[k] = n
			sum.Outcomes = append(sum.Outcomes, ProgressionOutcome{Status: j.Status, Verification: j.Verification})
		}
		o := &sum.Outcomes[n]
		o.Targets++
		o.LatestAt = later(o.LatestAt, j.FinishedAt())
	}
	slices.SortFunc(sum.Outcomes, func(a, b ProgressionOutcome) int {
		return cmp.Or(cmp.Compare(a.Status, b.Status), cmp.Compare(a.Verification, b.Verification))
	})
	return sum
}

// DependencyState is another deployment on the target's resource with the
// version of its latest successful job there (nil when none).
type DependencyState struct {
	Deployment release.Deployment         `json:"deployment"`
	Version    *release.DeploymentVersion `json:"version,omitempty"`
}

// Input is everything the rules read, loaded by the caller. Evaluation
// never reads anything else: no clock (Now is a field), no store.
type Input struct {
	Now time.Time `json:"now"`

	// The target and the candidate version.
	Deployment  release.Deployment        `json:"deployment"`
	Environment release.Environment       `json:"environment"`
	Resource    release.Resource          `json:"resource"`
	Version     release.DeploymentVersion `json:"version"`

	// Approvals of the candidate version (any environment; the rules pick
	// the target's).
	Approvals []release.Approval `json:"approvals,omitempty"`
	// Jobs are the target's jobs, newest first.
	Jobs []JobRecord `json:"jobs,omitempty"`
	// ActiveVersion is the version of the target's newest active job and
	// SuccessfulVersion that of its newest successful job; nil when none.
	ActiveVersion     *release.DeploymentVersion `json:"active_version,omitempty"`
	SuccessfulVersion *release.DeploymentVersion `json:"successful_version,omitempty"`

	// SystemEnvironments are the environments of the deployment's system
	// with the deployment's targets in each and their jobs (for
	// environmentProgression).
	SystemEnvironments []EnvironmentState `json:"system_environments,omitempty"`
	// DeploymentTargets are the release targets of the deployment (for
	// gradualRollout ordering, which counts those of the target's
	// environment).
	DeploymentTargets []release.ReleaseTarget `json:"deployment_targets,omitempty"`
	// RolloutOrder, when set, is NewRolloutOrder(DeploymentTargets), shared
	// by the inputs that list the same targets, so that each position is a
	// binary search; it changes no verdict, and is never recorded.
	RolloutOrder *RolloutOrder `json:"-"`
	// Matches, when set, memoizes the policies' selector matches over the
	// inputs of a batch that read their subjects together (MatchMemo); it
	// changes no verdict, and is never recorded.
	Matches *MatchMemo `json:"-"`
	// Dependencies are the other deployments on the target's resource (for
	// deploymentDependency).
	Dependencies []DependencyState `json:"dependencies,omitempty"`
	// Skips are the policy skips of the candidate version.
	Skips []release.PolicySkip `json:"skips,omitempty"`

	// ApprovalSatisfiedAt and ProgressionSatisfiedAt, when known to the
	// caller, move the gradual rollout's start later. Evaluate also
	// derives them from the anyApproval and environmentProgression rules it
	// runs.
	ApprovalSatisfiedAt    time.Time `json:"approval_satisfied_at,omitzero"`
	ProgressionSatisfiedAt time.Time `json:"progression_satisfied_at,omitzero"`

	// ReleaseID is the release a new job would run (job eligibility).
	ReleaseID string `json:"release_id,omitempty"`
	// EnvironmentActiveJobs counts the active jobs of the deployment in
	// the target's environment (job eligibility).
	EnvironmentActiveJobs int `json:"environment_active_jobs,omitempty"`
}

// Target is the input's release target.
func (in *Input) Target() release.ReleaseTarget {
	return release.ReleaseTarget{DeploymentID: in.Deployment.ID, EnvironmentID: in.Environment.ID, ResourceID: in.Resource.ID}
}

// activeVersionID is the version of the newest active job.
func (in *Input) activeVersionID() string {
	if in.ActiveVersion != nil {
		return in.ActiveVersion.ID
	}
	for i := range in.Jobs {
		if in.Jobs[i].Status.IsActive() {
			return in.Jobs[i].VersionID
		}
	}
	return ""
}

// successfulVersionID is the version of the newest successful job.
func (in *Input) successfulVersionID() string {
	if in.SuccessfulVersion != nil {
		return in.SuccessfulVersion.ID
	}
	for i := range in.Jobs {
		if in.Jobs[i].Status == release.JobSuccessful {
			return in.Jobs[i].VersionID
		}
	}
	return ""
}

// runsVersion reports whether the target already runs the candidate: its
// newest successful or active job is for it.
func (in *Input) runsVersion() bool {
	id := in.Version.ID
	return id != "" && (in.successfulVersionID() == id || in.activeVersionID() == id)
}

// IsCandidate reports whether the input's version may be chosen for its
// target (Choose's rule): a ready version, or a paused version where the
// target already runs it.
func (in *Input) IsCandidate() bool {
	switch in.Version.Status {
	case release.VersionReady:
		return true
	case release.VersionPaused:
		return in.runsVersion()
	}
	return false
}

// evalContext is the per-evaluation state: the lazily built CEL activation
// and what the approval, progression and window gates found, for
// gradualRollout.
type evalContext struct {
	in            Input
	vars          map[string]any
	approvalAt    time.Time
	progressionAt time.Time
	gatesBlocked  bool
	// windows are the deployment windows Evaluate ran and no skip waived.
	windows []DeploymentWindow
}

// targetVars is the activation with deployment, environment, resource and
// version bound (release.Subject.Vars). Each is bound lazily: CEL builds
// a subject's value the first time an expression names it and keeps it
// in the map, so a selector that reads only the environment never builds
// the others (a plan evaluates every policy on every target).
func (cx *evalContext) targetVars() map[string]any {
	if cx.vars == nil {
		// The activation keeps its subjects: copies, so that the context
		// (and its input) stays on its caller's stack.
		d, e, r, v := cx.in.Deployment, cx.in.Environment, cx.in.Resource, cx.in.Version
		cx.vars = map[string]any{
			release.VarDeployment:  func() any { return d.CELValue() },
			release.VarEnvironment: func() any { return e.CELValue() },
			release.VarResource:    func() any { return r.CELValue() },
			release.VarVersion:     func() any { return v.CELValue() },
		}
	}
	return cx.vars
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
