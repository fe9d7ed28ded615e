package ports

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"iter"
	"strconv"
	"time"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Stored is a catalog object as the release store keeps it: the value with
// its compare-and-swap token.
type Stored[T any] struct {
	Value T `json:"value"`
	// Version is the compare-and-swap token: every write bumps it.
	Version   int64     `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
}

// TargetScope selects release targets by the non-empty fields, all of which
// must match.
type TargetScope struct {
	SystemID      string `json:"system_id,omitempty"`
	DeploymentID  string `json:"deployment_id,omitempty"`
	EnvironmentID string `json:"environment_id,omitempty"`
	ResourceID    string `json:"resource_id,omitempty"`
}

// IsZero reports whether the scope selects every target.
func (s TargetScope) IsZero() bool { return s == TargetScope{} }

// Contains reports whether target t (of a deployment in systemID) is in s.
func (s TargetScope) Contains(t release.ReleaseTarget, systemID string) bool {
	return (s.SystemID == "" || s.SystemID == systemID) &&
		(s.DeploymentID == "" || s.DeploymentID == t.DeploymentID) &&
		(s.EnvironmentID == "" || s.EnvironmentID == t.EnvironmentID) &&
		(s.ResourceID == "" || s.ResourceID == t.ResourceID)
}

// TargetsReplaceParams replaces the stored targets of Scope by Targets, as
// recomputed by release.ComputeTargets after a deployment, environment or
// resource changed.
type TargetsReplaceParams struct {
	// Scope is what was recomputed; it must not be zero.
	Scope TargetScope
	// Targets are the scope's targets now; each must lie in Scope, name a
	// stored deployment, environment and resource, and pair a deployment
	// and an environment of the same system.
	Targets []release.ReleaseTarget
}

// TargetsDiff is what a replacement changed, each list sorted by key.
type TargetsDiff struct {
	Added   []release.ReleaseTarget `json:"added,omitempty"`
	Removed []release.ReleaseTarget `json:"removed,omitempty"`
}

// TargetListParams lists targets of a scope in key order, a page at a time.
type TargetListParams struct {
	Scope TargetScope
	// AfterKey continues a listing after this target key.
	AfterKey string
	// Limit is the most targets returned; zero or less means all.
	Limit int
}

// ScopeTargetsParams names the deployment and environment whose targets
// ScopeTargets reads (both required), and the generation of them the
// caller holds already (zero: none).
type ScopeTargetsParams struct {
	DeploymentID  string
	EnvironmentID string
	Known         int64
}

// Validate names the first missing field.
func (p ScopeTargetsParams) Validate() error {
	if p.DeploymentID == "" {
		return release.Invalid("deployment_id", "is required")
	}
	if p.EnvironmentID == "" {
		return release.Invalid("environment_id", "is required")
	}
	return nil
}

// ScopeTargets is a deployment's targets in an environment as of one
// generation. Targets is set only when Changed: when Generation is not
// the generation the caller held.
type ScopeTargets struct {
	// Generation names the scope's list of targets: every write that adds
	// or removes one of its targets gives it a new generation, one never
	// given before (even by a write rolled back). Zero is the scope that
	// never held a target, whose list is empty.
	Generation int64
	Changed    bool
	// Targets is the scope's targets in key order, as of Generation.
	Targets []release.ReleaseTarget
}

// TargetDetail is a target with its system, deployment, environment and
// resource, and the variable sets of its system (in id order), read
// together.
type TargetDetail struct {
	Target       release.ReleaseTarget `json:"target"`
	System       release.System        `json:"system"`
	VariableSets []release.VariableSet `json:"variable_sets,omitempty"`
	Deployment   release.Deployment    `json:"deployment"`
	Environment  release.Environment   `json:"environment"`
	Resource     release.Resource      `json:"resource"`
	CreatedAt    time.Time             `json:"created_at"`
}

// TargetFacts is what one pass of a release-chain controller reads about a
// target, returned by one call so a pass costs one round trip.
type TargetFacts struct {
	Detail TargetDetail `json:"detail"`
	// Jobs are the target's newest jobs first, as JobsByTarget.
	Jobs []JobRow `json:"jobs,omitempty"`
	// Desired is the target's stored decision; nil when none is stored.
	Desired *DesiredRelease `json:"desired,omitempty"`
	// Release is the desired release and Version its deployment version;
	// nil when the decision is "no release".
	Release *release.Release           `json:"release,omitempty"`
	Version *release.DeploymentVersion `json:"version,omitempty"`
	// Agent is the deployment's job agent; nil when the deployment names
	// none or it does not exist.
	Agent *Stored[release.JobAgent] `json:"agent,omitempty"`
	// Policies are the enabled policies, as EnabledPolicies: the latest
	// published revision of each, Version being the revision number.
	Policies []Stored[policy.Policy] `json:"policies,omitempty"`
	// Forced are the force-deploy skips (release.ForceDeployRule) of the
	// deployment's versions whose scope covers the target, expired ones
	// included (the caller judges expiry by its clock), by id.
	Forced []release.PolicySkip `json:"forced,omitempty"`
	// Stamp is the facts' FactsStamp, read with them.
	Stamp FactsStamp `json:"-"`
}

// FactsStamp is a small summary of a target's facts, read for many targets
// at once (TargetStampMany) far more cheaply than the facts: two stamps of
// a target read by one store are equal when the facts job-dispatch acts on
// are. It covers the desired release (ReleaseID; a release's content never
// changes) and, digested in Rest, the target's creation, the versions of
// its system, deployment, environment, resource and the deployment's job
// agent, the ids and versions of its newest jobs and the revisions of the
// published policies. It does not cover the variable sets or the
// force-deploy skips, nor the decision's reasons.
type FactsStamp struct {
	// ReleaseID is the desired release ("" when there is none).
	ReleaseID string
	// ReleaseCreatedAt is that release's creation time (zero when none):
	// carried, not compared.
	ReleaseCreatedAt time.Time
	// Rest is an opaque digest of the other facts covered, comparable only
	// with another of the same store and job limit (FactsDigest).
	Rest string
}

// Matches reports whether s and o stamp the same facts (ReleaseCreatedAt
// aside).
func (s FactsStamp) Matches(o FactsStamp) bool {
	return s.ReleaseID == o.ReleaseID && s.Rest == o.Rest
}

// FactsDigest is a FactsStamp.Rest of parts, in order: times are taken in
// UTC, anything else as fmt prints it.
func FactsDigest(parts ...any) string {
	h := sha256.New()
	for _, p := range parts {
		if t, ok := p.(time.Time); ok {
			p = t.UTC().Format(time.RFC3339Nano)
		}
		fmt.Fprintf(h, "%v\x00", p)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// DesiredRelease is the desired-release controller's latest decision for a
// target: the release it should run, or none with the reasons.
type DesiredRelease struct {
	Target release.ReleaseTarget `json:"target"`
	// ReleaseID is the release to run; empty means "no release".
	ReleaseID string `json:"release_id,omitempty"`
	// Reasons explain the decision (for "no release", why not).
	Reasons []string `json:"reasons,omitempty"`
	// NextCheckAt is the earliest time a pending rule could change the
	// decision; zero when only an event can.
	NextCheckAt time.Time `json:"next_check_at,omitzero"`
	// UpdatedAt is stamped by the store when the decision last changed.
	UpdatedAt time.Time `json:"updated_at"`
	// Decision, when set, is recorded in the target's decision history
	// (Releases.TargetDecisions) by the write that changes the decision,
	// stamped with its time; an unchanged decision records nothing. It is
	// never read back with the decision.
	Decision *TargetDecision `json:"-"`
}

// TargetDecisionsKept is how many decisions a store keeps per target: the
// newest.
const TargetDecisionsKept = 20

// TargetDecision is one entry of a release target's decision history: a
// desired-release decision as the chain took it.
type TargetDecision struct {
	// Seq numbers the target's recorded decisions, increasing; At is the
	// write's time. Both are stamped by the store.
	Seq int64     `json:"seq"`
	At  time.Time `json:"at"`
	// How is how the version was chosen: newest-allowed (policy.Choose),
	// force-deploy, rollback, or no-release.
	How string `json:"how"`
	// ReleaseID, VersionID and Tag name the chosen release; empty for no
	// release.
	ReleaseID string `json:"release_id,omitempty"`
	VersionID string `json:"version_id,omitempty"`
	Tag       string `json:"tag,omitempty"`
	// Reasons and NextCheckAt are the decision's (DesiredRelease's).
	Reasons     []string  `json:"reasons,omitempty"`
	NextCheckAt time.Time `json:"next_check_at,omitzero"`
	// Verdicts are every rule's verdict on the chosen version, or on the
	// newest version examined when none was chosen.
	Verdicts []policy.RuleVerdict `json:"verdicts,omitempty"`
	// Policies are the policy revisions that took part (policy.Matching).
	Policies []release.PolicyRevision `json:"policies,omitempty"`
	// Trigger is what ran the pass: the work item's event time and
	// attempt ("event 2026-11-28T10:00:00Z, attempt 1").
	Trigger string `json:"trigger,omitempty"`
	// Snapshot is the decision's input, replayable by reconciler decide
	// (policy.ChooseSnapshot; docs/target-decision-format.md); nil when it
	// held more facts than a recorded decision keeps (SnapshotOmitted).
	Snapshot *policy.ChooseSnapshot `json:"snapshot,omitempty"`
	// SnapshotOmitted says why Snapshot was not kept.
	SnapshotOmitted string `json:"snapshot_omitted,omitempty"`
}

// MaxDecisionSnapshotFacts bounds the facts (targets, jobs, environment
// states' targets: policy.ChooseSnapshot.Facts) of a snapshot a recorded
// decision keeps. A gradual rollout's or a progression's snapshot holds
// every target of its deployment or environment: kept for each target's
// every decision, it would make the history grow with the square of the
// deployment's size.
const MaxDecisionSnapshotFacts = 256

// JobRow is a stored job with what queries need beside it.
type JobRow struct {
	release.Job
	// VersionID is the deployment version of the job's release.
	VersionID string `json:"version_id"`
	// IdempotencyKey made the job's creation idempotent (see JobKey).
	IdempotencyKey string `json:"idempotency_key"`
	// Version is the compare-and-swap token: every write bumps it.
	Version   int64     `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
	// Workflow is set on the job of a workflow task (WorkflowJobs): its
	// workflow, task and TaskRun; nil on the release chain's jobs.
	Workflow *WorkflowJobRef `json:"workflow,omitempty" doc:"set on a workflow task's job: its workflow, task and TaskRun"`
}

