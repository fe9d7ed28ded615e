package chain

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/policy/plan"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// facts is what every controller of one target reads, in one store read
// (ports.TargetFacts): the target's objects, the enabled policies, the
// target's newest jobs, its desired release and the deployment's agent.
type facts struct {
	ports.TargetFacts
	policies []policy.Policy
	base     policy.Input
}

// load reads the facts of target t; ErrNotFound means the target is gone.
func (c *Chain) load(ctx context.Context, t release.ReleaseTarget) (*facts, error) {
	tf, ok, err := batchOf(ctx).takeFacts(t)
	if !ok {
		tf, err = c.Store.TargetFactsGet(ctx, t, historyLimit)
	}
	if err != nil {
		return nil, err
	}
	if b := batchOf(ctx); b != nil && b.override {
		tf.Policies = b.policies
	}
	f := &facts{TargetFacts: tf, policies: values(tf.Policies), base: targetInput(c.Clock.Now(), &tf.Detail)}
	f.base.Jobs = records(tf.Jobs)
	if ok {
		// Read with the batch's other targets, in one statement: one id
		// names one object among them.
		f.base.Matches = batchOf(ctx).matches
	}
	return f, nil
}

// enabledPolicies reads the enabled policies: the latest published
// revision of each; once per batch.
func (c *Chain) enabledPolicies(ctx context.Context) ([]policy.Policy, error) {
	b := batchOf(ctx)
	if b != nil && b.enabledRead {
		return b.enabled, nil
	}
	stored, err := ports.EnabledPolicies(ctx, c.Store)
	if err != nil {
		return nil, err
	}
	ps := values(stored)
	if b != nil {
		b.enabled, b.enabledRead = ps, true
	}
	return ps, nil
}

// decidedWith names the policy revisions that take part in deciding the
// target (policy.Matching), for the release to keep.
func (f *facts) decidedWith() []release.PolicyRevision {
	var out []release.PolicyRevision
	for _, i := range policy.Matching(f.policies, f.base) {
		out = append(out, release.PolicyRevision{ID: f.Policies[i].Value.ID, Revision: int(f.Policies[i].Version)})
	}
	return out
}

// targetInput is the policy input of a target's objects at now.
func targetInput(now time.Time, det *ports.TargetDetail) policy.Input {
	return policy.Input{Now: now, Deployment: det.Deployment, Environment: det.Environment, Resource: det.Resource}
}

// desiredRelease is the desired-release controller: it picks the newest
// version the policies allow for the target (or a force-deployed version,
// or after a rollback trigger the last good one), resolves the variables, stores the release
// as the target's desired release and hands off to job-dispatch. When no
// version passes it stores "no release" with the reasons and wakes itself
// when a pending rule may change.
func (c *Chain) desiredRelease(ctx context.Context, it engine.Item) engine.Outcome {
	start := time.Now()
	t, err := targetOf(it)
	if err != nil {
		return engine.Terminal(err)
	}
	f, err := c.load(ctx, t)
	if errors.Is(err, ports.ErrNotFound) {
		return engine.Done() // the target is gone
	}
	if err != nil {
		return engine.Retry(fmt.Errorf("desired release of %s: %w", t, err))
	}
	if err := c.loadPolicyFacts(ctx, f); err != nil {
		return engine.Retry(fmt.Errorf("desired release of %s: %w", t, err))
	}
	version, choice, why, snap, err := c.choose(ctx, f)
	if err != nil {
		return fail(fmt.Errorf("desired release of %s: %w", t, err))
	}
	if version == nil {
		d := ports.DesiredRelease{Target: t, Reasons: choice.Reasons, NextCheckAt: choice.NextCheckAt,
			Decision: decisionOf(it, f, nil, &choice, why, snap, nil)}
		return c.setDesired(ctx, nil, d, wakeAt(choice.NextCheckAt), func(changed bool) error {
			attrs := []slog.Attr{slog.Int("examined", choice.Examined)}
			if !choice.NextCheckAt.IsZero() {
				attrs = append(attrs, slog.Time("next_check_at", choice.NextCheckAt))
			}
			c.log(ctx, changed, KindDesiredRelease, t.Key(), "no-release", firstOr(choice.Reasons, "no version"), start, attrs...)
			return nil
		})
	}
	rel, err := c.releaseOf(ctx, f, version)
	if err != nil {
		return fail(fmt.Errorf("desired release of %s: %w", t, err))
	}
	rel.Policies = f.decidedWith()
	d := ports.DesiredRelease{Target: t, ReleaseID: rel.ID, Reasons: choice.Reasons, NextCheckAt: choice.NextCheckAt,
		Decision: decisionOf(it, f, version, &choice, why, snap, &rel)}
	return c.setDesired(ctx, &rel, d, wakeAt(choice.NextCheckAt), func(changed bool) error {
		// Always hand off, changed or not: job-dispatch is idempotent, and
		// a retried pass must not lose the hand-off of the one before. It
		// runs the job gates itself (waking when they may open), so the
		// hand-off goes straight to it, in this pass's transaction, at
		// this item's priority (a progression's wake stays ahead), with
		// the facts it would read again (handOffFacts).
		if err := c.enqueueAt(ctx, time.Time{}, it.Priority, TargetKey(KindJobDispatch, t)); err != nil {
			return err
		}
		c.handOffFacts(f, &d, &rel, version)
		attrs := []slog.Attr{slog.String("version", version.Tag), slog.String("release", ShortID(rel.ID)), slog.Int("examined", choice.Examined)}
		if len(choice.Reasons) > 0 {
			// Why newer versions wait (e.g. "v2: approval pending"): a
			// change of these reasons is a change of the decision, logged
			// at info.
			attrs = append(attrs, slog.String("waiting", strings.Join(choice.Reasons, "; ")))
		}
		c.log(ctx, changed, KindDesiredRelease, t.Key(), "release", why, start, attrs...)
		return nil
	})
}

