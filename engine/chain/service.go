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
	v, err := c.Store.VersionGet(ctx, a.VersionID)
	if err != nil {
		return false, fmt.Errorf("approve %s: %w", a.VersionID, err)
	}
	added, err := c.Store.ApprovalAdd(ctx, a)
	if err != nil {
		return false, err
	}
	return added, c.evaluateDeployment(ctx, ports.TargetScope{DeploymentID: v.DeploymentID, EnvironmentID: a.EnvironmentID})
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
// target's desired release and, for its newest versions, every rule's
// verdict.
type Explanation struct {
	Target  release.ReleaseTarget `json:"target"`
	Desired *ports.DesiredRelease `json:"desired,omitempty"`
	Jobs    []ports.JobRow        `json:"jobs,omitempty"`
	// Forced says which force-deploy pins the target, when one does: the
	// policies below are then skipped for that version.
	Forced   string            `json:"forced,omitempty"`
	Versions []VersionVerdicts `json:"versions"`
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
	out := Explanation{Target: t, Jobs: f.Jobs, Desired: f.Desired}
	if _, why, err := c.forcedVersion(ctx, f); err != nil {
		return Explanation{}, fmt.Errorf("%s: %w", op, err)
	} else {
		out.Forced = why
	}
	for cand, err := range c.candidates(ctx, t.DeploymentID, f.policies) {
		if err != nil {
			return Explanation{}, fmt.Errorf("%s: %w", op, err)
		}
		vv := VersionVerdicts{Version: cand.Version}
		if cand.Version.Status != release.VersionReady {
			// Only ready versions are candidates; their rules do not matter.
			vv.Decision = policy.Decision{Status: policy.Denied,
				Blocking: policy.RuleVerdict{Verdict: policy.Verdict{Status: policy.Denied, Message: "version is " + string(cand.Version.Status)}}}
		} else {
			in := f.base
			in.Version, in.Approvals, in.Skips = cand.Version, cand.Approvals, cand.Skips
			vv.Decision, vv.Verdicts = policy.Evaluate(f.policies, in), policy.Explain(f.policies, in)
		}
		out.Versions = append(out.Versions, vv)
		if limit > 0 && len(out.Versions) >= limit {
			break
		}
	}
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
	s.RuleID = release.ForceDeployRule
	if s.ID == "" {
		s.ID = "force-" + s.VersionID + "-" + strconv.FormatInt(c.Clock.Now().UnixNano(), 36)
	}
	if err := c.Store.PolicySkipPut(ctx, s); err != nil {
		return s, fmt.Errorf("%s: %w", op, err)
	}
	return s, c.evaluateDeployment(ctx, ports.TargetScope{DeploymentID: v.DeploymentID, EnvironmentID: s.EnvironmentID, ResourceID: s.ResourceID})
}