// Target is the job's release target.
func (j *JobRow) Target() release.ReleaseTarget {
	t, _ := release.ParseTargetKey(j.TargetKey)
	return t
}

// Record is the job as the policy rules read it.
func (j *JobRow) Record() policy.JobRecord {
	return policy.JobRecord{Job: j.Job, VersionID: j.VersionID}
}

// JobCreateParams creates a job once per idempotency key.
type JobCreateParams struct {
	// Job is the job to create; its release must be stored and its
	// TargetKey must be the release's target.
	Job release.Job
	// IdempotencyKey is unique across jobs: a second create with the same
	// key returns the first job. The chain uses JobKey(releaseID, attempt),
	// suffixed with the job a later run of the release follows.
	IdempotencyKey string
	// MaxActiveInEnvironment, when > 0, caps the active jobs of the job's
	// deployment in its environment (policy.Concurrency's per-environment
	// limit): an active job is created only while fewer are active, checked
	// atomically with the insert, so concurrent creates for different
	// targets of one environment never exceed it. At the cap nothing is
	// created and the error is ErrLimitReached (a job already created with
	// the key is still returned).
	MaxActiveInEnvironment int
}

// JobCreated is one result of Jobs.JobCreateMany: what JobCreate returns
// for its create.
type JobCreated struct {
	Row     JobRow
	Created bool
	Err     error
}