// releaseOf is the release of version on f's target, with its variables
// resolved.
func (c *Chain) releaseOf(ctx context.Context, f *facts, version *release.DeploymentVersion) (release.Release, error) {
	vars, _, err := c.resolveVariables(ctx, &f.Detail)
	if err != nil {
		return release.Release{}, err
	}
	return release.NewRelease(f.Detail.Target, version.ID, vars, time.Time{}), nil
}

// Decide is the desired-release decision for t over the store as ctx reads
// it, taken as the desired-release controller takes it (the same reads,
// choose and release) and written nowhere: what a plan compares.
func (c *Chain) Decide(ctx context.Context, t release.ReleaseTarget) (plan.Desired, error) {
	op := "decide " + t.Key()
	f, err := c.load(ctx, t)
	if err != nil {
		return plan.Desired{}, fmt.Errorf("%s: %w", op, err)
	}
	if err := c.loadPolicyFacts(ctx, f); err != nil {
		return plan.Desired{}, fmt.Errorf("%s: %w", op, err)
	}
	version, choice, how, _, err := c.choose(ctx, f)
	if err != nil {
		return plan.Desired{}, fmt.Errorf("%s: %w", op, err)
	}
	out := plan.Desired{How: how, Reasons: choice.Reasons}
	if version == nil {
		out.How = "no-release"
		return out, nil
	}
	rel, err := c.releaseOf(ctx, f, version)
	if err != nil {
		return plan.Desired{}, fmt.Errorf("%s: %w", op, err)
	}
	out.ReleaseID, out.VersionID, out.Tag = rel.ID, version.ID, version.Tag
	return out, nil
}

// decideChunk is how many targets DecideMany reads the facts of at once.
const decideChunk = 1000

// DecideMany is Decide for every target of ts, as one batch: their facts
// read decideChunk at a time (TargetFactsGetMany, and on a
// ports.JobStateBatcher their job states in one TargetJobStateMany call
// once a target's policies ask), a deployment's versions
// and progression facts and a scope's targets read once, as a batch pass
// of the desired-release controller reads them. A target that is not
// stored is left out of the answer.
func (c *Chain) DecideMany(ctx context.Context, ts []release.ReleaseTarget) (map[release.ReleaseTarget]plan.Desired, error) {
	return c.decideMany(ctx, ts, &batch{size: len(ts)})
}

