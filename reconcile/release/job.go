package release

import (
	"net/url"
	"slices"
	"strconv"
	"time"
)

// JobStatus is the state of a job run by a job agent.
type JobStatus string

// The job statuses.
const (
	JobPending             JobStatus = "pending"
	JobQueued              JobStatus = "queued"
	JobInProgress          JobStatus = "inProgress"
	JobActionRequired      JobStatus = "actionRequired"
	JobSuccessful          JobStatus = "successful"
	JobFailure             JobStatus = "failure"
	JobCancelled           JobStatus = "cancelled"
	JobSkipped             JobStatus = "skipped"
	JobInvalidJobAgent     JobStatus = "invalidJobAgent"
	JobInvalidIntegration  JobStatus = "invalidIntegration"
	JobExternalRunNotFound JobStatus = "externalRunNotFound"
)

// JobStatuses lists every job status.
var JobStatuses = []JobStatus{
	JobPending, JobQueued, JobInProgress, JobActionRequired,
	JobSuccessful, JobFailure, JobCancelled, JobSkipped,
	JobInvalidJobAgent, JobInvalidIntegration, JobExternalRunNotFound,
}

// Valid reports whether s is a known status.
func (s JobStatus) Valid() bool {
	switch s {
	case JobPending, JobQueued, JobInProgress, JobActionRequired,
		JobSuccessful, JobFailure, JobCancelled, JobSkipped,
		JobInvalidJobAgent, JobInvalidIntegration, JobExternalRunNotFound:
		return true
	}
	return false
}

// IsActive reports whether a job in status s still occupies its target:
// pending, queued, inProgress or actionRequired.
func (s JobStatus) IsActive() bool {
	switch s {
	case JobPending, JobQueued, JobInProgress, JobActionRequired:
		return true
	}
	return false
}

// Deadline is when an active job outlives limit: limit after it started,
// or after it was created when it has not started. It is zero for a job
// that ended or when limit is not positive.
func (j *Job) Deadline(limit time.Duration) time.Time {
	if limit <= 0 || !j.Status.IsActive() {
		return time.Time{}
	}
	from := j.StartedAt
	if from.IsZero() {
		from = j.CreatedAt
	}
	return from.Add(limit)
}

// IsTerminal reports whether s is final. Every known status is either
// active or terminal; an unknown status is neither.
func (s JobStatus) IsTerminal() bool { return s.Valid() && !s.IsActive() }

// JobEdges is the job state machine as data: JobEdges[from] lists the
// statuses a job may move to. Terminal statuses have no edges.
var JobEdges = map[JobStatus][]JobStatus{
	JobPending: {JobQueued, JobInProgress, JobActionRequired, JobSuccessful, JobFailure,
		JobCancelled, JobSkipped, JobInvalidJobAgent, JobInvalidIntegration, JobExternalRunNotFound},
	JobQueued: {JobInProgress, JobActionRequired, JobSuccessful, JobFailure,
		JobCancelled, JobSkipped, JobInvalidIntegration, JobExternalRunNotFound},
	JobInProgress: {JobActionRequired, JobSuccessful, JobFailure,
		JobCancelled, JobExternalRunNotFound},
	JobActionRequired: {JobInProgress, JobSuccessful, JobFailure,
		JobCancelled, JobExternalRunNotFound},
}

// CanBecome reports whether a job may move from s to next along JobEdges.
func (s JobStatus) CanBecome(next JobStatus) bool {
	for _, to := range JobEdges[s] {
		if to == next {
			return true
		}
	}
	return false
}

// VerificationStatus is the outcome of a job's (or release's) verification.
type VerificationStatus string

// The verification statuses. The empty value means the same as
// VerificationNone: no verification was configured.
const (
	VerificationNone    VerificationStatus = "none"
	VerificationRunning VerificationStatus = "running"
	VerificationPassed  VerificationStatus = "passed"
	VerificationFailed  VerificationStatus = "failed"
)

// Valid reports whether v is a known status (the empty value included).
func (v VerificationStatus) Valid() bool {
	switch v {
	case "", VerificationNone, VerificationRunning, VerificationPassed, VerificationFailed:
		return true
	}
	return false
}

// IsNone reports whether no verification ran ("" or "none").
func (v VerificationStatus) IsNone() bool { return v == "" || v == VerificationNone }

// JobAgent is an integration that runs jobs (GitHub Actions, Argo CD, a
// test runner).
type JobAgent struct {
	ID     string         `json:"id"`
	Name   string         `json:"name"`
	Type   string         `json:"type"`
	Config map[string]any `json:"config,omitempty"`
}

// Validate reports the first invalid field.
func (a *JobAgent) Validate() error {
	if err := a.validateFields(); err != nil {
		return err
	}
	return CheckText(a)
}

func (a *JobAgent) validateFields() error {
	if err := CheckObjectID("id", a.ID); err != nil {
		return err
	}
	if err := checkRequired("name", a.Name); err != nil {
		return err
	}
	return checkRequired("type", a.Type)
}