// JobCreateEach is JobCreateMany one create at a time on s.
func JobCreateEach(ctx context.Context, s Jobs, creates []JobCreateParams) []JobCreated {
	out := make([]JobCreated, len(creates))
	for i, p := range creates {
		out[i].Row, out[i].Created, out[i].Err = s.JobCreate(ctx, p)
	}
	return out
}

// JobUpdateParams is one compare-and-swap write of JobUpdateMany.
type JobUpdateParams struct {
	Job             release.Job
	ExpectedVersion int64
}

// JobKey is the idempotency key of a release's attempt-th job (1-based), so
// a retried dispatch of the same attempt never creates a second job.
func JobKey(releaseID string, attempt int) string {
	return releaseID + "/" + strconv.Itoa(attempt)
}

// JobsLatestParams asks for the newest job of each target among the jobs
// matching every non-empty filter. At least one of DeploymentID, ResourceID
// and VersionID is required.
type JobsLatestParams struct {
	DeploymentID  string
	EnvironmentID string
	ResourceID    string
	// VersionID keeps jobs of releases of this deployment version.
	VersionID string
	// Statuses keeps jobs in one of these statuses; empty keeps all.
	Statuses []release.JobStatus
}

// JobActiveCounts counts active jobs (release.JobStatus.IsActive) for the
// concurrency rule.
type JobActiveCounts struct {
	// Target counts the target's active jobs.
	Target int `json:"target"`
	// Environment counts the active jobs of the target's deployment in the
	// target's environment, on every resource.
	Environment int `json:"environment"`
}