// DecideManyWith is DecideMany with policies standing in for the stored
// enabled policies (each its revision as Version; 0 for one not
// published): what the chain would decide were they the published ones,
// e.g. once a proposed policy revision is published.
func (c *Chain) DecideManyWith(policies []ports.Stored[policy.Policy]) func(context.Context, []release.ReleaseTarget) (map[release.ReleaseTarget]plan.Desired, error) {
	return func(ctx context.Context, ts []release.ReleaseTarget) (map[release.ReleaseTarget]plan.Desired, error) {
		return c.decideMany(ctx, ts, &batch{size: len(ts), policies: policies, override: true})
	}
}

// decideMany is DecideMany in batch b.
func (c *Chain) decideMany(ctx context.Context, ts []release.ReleaseTarget, b *batch) (map[release.ReleaseTarget]plan.Desired, error) {
	bctx := context.WithValue(ctx, batchKey{}, b)
	out := make(map[release.ReleaseTarget]plan.Desired, len(ts))
	for chunk := range slices.Chunk(ts, decideChunk) {
		facts, err := c.Store.TargetFactsGetMany(ctx, chunk, historyLimit)
		if err != nil {
			return nil, fmt.Errorf("decide: read facts: %w", err)
		}
		b.hold(chunk, facts)
		for _, t := range chunk {
			d, err := c.Decide(bctx, t)
			if errors.Is(err, ports.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out[t] = d
		}
	}
	return out, nil
}

// setDesired stores the target's decision d, after the release rel when
// it is set (a stored release with rel's ID is kept: IDs are content
// hashes), then calls then with whether the decision changed, and returns
// out; a failed write or then is the outcome instead. In a batch pass of
// several items on a store that is a ports.DesiredBatcher, the write joins
// the other items' in one call once they have all run (writeDesired),
// then runs after it, and out is the outcome unless the write fails.
func (c *Chain) setDesired(ctx context.Context, rel *release.Release, d ports.DesiredRelease, out engine.Outcome, then func(changed bool) error) engine.Outcome {
	if b := batchOf(ctx); b != nil && b.size > 1 {
		if _, ok := c.Store.(ports.DesiredBatcher); ok {
			b.desired = append(b.desired, pendingDesired{i: b.cur, write: ports.DesiredWrite{Release: rel, Desired: d}, then: then})
			return out
		}
	}
	if rel != nil {
		if _, _, err := c.Store.ReleaseUpsert(ctx, *rel); err != nil {
			return fail(fmt.Errorf("desired release of %s: %w", d.Target, err))
		}
	}
	changed, err := c.Store.DesiredSet(ctx, d)
	if err == nil {
		err = then(changed)
	}
	if err != nil {
		return engine.Retry(fmt.Errorf("desired release of %s: %w", d.Target, err))
	}
	return out
}

// wakeAt is RequeueAt(t), or Done when t is zero.
func wakeAt(t time.Time) engine.Outcome {
	if t.IsZero() {
		return engine.Done()
	}
	return engine.RequeueAt(t)
}

func firstOr(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}

// forcedVersion is the newest version force-deployed on the target at now
// (nil: none), with the reason for the log and the decision.
func (c *Chain) forcedVersion(ctx context.Context, f *facts) (*release.DeploymentVersion, string, error) {
	var best *release.DeploymentVersion
	var why string
	t, now := f.Detail.Target, f.base.Now
	for i := range f.Forced {
		sk := &f.Forced[i]
		if !sk.Applies(sk.VersionID, release.ForceDeployRule, t, now) || (best != nil && best.ID == sk.VersionID) {
			continue
		}
		v, err := c.Store.VersionGet(ctx, sk.VersionID)
		if errors.Is(err, ports.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		if best == nil || v.CreatedAt.After(best.CreatedAt) || (v.CreatedAt.Equal(best.CreatedAt) && v.ID > best.ID) {
			best = &v
			why = "force-deployed " + v.Tag
			if sk.CreatedBy != "" {
				why += " by " + sk.CreatedBy
			}
			if sk.Reason != "" {
				why += ": " + sk.Reason
			}
		}
	}
	return best, why, nil
}

// choose applies a force-deploy, then the rollback rules (returning to the
// last good version unless it is no longer a candidate, e.g. rejected),
// then streams the versions newest first through policy.Choose. It returns
// the version (nil: none), the choice and a reason code for the log.
//
// The snapshot is the choice's input, replayable through
// policy.ChooseSnapshot.Replay to the same choice.
func (c *Chain) choose(ctx context.Context, f *facts) (*release.DeploymentVersion, policy.Choice, string, *policy.ChooseSnapshot, error) {
	snap := &policy.ChooseSnapshot{Kind: policy.SnapshotKind, Target: f.Detail.Target, Policies: f.policies, Base: f.base, Candidates: []policy.SnapshotCandidate{}}
	if v, why, err := c.forcedVersion(ctx, f); err != nil || v != nil {
		if v != nil {
			snap.Override = &policy.Override{How: "force-deploy", Version: *v, Reason: why}
		}
		return v, policy.Choice{Reasons: []string{why}}, "force-deploy", snap, err
	}
	exclude := map[string]string{}
	rules, err := policy.MatchingRules(f.policies, f.base, policy.TypeRollback)
	if err != nil {
		return nil, policy.Choice{}, "", nil, err
	}
	for _, r := range rules {
		rb := r.Spec.(policy.Rollback)
		// Every version whose newest job here triggered the rule stays out.
		seen := map[string]bool{}
		for _, j := range f.base.Jobs {
			if seen[j.VersionID] {
				continue
			}
			seen[j.VersionID] = true
			if rb.Triggered(&j) {
				exclude[j.VersionID] = "rolled back after job " + j.ID + " ended " + string(j.Status)
			}
		}
		if d := rb.Decide(f.base.Jobs); d.Rollback {
			v, err := c.Store.VersionGet(ctx, d.VersionID)
			if err != nil {
				return nil, policy.Choice{}, "", nil, err
			}
			in := f.base
			in.Version = v
			if in.IsCandidate() { // never back to a rejected version: Choose picks then
				snap.Override = &policy.Override{How: "rollback", Version: v, Reason: d.Reason}
				return &v, policy.Choice{Reasons: []string{d.Reason}}, "rollback", snap, nil
			}
		}
	}
	if len(exclude) > 0 {
		snap.Exclude = exclude
	}
	rec := policy.Recorder{Candidates: snap.Candidates}
	ch, err := policy.Choose(policy.ChooseParams{Policies: f.policies, Base: f.base, Exclude: exclude}, rec.Wrap(c.candidates(ctx, f)))
	if err != nil {
		return nil, policy.Choice{}, "", nil, err
	}
	snap.Candidates = rec.Candidates
	return ch.Version, ch, "newest-allowed", snap, nil
}

// decisionOf is the history entry of a decision: the choice ch (how) of
// version over snap, with the release rel (nil: none) and the item that
// ran the pass.
func decisionOf(it engine.Item, f *facts, version *release.DeploymentVersion, ch *policy.Choice, how string, snap *policy.ChooseSnapshot, rel *release.Release) *ports.TargetDecision {
	d := &ports.TargetDecision{How: how, Reasons: ch.Reasons, NextCheckAt: ch.NextCheckAt, Policies: f.decidedWith(), Snapshot: snap,
		Trigger: fmt.Sprintf("event %s, attempt %d", it.EventTime.UTC().Format(time.RFC3339), it.Attempt)}
	if version == nil {
		d.How = "no-release"
	} else {
		d.VersionID, d.Tag = version.ID, version.Tag
	}
	if rel != nil {
		d.ReleaseID = rel.ID
	}
	if snap != nil {
		d.Verdicts = snap.Verdicts(ch)
		if n := snap.Facts(); n > ports.MaxDecisionSnapshotFacts {
			d.Snapshot = nil
			d.SnapshotOmitted = fmt.Sprintf("the snapshot held %d facts (targets, jobs), over the %d a recorded decision keeps", n, ports.MaxDecisionSnapshotFacts)
		}
	}
	return d
}

// candidates streams the deployment's versions of f's target newest first
// with their approvals and skips, and the progression facts of each when a
// progression rule applies to the target, read one version at a time as
// Choose asks; without policies no rule reads approvals or skips, so they
// are not read.
func (c *Chain) candidates(ctx context.Context, f *facts) iter.Seq2[policy.Candidate, error] {
	deploymentID, policies := f.Detail.Deployment.ID, f.policies
	var prog *progression
	if len(policies) > 0 && f.readsProgression() {
		prog = progressionOf(ctx, deploymentID)
	}
	return func(yield func(policy.Candidate, error) bool) {
		for v, err := range c.versionsNewestFirst(ctx, deploymentID) {
			if err != nil {
				yield(policy.Candidate{}, err)
				return
			}
			cand := policy.Candidate{Version: v}
			if v.Status == release.VersionReady && len(policies) > 0 {
				cand.Approvals, cand.Skips, err = c.versionGrants(ctx, v.ID)
				if err == nil && prog != nil {
					cand.Environments, err = prog.environments(ctx, c, f, v.ID)
				}
				if err != nil {
					yield(policy.Candidate{}, err)
					return
				}
			}
			if !yield(cand, nil) {
				return
			}
		}
	}
}

// grants are a version's approvals and policy skips.
type grants struct {
	approvals []release.Approval
	skips     []release.PolicySkip
}

// versionGrants reads a version's approvals (in every environment) and
// policy skips; in a batch, once per version for all its items.
func (c *Chain) versionGrants(ctx context.Context, versionID string) ([]release.Approval, []release.PolicySkip, error) {
	b := batchOf(ctx)
	if g, ok := b.grantsOf(versionID); ok {
		return g.approvals, g.skips, nil
	}
	approvals, err := c.Store.ApprovalList(ctx, versionID, "")
	if err != nil {
		return nil, nil, err
	}
	skips, err := c.Store.PolicySkipList(ctx, versionID)
	if err != nil {
		return nil, nil, err
	}
	if b != nil {
		if b.grants == nil {
			b.grants = map[string]grants{}
		}
		b.grants[versionID] = grants{approvals: approvals, skips: skips}
	}
	return approvals, skips, nil
}

// grantsOf is the grants of a version the batch read already.
func (b *batch) grantsOf(versionID string) (grants, bool) {
	if b == nil {
		return grants{}, false
	}
	g, ok := b.grants[versionID]
	return g, ok
}

// versionPage is the newest versions of a deployment as a batch read them:
// all of them when complete, else the first page.
type versionPage struct {
	versions []release.DeploymentVersion
	complete bool
}

// versionsNewestFirst streams the deployment's versions newest first
// (Store.VersionsNewestFirst); in a batch the first page is read once for
// every item of the batch, and a stream that goes past it continues
// strictly below its last version.
func (c *Chain) versionsNewestFirst(ctx context.Context, deploymentID string) iter.Seq2[release.DeploymentVersion, error] {
	b := batchOf(ctx)
	if b == nil {
		return c.Store.VersionsNewestFirst(ctx, deploymentID, 0)
	}
	return func(yield func(release.DeploymentVersion, error) bool) {
		page := b.versions[deploymentID]
		if page == nil {
			page = &versionPage{complete: true}
			// One page, and one more version to tell whether it is all.
			for v, err := range c.Store.VersionsNewestFirst(ctx, deploymentID, ports.DefaultVersionPageSize+1) {
				if err != nil {
					yield(release.DeploymentVersion{}, err)
					return
				}
				if len(page.versions) == ports.DefaultVersionPageSize {
					page.complete = false
					break
				}
				page.versions = append(page.versions, v)
			}
			if b.versions == nil {
				b.versions = map[string]*versionPage{}
			}
			b.versions[deploymentID] = page
		}
		for _, v := range page.versions {
			if !yield(v, nil) {
				return
			}
		}
		if page.complete || len(page.versions) == 0 {
			return
		}
		last := page.versions[len(page.versions)-1]
		for v, err := range c.Store.VersionsNewestFirst(ctx, deploymentID, 0) {
			if err == nil && !olderVersion(&v, &last) {
				continue // up to the cached page's last, already yielded
			}
			if !yield(v, err) || err != nil {
				return
			}
		}
	}
}

// olderVersion reports whether a comes after b in the newest-first order
// (created_at desc, id desc).
func olderVersion(a, b *release.DeploymentVersion) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	return a.ID < b.ID
}

// loadPolicyFacts reads what the enabled policies' rules need beyond the
// target itself, and only that: the active and successful versions (cooldown,
// rollout), the deployment's targets in the target's environment (rollout) and the other
// deployments on the resource (dependency). Progression facts depend on
// the version: candidates reads them per version (progression).
func (c *Chain) loadPolicyFacts(ctx context.Context, f *facts) error {
	in, t := &f.base, f.Detail.Target
	if len(f.policies) == 0 {
		return nil
	}
	st, err := c.jobState(ctx, t)
	if err != nil {
		return err
	}
	if st.Active != nil {
		in.ActiveVersion = &st.Active.Version
	}
	if st.Successful != nil {
		in.SuccessfulVersion = &st.Successful.Version
	}
	if policy.HasRule(f.policies, policy.TypeGradualRollout) {
		// Rollout positions count the targets of the deployment in the
		// target's environment.
		scope := ports.TargetScope{DeploymentID: t.DeploymentID, EnvironmentID: t.EnvironmentID}
		if in.DeploymentTargets, in.RolloutOrder, err = c.scopeRollout(ctx, scope); err != nil {
			return err
		}
	}
	if policy.HasRule(f.policies, policy.TypeDeploymentDependency) {
		onResource, err := c.Store.TargetList(ctx, ports.TargetListParams{Scope: ports.TargetScope{ResourceID: t.ResourceID}})
		if err != nil {
			return err
		}
		for _, ot := range onResource {
			if ot.DeploymentID == t.DeploymentID {
				continue
			}
			d, err := c.Store.Deployments().Get(ctx, ot.DeploymentID)
			if err != nil {
				return err
			}
			dep := policy.DependencyState{Deployment: d.Value}
			st, err := c.jobState(ctx, ot)
			if err != nil {
				return err
			}
			if st.Successful != nil {
				dep.Version = &st.Successful.Version
			}
			in.Dependencies = append(in.Dependencies, dep)
		}
	}
	return nil
}

// resolveVariables resolves the deployment's variables for the target
// (release.ResolveVariables: resource, deployment value, variable set,
// default), then their references through the relationship rules of the
// resource's workspace over the workspace's resources
// (release.ResolveReferences), which are read only when a reference is
// left to resolve. The relations say how each reference was resolved.
func (c *Chain) resolveVariables(ctx context.Context, det *ports.TargetDetail) (map[string]release.Value, []release.Relation, error) {
	s := release.Subject{Deployment: &det.Deployment, Environment: &det.Environment, Resource: &det.Resource}
	vars, _, err := release.ResolveVariables(&s, det.VariableSets, release.CEL{})
	if err != nil || !hasReference(vars) {
		return vars, nil, err
	}
	rf, err := c.relationFacts(ctx, det.Resource.WorkspaceID)
	if err != nil {
		return nil, nil, err
	}
	vars, rels := release.ResolveReferences(vars, &det.Resource, rf.rules, rf.resources)
	return vars, rels, nil
}

// relationFacts are a workspace's relationship rules and, when it has
// any, its resources: the candidates of its relations.
type relationFacts struct {
	rules     []release.RelationshipRule
	resources []release.Resource
}

// relationFacts reads the relation facts of workspace ws, once per batch.
func (c *Chain) relationFacts(ctx context.Context, ws string) (*relationFacts, error) {
	b := batchOf(ctx)
	if b != nil {
		if rf, ok := b.related[ws]; ok {
			return rf, nil
		}
	}
	rules, err := ports.ListAll(ctx, c.Store.RelationshipRules(), ws)
	if err != nil {
		return nil, fmt.Errorf("relationship rules of workspace %s: %w", ws, err)
	}
	rf := &relationFacts{rules: values(rules)}
	if len(rules) > 0 {
		res, err := ports.ListAll(ctx, c.Store.Resources(), ws)
		if err != nil {
			return nil, fmt.Errorf("resources of workspace %s: %w", ws, err)
		}
		rf.resources = values(res)
	}
	if b != nil {
		if b.related == nil {
			b.related = map[string]*relationFacts{}
		}
		b.related[ws] = rf
	}
	return rf, nil
}

// hasReference reports whether a value of vals is a reference.
func hasReference(vals map[string]release.Value) bool {
	for _, v := range vals {
		if v.Reference != nil {
			return true
		}
	}
	return false
}