// Job is one attempt to apply a release through a job agent.
type Job struct {
	ID        string `json:"id"`
	ReleaseID string `json:"release_id"`
	// TargetKey is the release target's Key.
	TargetKey      string         `json:"target_key"`
	JobAgentID     string         `json:"job_agent_id,omitempty"`
	JobAgentConfig map[string]any `json:"job_agent_config,omitempty"`
	Status         JobStatus      `json:"status"`
	// Verification is the outcome of the job's post-deploy verification.
	Verification VerificationStatus `json:"verification,omitempty"`
	// ExternalID correlates the job with the agent's run.
	ExternalID string `json:"external_id,omitempty"`
	// DispatchContext is what the job was dispatched with (resolved
	// variables, links); secrets in it are redacted.
	DispatchContext map[string]any `json:"dispatch_context,omitempty"`
	Message         string         `json:"message,omitempty"`
	// Measurements are the verification readings taken after the job
	// succeeded, per metric name, oldest first.
	Measurements map[string][]Measurement `json:"measurements,omitempty"`
	// Links are the agent's links for people, name -> http(s) URL (the
	// run's page, its logs); see ValidateLinks.
	Links       map[string]string `json:"links,omitempty"`
	CreatedAt   time.Time         `json:"created_at"`
	StartedAt   time.Time         `json:"started_at,omitzero"`
	CompletedAt time.Time         `json:"completed_at,omitzero"`
	// LeaseUntil is, for the job of an in-process agent that holds leases
	// (ports.JobLeaser), when its lease runs out unless renewed: an active
	// job past it is lost (its process died) and is ended as a failure.
	// For a pull agent's job it is when its taker's lease runs out: the
	// job is handed out again, or lost after its last hand-out (LeaseLost).
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	// LeaseOwner is, for the job of an in-process agent, the process
	// (its liveness owner, ports.Liveness) whose agent runs it: while that
	// process is alive the job is not lost, whatever LeaseUntil says.
	LeaseOwner string `json:"lease_owner,omitempty"`
	// Take is, for the job of a pull agent, its current hand-out to a
	// taker outside the process; nil until it is first taken.
	Take *JobTake `json:"take,omitempty"`
	// Traceparent is the W3C trace context of the pass that created the
	// job, empty when tracing is off: its agent continues that trace (the
	// header on a push agent's call, the take answer's field for a pull
	// agent).
	Traceparent string `json:"traceparent,omitempty"`
}

// FinishedAt is when the job completed, falling back to when it started or
// was created when the agent did not report a completion time.
func (j *Job) FinishedAt() time.Time {
	switch {
	case !j.CompletedAt.IsZero():
		return j.CompletedAt
	case !j.StartedAt.IsZero():
		return j.StartedAt
	}
	return j.CreatedAt
}

// Validate reports the first invalid field.
func (j *Job) Validate() error {
	if err := j.validateFields(); err != nil {
		return err
	}
	return CheckText(j)
}

func (j *Job) validateFields() error {
	if err := checkID("id", j.ID); err != nil {
		return err
	}
	if err := checkRequired("release_id", j.ReleaseID); err != nil {
		return err
	}
	if _, err := ParseTargetKey(j.TargetKey); err != nil {
		return Invalid("target_key", err.Error())
	}
	if !j.Status.Valid() {
		return Invalid("status", "unknown job status "+quote(string(j.Status)))
	}
	if !j.Verification.Valid() {
		return Invalid("verification", "unknown verification status "+quote(string(j.Verification)))
	}
	if err := ValidateLinks("links", j.Links); err != nil {
		return err
	}
	if t := j.Take; t != nil && (t.HandOut < 1 || t.MaxHandOuts < t.HandOut) {
		return Invalid("take.hand_out", "must be between 1 and take.max_hand_outs")
	}
	if j.CreatedAt.IsZero() {
		return Invalid("created_at", "is required")
	}
	return nil
}

// Bounds of a job's links.
const (
	MaxJobLinks       = 20
	MaxLinkNameLength = 64
	MaxLinkURLLength  = 2048
)

// ValidateLinks checks links under field: at most MaxJobLinks, each name
// non-empty and at most MaxLinkNameLength bytes, each URL an absolute
// http or https URL with a host, at most MaxLinkURLLength bytes. The first
// offending name (in sorted order) is reported as field.NAME.
func ValidateLinks(field string, links map[string]string) error {
	if len(links) > MaxJobLinks {
		return Invalid(field, "has "+strconv.Itoa(len(links))+" links, at most "+strconv.Itoa(MaxJobLinks)+" allowed")
	}
	names := make([]string, 0, len(links))
	for name := range links {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		f := Field(field, name)
		if name == "" {
			return Invalid(field, "a link name is empty")
		}
		if len(name) > MaxLinkNameLength {
			return Invalid(field, "link name "+quote(name[:MaxLinkNameLength])+"... is longer than "+strconv.Itoa(MaxLinkNameLength)+" bytes")
		}
		raw := links[name]
		if len(raw) > MaxLinkURLLength {
			return Invalid(f, "is longer than "+strconv.Itoa(MaxLinkURLLength)+" bytes")
		}
		u, err := url.Parse(raw)
		if err != nil {
			return Invalid(f, "is not a URL: "+err.Error())
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return Invalid(f, "must be an http or https URL, got "+quote(raw))
		}
		if u.Host == "" {
			return Invalid(f, "has no host")
		}
	}
	return nil
}

// Measurement is one verification provider reading.
type Measurement struct {
	At     time.Time `json:"at"`
	Result any       `json:"result,omitempty"`
	// Error is set when the provider could not measure; it counts as a
	// failed measurement.
	Error string `json:"error,omitempty"`
}

// MergeConfig merges job agent configurations, later layers winning
// (agent → deployment → version for release jobs); nested objects merge
// key by key. It returns nil when every layer is empty.
func MergeConfig(layers ...map[string]any) map[string]any {
	var out map[string]any
	for _, l := range layers {
		for k, v := range l {
			if out == nil {
				out = map[string]any{}
			}
			if sub, ok := v.(map[string]any); ok {
				if prev, ok := out[k].(map[string]any); ok {
					out[k] = MergeConfig(prev, sub)
					continue
				}
				out[k] = MergeConfig(sub)
				continue
			}
			out[k] = v
		}
	}
	return out
}