// JobWithVersion is a job with its deployment version.
type JobWithVersion struct {
	Job     JobRow                    `json:"job"`
	Version release.DeploymentVersion `json:"version"`
}

// TargetJobState is what a target runs: its newest active job and its newest
// successful job, each with its version; nil when there is none.
type TargetJobState struct {
	Active     *JobWithVersion `json:"active,omitempty"`
	Successful *JobWithVersion `json:"successful,omitempty"`
}

// DefaultVersionPageSize is the page size of VersionsNewestFirst when the
// caller gives none; MaxVersionPageSize caps it.
const (
	DefaultVersionPageSize = 100
	MaxVersionPageSize     = 1000
)

// NewestKey is an item's position in a newest-first keyset listing ordered
// by (created_at desc, id desc): a page that continues after it starts
// with the next older item, whatever was created meanwhile above it.
type NewestKey struct {
	CreatedAt time.Time `json:"created_at"`
	ID        string    `json:"id"`
}

// VersionPageParams asks for one page of a deployment's versions, newest
// first.
type VersionPageParams struct {
	DeploymentID string
	// After continues below this version's key; nil starts at the newest.
	After *NewestKey
	// Limit is the page size, normalised by VersionPageSize.
	Limit int
}

// JobListParams lists jobs across targets, newest first by (created_at
// desc, id desc), keeping those that match every non-empty filter.
type JobListParams struct {
	// Statuses keeps jobs in one of these statuses; empty keeps all.
	Statuses      []release.JobStatus
	JobAgentID    string
	DeploymentID  string
	EnvironmentID string
	ResourceID    string
	// VersionID keeps jobs of releases of this deployment version.
	VersionID string
	// WorkspaceID keeps jobs whose deployment's system is in the workspace.
	WorkspaceID string
	// After continues below this job's key; nil starts at the newest.
	After *NewestKey
	// Limit is the page size, normalised by VersionPageSize.
	Limit int
}

// ValidateJobList checks a JobList query's statuses and cursor.
func ValidateJobList(p *JobListParams) error {
	for i, s := range p.Statuses {
		if !s.Valid() {
			return release.Invalid(release.Index("statuses", i), "unknown job status "+strconv.Quote(string(s)))
		}
	}
	if p.After != nil && p.After.ID == "" {
		return release.Invalid("after.id", "is required")
	}
	return nil
}

// ValidateVersionPage checks a VersionsPage query's cursor.
func ValidateVersionPage(p *VersionPageParams) error {
	if p.After != nil && p.After.ID == "" {
		return release.Invalid("after.id", "is required")
	}
	return nil
}

// Follows reports whether an item created at createdAt with id comes after
// k in a newest-first listing (it is older, or as old with a smaller id).
func (k *NewestKey) Follows(createdAt time.Time, id string) bool {
	if c := createdAt.Compare(k.CreatedAt); c != 0 {
		return c < 0
	}
	return id < k.ID
}

// VersionPageSize normalises a requested page size.
func VersionPageSize(n int) int {
	switch {
	case n <= 0:
		return DefaultVersionPageSize
	case n > MaxVersionPageSize:
		return MaxVersionPageSize
	}
	return n
}

