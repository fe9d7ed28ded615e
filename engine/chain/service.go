package chain

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// SyncTargets recomputes the release targets of a system from its
// deployments, environments and the workspace's resources, stores them and
// starts the chain for every target that appeared. Call it after any of
// those objects changed. Selectors that fail to evaluate do not match; the
// targets are stored all the same and the *release.SelectorError is
// returned with the diff.
func (c *Chain) SyncTargets(ctx context.Context, systemID string) (ports.TargetsDiff, error) {
	op := "sync targets of system " + systemID
	sys, err := c.Store.Systems().Get(ctx, systemID)
	if err != nil {
		return ports.TargetsDiff{}, fmt.Errorf("%s: %w", op, err)
	}
	deps, err := ports.ListAll(ctx, c.Store.Deployments(), systemID)
	if err != nil {
		return ports.TargetsDiff{}, fmt.Errorf("%s: %w", op, err)
	}
	envs, err := ports.ListAll(ctx, c.Store.Environments(), systemID)
	if err != nil {
		return ports.TargetsDiff{}, fmt.Errorf("%s: %w", op, err)
	}
	res, err := ports.ListAll(ctx, c.Store.Resources(), sys.Value.WorkspaceID)
	if err != nil {
		return ports.TargetsDiff{}, fmt.Errorf("%s: %w", op, err)
	}
	targets, selErr := release.ComputeTargets([]release.System{sys.Value}, values(deps), values(envs), values(res), release.CEL{})
	var se *release.SelectorError
	if selErr != nil && !errors.As(selErr, &se) {
		return ports.TargetsDiff{}, fmt.Errorf("%s: %w", op, selErr)
	}
	diff, err := c.Store.TargetsReplace(ctx, ports.TargetsReplaceParams{Scope: ports.TargetScope{SystemID: systemID}, Targets: targets})
	if err != nil {
		return ports.TargetsDiff{}, fmt.Errorf("%s: %w", op, err)
	}
	if err := c.EvaluateTargets(ctx, diff.Added...); err != nil {
		return diff, fmt.Errorf("%s: %w", op, err)
	}
	return diff, selErr
}

// values unwraps stored objects.
func values[T any](s []ports.Stored[T]) []T {
	out := make([]T, len(s))
	for i := range s {
		out[i] = s[i].Value
	}
	return out
}

// CreateVersion stores a new deployment version and starts the chain for
// every target of its deployment.
func (c *Chain) CreateVersion(ctx context.Context, v release.DeploymentVersion) error {
	if v.CreatedAt.IsZero() {
		v.CreatedAt = c.Clock.Now()
	}
	if v.Status == "" {
		v.Status = release.VersionReady
	}
	// Validated before the store, whose error would quote the id as given.
	if err := v.Validate(); err != nil {
		return err
	}
	if err := c.Store.VersionCreate(ctx, v); err != nil {
		return err
	}
	return c.evaluateDeployment(ctx, ports.TargetScope{DeploymentID: v.DeploymentID})
}

// SetVersionStatus changes a version's status (ready, paused, rejected,
// ...) and re-evaluates its deployment's targets.
func (c *Chain) SetVersionStatus(ctx context.Context, versionID string, s release.VersionStatus) error {
	v, err := c.Store.VersionGet(ctx, versionID)
	if err != nil {
		return err
	}
	if err := c.Store.VersionUpdateStatus(ctx, versionID, s); err != nil {
		return err
	}
	return c.evaluateDeployment(ctx, ports.TargetScope{DeploymentID: v.DeploymentID})
}

// Approve records a user's approval of a version in an environment and
// re-evaluates the version's targets in that environment. Approving twice
// keeps the first record and reports false.
func (c *Chain) Approve(ctx context.Context, a release.Approval) (bool, error) {
	if a.ApprovedAt.IsZero() {
		a.ApprovedAt = c.Clock.Now()
	}
	// Validated before the lookups, whose errors would quote the ids as
	// given (control characters and all).
	if err := a.Validate(); err != nil {
		return false, err
	}
	v, err := c.Store.VersionGet(ctx, a.VersionID)
	if err != nil {
		return false, fmt.Errorf("approve %s: %w", a.VersionID, err)
	}
	if a.EnvironmentID, err = c.versionEnvironment(ctx, v, a.EnvironmentID); err != nil {
		return false, fmt.Errorf("approve %s: %w", a.VersionID, err)
	}
	added, err := c.Store.ApprovalAdd(ctx, a)
	if err != nil {
		return false, err
	}
	return added, c.evaluateDeployment(ctx, ports.TargetScope{DeploymentID: v.DeploymentID, EnvironmentID: a.EnvironmentID})
}