// ReleaseStore is everything a release-chain adapter provides: the simple
// kinds (ObjectStore), the small ports beside them, and the Catalog, whose
// published policy revisions the chain evaluates (EnabledPolicies; the
// TargetFacts read includes them). Controllers depend
// on the parts they use; an adapter implements them all on one store so
// they share its transactions.
//
// Invariants shared by every part (each part's suite in porttest checks
// its own):
//   - Every write validates first (the domain type's Validate, then the
//     store's own checks) and refuses bad input with a *release.FieldError
//     (errors.Is release.ErrInvalid) naming the field, with the CEL line
//     and column for a bad selector; a refused write changes nothing.
//   - Reads return copies; lists have a stated, deterministic order.
//     Times are kept in UTC at microsecond precision.
type ReleaseStore interface {
	ObjectStore
	Catalog
	Targets
	Versions
	Releases
	Jobs
	TargetFactsReader
	Events
}

// Targets stores the release targets computed from the catalog
// (release.ComputeTargets). Checked by porttest.Targets.
type Targets interface {
	// TargetsReplace makes the scope's stored targets exactly p.Targets and
	// reports the difference, atomically.
	TargetsReplace(ctx context.Context, p TargetsReplaceParams) (TargetsDiff, error)
	// TargetGet reads a stored target with its deployment, environment and
	// resource in one read.
	TargetGet(ctx context.Context, t release.ReleaseTarget) (TargetDetail, error)
	// TargetList lists the targets of a scope (zero: all) in key order.
	TargetList(ctx context.Context, p TargetListParams) ([]release.ReleaseTarget, error)
	// ScopeTargets reads the generation of a deployment's targets in an
	// environment and, only when it is not p.Known, their list, both as
	// of one moment: a list is never paired with a generation newer than
	// its contents. It lets a reader keep a scope's list and re-read it
	// only when it changed (the chain's rollout order).
	ScopeTargets(ctx context.Context, p ScopeTargetsParams) (ScopeTargets, error)
}

// TargetFactsReader is the one read a release-chain pass makes about a
// target. Checked by porttest.TargetFacts.
type TargetFactsReader interface {
	// TargetFactsGet reads t's TargetFacts with its newest jobLimit jobs
	// (zero or less: all). A missing target is ErrNotFound. Postgres reads
	// it in one statement, hence from one snapshot.
	TargetFactsGet(ctx context.Context, t release.ReleaseTarget, jobLimit int) (TargetFacts, error)
	// TargetFactsGetMany reads the TargetFacts of every stored target of
	// ts at once, each as TargetFactsGet would, keyed by target; a target
	// that is not stored is absent from the map. Postgres reads them in
	// one statement.
	TargetFactsGetMany(ctx context.Context, ts []release.ReleaseTarget, jobLimit int) (map[release.ReleaseTarget]TargetFacts, error)
	// TargetStampMany reads the FactsStamp of every stored target of ts,
	// each equal to the Stamp of its TargetFactsGet with jobLimit when
	// nothing changed between the two reads, keyed by target; a target
	// that is not stored is absent. Postgres reads them in one statement.
	TargetStampMany(ctx context.Context, ts []release.ReleaseTarget, jobLimit int) (map[release.ReleaseTarget]FactsStamp, error)
}

// Versions stores deployment versions with their approvals and policy
// skips. Invariants (checked by porttest.Versions):
//   - Versions stream newest first, ordered by (created_at desc, id desc),
//     in keyset pages read lazily: breaking out of the loop reads no
//     further page. Each page continues below the last version yielded, so
//     a version created meanwhile above it is not seen.
//   - A write whose deployment or version is missing is ErrNotFound.
type Versions interface {
	// VersionCreate stores a new version of a stored deployment; an
	// existing id is ErrConflict.
	VersionCreate(ctx context.Context, v release.DeploymentVersion) error
	// VersionGet reads one version.
	VersionGet(ctx context.Context, id string) (release.DeploymentVersion, error)
	// VersionUpdateStatus sets a version's status.
	VersionUpdateStatus(ctx context.Context, id string, status release.VersionStatus) error
	// VersionsNewestFirst streams a deployment's versions by (created_at
	// desc, id desc), reading pageSize (see VersionPageSize) at a time and
	// only when the loop asks for more. An error is yielded once, last.
	VersionsNewestFirst(ctx context.Context, deploymentID string, pageSize int) iter.Seq2[release.DeploymentVersion, error]
	// VersionsPage reads one keyset page of a deployment's versions in the
	// same order: the versions below p.After (from the newest when nil), at
	// most p.Limit, reading only that page (O(page), whatever the cursor's
	// depth).
	VersionsPage(ctx context.Context, p VersionPageParams) ([]release.DeploymentVersion, error)

	// ApprovalAdd records an approval of a stored version; it reports false
	// and keeps the first record when the user already approved the
	// version in that environment.
	ApprovalAdd(ctx context.Context, a release.Approval) (bool, error)
	// ApprovalList lists a version's approvals, in one environment or all
	// (environmentID empty), by approval time, then environment, then user.
	ApprovalList(ctx context.Context, versionID, environmentID string) ([]release.Approval, error)
	// PolicySkipPut creates or replaces a policy skip (by ID, required) of
	// a stored version.
	PolicySkipPut(ctx context.Context, s release.PolicySkip) error
	// PolicySkipList lists a version's skips by id.
	PolicySkipList(ctx context.Context, versionID string) ([]release.PolicySkip, error)
	// PolicySkipDelete removes a skip.
	PolicySkipDelete(ctx context.Context, id string) error
}

// Releases stores releases and each target's desired release. Invariants
// (checked by porttest.Releases):
//   - A release is stored once per content-hash ID: upserting identical
//     content returns the stored release.
//   - A desired release names a stored release of its target, or none.
type Releases interface {
	// ReleaseUpsert stores r (whose ID must be its content hash and whose
	// version must be a stored version of the target's deployment) unless
	// a release with that ID exists; it returns the stored release and
	// whether it was created. A zero CreatedAt is stamped by the store.
	ReleaseUpsert(ctx context.Context, r release.Release) (release.Release, bool, error)
	// ReleaseGet reads one release.
	ReleaseGet(ctx context.Context, id string) (release.Release, error)
	// DesiredSet records the target's desired release (a stored release of
	// that target, or none) and reports whether it differs from the stored
	// decision; an unchanged decision is not rewritten.
	DesiredSet(ctx context.Context, d DesiredRelease) (bool, error)
	// DesiredGet reads the target's desired release.
	DesiredGet(ctx context.Context, t release.ReleaseTarget) (DesiredRelease, error)
	// TargetDecisions returns up to limit of the target's recorded
	// decisions, newest first (limit <= 0 or above TargetDecisionsKept
	// means TargetDecisionsKept); a target with none has an empty history.
	TargetDecisions(ctx context.Context, t release.ReleaseTarget, limit int) ([]TargetDecision, error)
}

// DesiredWrite is one target's decision for DesiredBatcher: Release, when
// set, is stored first (as by ReleaseUpsert) and Desired.ReleaseID names
// it.
type DesiredWrite struct {
	Release *release.Release
	Desired DesiredRelease
}

// DesiredWritten is the result of one DesiredWrite: whether the decision
// differed from the stored one (DesiredSet's answer), or why it was not
// written.
type DesiredWritten struct {
	Changed bool
	Err     error
}

// DesiredBatcher is a Releases store that writes many targets' decisions
// in one call. DesiredSetMany does for each write what ReleaseUpsert (when
// it has a release) then DesiredSet do, with one result per write, in
// order, leaving what those calls would leave one write at a time (a
// stored release stays when its decision fails); a failed write does not
// stop the others. The chain's desired-release passes use it when the store has it
// (checked by porttest.Releases, against DesiredSetEach).
type DesiredBatcher interface {
	DesiredSetMany(ctx context.Context, writes []DesiredWrite) []DesiredWritten
}

// JobStateBatcher is a store that reads the TargetJobState of many
// targets in one call: for each target of ts, what TargetJobState answers
// (the zero state for a target without jobs, also when it is left out of
// the map); and their desired releases: what DesiredGet answers, a target
// without one left out. The chain's plan (DecideMany) and the API's target
// list use it when the store has it (checked by porttest.Releases, against
// TargetJobState and DesiredGet).
type JobStateBatcher interface {
	TargetJobStateMany(ctx context.Context, ts []release.ReleaseTarget) (map[release.ReleaseTarget]TargetJobState, error)
	DesiredGetMany(ctx context.Context, ts []release.ReleaseTarget) (map[release.ReleaseTarget]DesiredRelease, error)
}

// DesiredSetEach is DesiredSetMany one write at a time on s.
func DesiredSetEach(ctx context.Context, s Releases, writes []DesiredWrite) []DesiredWritten {
	out := make([]DesiredWritten, len(writes))
	for i, w := range writes {
		if w.Release != nil {
			if _, _, err := s.ReleaseUpsert(ctx, *w.Release); err != nil {
				out[i].Err = err
				continue
			}
		}
		out[i].Changed, out[i].Err = s.DesiredSet(ctx, w.Desired)
	}
	return out
}