// mustExist refuses, as invalid input naming the field, an environment or
// resource id (when not empty) that names nothing stored: an approval or a
// force that could never apply is not stored.
func (c *Chain) mustExist(ctx context.Context, environmentID, resourceID string) error {
	if environmentID != "" {
		if _, err := c.Store.Environments().Get(ctx, environmentID); errors.Is(err, ports.ErrNotFound) {
			return release.Invalid("environment_id", "no environment "+strconv.Quote(environmentID))
		} else if err != nil {
			return err
		}
	}
	if resourceID != "" {
		if _, err := c.Store.Resources().Get(ctx, resourceID); errors.Is(err, ports.ErrNotFound) {
			return release.Invalid("resource_id", "no resource "+strconv.Quote(resourceID))
		} else if err != nil {
			return err
		}
	}
	return nil
}

// evaluateDeployment starts the chain for every target of scope.
func (c *Chain) evaluateDeployment(ctx context.Context, scope ports.TargetScope) error {
	after := ""
	for {
		page, err := c.Store.TargetList(ctx, ports.TargetListParams{Scope: scope, AfterKey: after, Limit: 1000})
		if err != nil {
			return err
		}
		if err := c.EvaluateTargets(ctx, page...); err != nil {
			return err
		}
		if len(page) < 1000 {
			return nil
		}
		after = page[len(page)-1].Key()
	}
}

// VersionVerdicts is one version's rule verdicts for a target.
type VersionVerdicts struct {
	Version  release.DeploymentVersion `json:"version"`
	Decision policy.Decision           `json:"decision"`
	Verdicts []policy.RuleVerdict      `json:"verdicts"`
}

// Explanation answers "why is this version (not) deploying here?": the
// target's desired release, whether the target runs it, and, for its
// newest versions, every rule's verdict.
type Explanation struct {
	Target      release.ReleaseTarget `json:"target"`
	Desired     *ports.DesiredRelease `json:"desired,omitempty"`
	Convergence Convergence           `json:"convergence"`
	Jobs        []ports.JobRow        `json:"jobs,omitempty"`
	// Forced says which force-deploy pins the target, when one does: the
	// policies below are then skipped for that version.
	Forced string `json:"forced,omitempty"`
	// DecidedWith names the policy revisions the desired release was
	// decided with (kept on the release); Policies names those applying to
	// the target now, the latest published revision of each.
	DecidedWith []release.PolicyRevision `json:"decided_with,omitempty"`
	Policies    []release.PolicyRevision `json:"policies,omitempty"`
	// Relations say how each reference variable resolves for the target
	// now: the relationship rule and the related resource used, or why
	// the variable is unresolved.
	Relations []release.Relation `json:"relations,omitempty"`
	Versions  []VersionVerdicts  `json:"versions"`
}

// Explain computes the per-version, per-rule verdicts of the target's
// newest limit versions (all when limit ≤ 0), with the same facts the
// desired-release controller reads.
func (c *Chain) Explain(ctx context.Context, t release.ReleaseTarget, limit int) (Explanation, error) {
	op := "explain " + t.Key()
	f, err := c.load(ctx, t)
	if err != nil {
		return Explanation{}, fmt.Errorf("%s: %w", op, err)
	}
	if err := c.loadPolicyFacts(ctx, f); err != nil {
		return Explanation{}, fmt.Errorf("%s: %w", op, err)
	}
	out := Explanation{Target: t, Jobs: f.Jobs, Desired: f.Desired, Policies: f.decidedWith()}
	if f.Release != nil {
		out.DecidedWith = f.Release.Policies
	}
	if out.Convergence, err = c.convergence(ctx, f); err != nil {
		return Explanation{}, fmt.Errorf("%s: %w", op, err)
	}
	if _, why, err := c.forcedVersion(ctx, f); err != nil {
		return Explanation{}, fmt.Errorf("%s: %w", op, err)
	} else {
		out.Forced = why
	}
	if _, out.Relations, err = c.resolveVariables(ctx, &f.Detail); err != nil && !errors.Is(err, release.ErrInvalid) {
		return Explanation{}, fmt.Errorf("%s: %w", op, err)
	}
	for cand, err := range c.candidates(ctx, f) {
		if err != nil {
			return Explanation{}, fmt.Errorf("%s: %w", op, err)
		}
		vv := VersionVerdicts{Version: cand.Version}
		in := cand.Input(f.base)
		if !in.IsCandidate() {
			// Not a candidate here (policy.Choose); its rules do not matter.
			vv.Decision = policy.Decision{Status: policy.Denied,
				Blocking: policy.RuleVerdict{Verdict: policy.Verdict{Status: policy.Denied, Message: "version is " + string(cand.Version.Status)}}}
		} else {
			vv.Decision, vv.Verdicts = policy.Evaluate(f.policies, in), policy.Explain(f.policies, in)
		}
		out.Versions = append(out.Versions, vv)
		if limit > 0 && len(out.Versions) >= limit {
			break
		}
	}
	return out, nil
}