// Jobs stores jobs: creation under an idempotency key and the
// per-environment cap, compare-and-swap updates along release.JobEdges,
// and the queries the policy rules need. Invariants (checked by
// porttest.Jobs):
//   - A job is created once per idempotency key, even by concurrent
//     creates; JobUpdate moves the status only along release.JobEdges and
//     never changes the release, target or creation time.
//   - A capped create never takes an environment over its cap, even when
//     targets race.
type Jobs interface {
	// JobCreate creates p.Job at version 1, or returns the job already
	// created with p.IdempotencyKey (created false). The key naming a
	// different release, or the job id being taken, is ErrConflict; a full
	// environment (p.MaxActiveInEnvironment) is ErrLimitReached.
	JobCreate(ctx context.Context, p JobCreateParams) (JobRow, bool, error)
	// JobCreateMany is JobCreate of each of creates in order, in one call:
	// result i is what JobCreate(creates[i]) returns (a later create sees
	// the earlier ones); a failed create does not stop the others.
	// Postgres inserts a call's uncapped creates in one statement on its
	// normal path.
	JobCreateMany(ctx context.Context, creates []JobCreateParams) []JobCreated
	// JobUpdate writes job if the stored version is expectedVersion and
	// returns the new version.
	JobUpdate(ctx context.Context, job release.Job, expectedVersion int64) (int64, error)
	// JobUpdateMany is JobUpdate of each of updates in order, in one call:
	// versions[i] and errs[i] are what JobUpdate(updates[i]) returns (a
	// second update of one job sees the first). Postgres writes them in
	// one statement on its normal path.
	JobUpdateMany(ctx context.Context, updates []JobUpdateParams) (versions []int64, errs []error)
	// JobGet reads one job.
	JobGet(ctx context.Context, id string) (JobRow, error)
	// JobByExternalID reads the newest job an agent knows by externalID.
	JobByExternalID(ctx context.Context, agentID, externalID string) (JobRow, error)
	// JobsByTarget lists the target's newest jobs first, by (created_at
	// desc, id desc), at most limit (zero or less: all).
	JobsByTarget(ctx context.Context, t release.ReleaseTarget, limit int) ([]JobRow, error)
	// JobList lists jobs across targets matching p's filters, newest first
	// by (created_at desc, id desc), one keyset page below p.After of at
	// most p.Limit (VersionPageSize). Unknown filter values match nothing.
	JobList(ctx context.Context, p JobListParams) ([]JobRow, error)
	// JobsActiveByTarget lists the target's active jobs, newest first.
	JobsActiveByTarget(ctx context.Context, t release.ReleaseTarget) ([]JobRow, error)
	// JobsActiveCount counts active jobs on the target and in its
	// deployment's environment in one read.
	JobsActiveCount(ctx context.Context, t release.ReleaseTarget) (JobActiveCounts, error)
	// JobsLatest returns, per target, the newest job matching p, in target
	// key order (progression: p = deployment, version and terminal
	// statuses; dependency: resource and successful).
	JobsLatest(ctx context.Context, p JobsLatestParams) ([]JobRow, error)
	// TargetJobState reads the target's newest active and newest successful
	// jobs with their versions in one read (cooldown, rollout, rollback).
	TargetJobState(ctx context.Context, t release.ReleaseTarget) (TargetJobState, error)
	// ProgressionSummary reads what the progression rule needs of the
	// deployment's targets in an environment for a version: their count
	// and, per status and verification, how many have their newest
	// terminal job of the version (by created_at, id) so, with the latest
	// finish time; outcomes sorted by (status, verification). It equals
	// policy.SummarizeProgression over TargetList and JobsLatest of the
	// scope, and is kept by each job's and target's own write, so reading
	// it costs O(1) whatever the environment's size.
	ProgressionSummary(ctx context.Context, p ProgressionSummaryParams) (policy.ProgressionSummary, error)
}

// ProgressionSummaryParams names the deployment, environment and version
// a ProgressionSummary counts; all three are required.
type ProgressionSummaryParams struct {
	DeploymentID  string
	EnvironmentID string
	VersionID     string
}

// Validate names the first missing field.
func (p ProgressionSummaryParams) Validate() error {
	for _, f := range []struct{ name, v string }{{"deployment_id", p.DeploymentID}, {"environment_id", p.EnvironmentID}, {"version_id", p.VersionID}} {
		if f.v == "" {
			return release.Invalid(f.name, "is required")
		}
	}
	return nil
}

// TerminalJobStatuses lists the terminal job statuses, for
// JobsLatestParams.Statuses.
func TerminalJobStatuses() []release.JobStatus {
	var out []release.JobStatus
	for _, s := range release.JobStatuses {
		if s.IsTerminal() {
			out = append(out, s)
		}
	}
	return out
}

// ValidateTargetsReplace checks the shape of a replacement: a non-zero
// scope, well-formed targets inside it (the deployment's system is checked
// by the store), no duplicates.
func ValidateTargetsReplace(p TargetsReplaceParams) error {
	if p.Scope.IsZero() {
		return release.Invalid("scope", "at least one of system_id, deployment_id, environment_id and resource_id is required")
	}
	seen := make(map[release.ReleaseTarget]bool, len(p.Targets))
	for i, t := range p.Targets {
		path := release.Index("targets", i)
		if _, err := release.ParseTargetKey(t.Key()); err != nil {
			return release.Invalid(path, err.Error())
		}
		if !p.Scope.Contains(t, p.Scope.SystemID) {
			return release.Invalid(path, "target "+t.Key()+" lies outside the scope")
		}
		if seen[t] {
			return release.Invalid(path, "duplicate target "+t.Key())
		}
		seen[t] = true
	}
	return nil
}

// ValidateTarget checks a target's ids.
func ValidateTarget(t release.ReleaseTarget) error {
	if _, err := release.ParseTargetKey(t.Key()); err != nil {
		return release.Invalid("target", err.Error())
	}
	return nil
}

// ValidateJobCreate checks a job creation: the job's own Validate and a
// non-empty idempotency key.
func ValidateJobCreate(p JobCreateParams) error {
	if err := p.Job.Validate(); err != nil {
		return err
	}
	if p.IdempotencyKey == "" {
		return release.Invalid("idempotency_key", "is required")
	}
	return nil
}

// CheckJobUpdate checks that next may replace stored: same release, target
// and creation time, and a status change along release.JobEdges.
func CheckJobUpdate(stored, next *release.Job) error {
	switch {
	case next.ReleaseID != stored.ReleaseID:
		return release.Invalid("release_id", "cannot change")
	case next.TargetKey != stored.TargetKey:
		return release.Invalid("target_key", "cannot change")
	case !next.CreatedAt.Equal(stored.CreatedAt):
		return release.Invalid("created_at", "cannot change")
	case next.Status != stored.Status && !stored.Status.CanBecome(next.Status):
		return release.Invalid("status", "cannot move from "+string(stored.Status)+" to "+string(next.Status))
	}
	return nil
}

// JobStatusesInto lists the statuses a job may be in to move to next: next
// itself and every status with an edge to it.
func JobStatusesInto(next release.JobStatus) []release.JobStatus {
	out := []release.JobStatus{next}
	for _, s := range release.JobStatuses {
		if s != next && s.CanBecome(next) {
			out = append(out, s)
		}
	}
	return out
}

// ValidateJobsLatest checks that a JobsLatest query is narrowed by a
// deployment, resource or version, and that its statuses are known.
func ValidateJobsLatest(p JobsLatestParams) error {
	if p.DeploymentID == "" && p.ResourceID == "" && p.VersionID == "" {
		return release.Invalid("deployment_id", "one of deployment_id, resource_id and version_id is required")
	}
	for i, s := range p.Statuses {
		if !s.Valid() {
			return release.Invalid(release.Index("statuses", i), "unknown job status "+strconv.Quote(string(s)))
		}
	}
	return nil
}

// ValidatePolicySkip checks a skip, whose ID the store requires.
func ValidatePolicySkip(s *release.PolicySkip) error {
	if s.ID == "" {
		return release.Invalid("id", "is required")
	}
	return s.Validate()
}

// ValidateDesired checks a desired-release record's target.
func ValidateDesired(d *DesiredRelease) error { return ValidateTarget(d.Target) }