// Convergence says whether a target runs its desired release.
type Convergence struct {
	// Converged is set only while the target's newest job is a successful
	// job of its desired release whose verification has not failed.
	Converged bool `json:"converged"`
	// Running is the version of the target's newest successful job; empty
	// when none.
	Running string `json:"running,omitempty"`
	// Message says what the target runs, what it should run and, when it
	// does not, what it waits for: "runs v2; desired v1: deploying: job
	// ... is inProgress", "...: waits: RULE pending: WHY" (a job gate, such
	// as an environment at capacity), "...: no job can run: WHY" (no usable
	// job agent).
	Message string `json:"message"`
}

// convergence compares the target's jobs with its desired release; when a
// job is still to come it runs the job gates, as job-eligibility does.
func (c *Chain) convergence(ctx context.Context, f *facts) (Convergence, error) {
	var out Convergence
	runs := "runs nothing yet"
	for i := range f.Jobs {
		if j := &f.Jobs[i]; j.Status == release.JobSuccessful {
			out.Running = j.VersionID
			runs = "runs " + j.VersionID
			break
		}
	}
	rel := f.Release
	switch {
	case f.Desired == nil:
		out.Message = runs + "; the desired release is not evaluated yet"
		return out, nil
	case rel == nil:
		out.Message = runs + "; no release is desired"
		return out, nil
	}
	want := "desired " + rel.VersionID
	if r := runOf(f.Jobs, rel.ID); r.n > 0 {
		j := &f.Jobs[0]
		switch {
		case j.Status == release.JobSuccessful && j.Verification == release.VerificationRunning:
			out.Message = runs + "; " + want + ": verifying job " + j.ID
			return out, nil
		case j.Status == release.JobSuccessful && j.Verification == release.VerificationFailed:
			out.Message = runs + "; " + want + ": the verification of job " + j.ID + " failed"
			return out, nil
		case j.Status == release.JobSuccessful:
			out.Converged = true
			out.Message = "runs its desired release " + rel.VersionID + " (job " + j.ID + ")"
			return out, nil
		case j.Status.IsActive():
			out.Message = runs + "; " + want + ": deploying: job " + j.ID + " is " + string(j.Status)
			return out, nil
		}
	}
	if f.Version != nil {
		if rt := c.routeOf(f); rt.agent == nil {
			// No job of it can run: say why, not only that the one it
			// had ended invalidJobAgent.
			out.Message = runs + "; " + want + ": no job can run: " + rt.why
			return out, nil
		}
	}
	dec, _, err := c.eligible(ctx, f, rel)
	if err != nil {
		return out, err
	}
	if dec.Status == policy.Allowed {
		out.Message = runs + "; " + want + ": its job is due"
		return out, nil
	}
	name := dec.Blocking.RuleID
	if name == "" {
		name = string(dec.Blocking.Type)
	}
	out.Message = runs + "; " + want + ": waits: " + name + " " + string(dec.Status) + ": " + dec.Blocking.Message
	return out, nil
}

// ForceDeploy deploys a version to the targets of its deployment in scope
// (environment and resource narrow it; empty means all) whatever the
// policies say: it stores a force-deploy skip (release.ForceDeployRule;
// ID, RuleID and version are filled in) and re-evaluates those targets.
// The version is pinned there while the skip applies; job gates still
// hold, so it waits for the targets' active jobs. It returns the stored
// skip; PolicySkipDelete with its ID ends the force.
func (c *Chain) ForceDeploy(ctx context.Context, s release.PolicySkip) (release.PolicySkip, error) {
	op := "force-deploy " + s.VersionID
	v, err := c.Store.VersionGet(ctx, s.VersionID)
	if err != nil {
		return s, fmt.Errorf("%s: %w", op, err)
	}
	if s.EnvironmentID != "" {
		if s.EnvironmentID, err = c.versionEnvironment(ctx, v, s.EnvironmentID); err != nil {
			return s, fmt.Errorf("%s: %w", op, err)
		}
	}
	if err := c.mustExist(ctx, "", s.ResourceID); err != nil {
		return s, fmt.Errorf("%s: %w", op, err)
	}
	s.RuleID = release.ForceDeployRule
	if s.ID == "" {
		s.ID = "force-" + s.VersionID + "-" + strconv.FormatInt(c.Clock.Now().UnixNano(), 36)
	}
	if err := c.Store.PolicySkipPut(ctx, s); err != nil {
		return s, fmt.Errorf("%s: %w", op, err)
	}
	return s, c.evaluateDeployment(ctx, ports.TargetScope{DeploymentID: v.DeploymentID, EnvironmentID: s.EnvironmentID, ResourceID: s.ResourceID})
}
