package ports

import (
	"context"
	"slices"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
)

// Event is one entry of the release store's event outbox: a state change
// of the release chain that workflow hooks can start on (see
// workflow.EventType). The store writes it in the same write as the
// change, so an event is never lost by a crash and never recorded for a
// change that did not happen.
type Event struct {
	// Seq is assigned by the store: unique, increasing in the order the
	// events were recorded, never reused.
	Seq  int64              `json:"seq"`
	Type workflow.EventType `json:"type"`
	// At is the time of the change (the release's creation, the job's
	// update as the store stamped it).
	At        time.Time `json:"at"`
	ReleaseID string    `json:"release_id"`
	TargetKey string    `json:"target_key"`
	VersionID string    `json:"version_id"`
	// The job fields are set for job.failed and verification.failed.
	JobID      string            `json:"job_id,omitempty"`
	JobStatus  release.JobStatus `json:"job_status,omitempty"`
	JobMessage string            `json:"job_message,omitempty"`
	JobAgentID string            `json:"job_agent_id,omitempty"`
	ExternalID string            `json:"external_id,omitempty"`
	// Metrics names the verification's metrics (verification.failed), in
	// name order.
	Metrics []string `json:"metrics,omitempty"`
	// ResourceID is set for resource.created, resource.updated and
	// resource.deleted (which set no release, target or version).
	ResourceID string `json:"resource_id,omitempty"`
}

// Target is the event's release target.
func (e *Event) Target() release.ReleaseTarget {
	t, _ := release.ParseTargetKey(e.TargetKey)
	return t
}

// FailedJobStatuses are the statuses a job.failed event reports: a job
// moving into one of them (from any other status) records the event.
var FailedJobStatuses = []release.JobStatus{release.JobFailure, release.JobInvalidJobAgent,
	release.JobInvalidIntegration, release.JobExternalRunNotFound}

// JobFailed reports whether s is one of FailedJobStatuses.
func JobFailed(s release.JobStatus) bool {
	for _, f := range FailedJobStatuses {
		if s == f {
			return true
		}
	}
	return false
}

// JobEvents are the events a job update from old to next records, in this
// order: job.failed when the status moves into a failed one,
// verification.failed when the verification moves to failed, then
// release.failed when either did. Memory and Postgres stores share this
// rule (Postgres in a trigger of migrations 0011 and 0024, which this
// function mirrors).
func JobEvents(old, next *release.Job, at time.Time, versionID string) []Event {
	var out []Event
	base := Event{At: StoredTime(at), ReleaseID: next.ReleaseID, TargetKey: next.TargetKey, VersionID: versionID,
		JobID: next.ID, JobStatus: next.Status, JobMessage: next.Message, JobAgentID: next.JobAgentID, ExternalID: next.ExternalID}
	if JobFailed(next.Status) && !JobFailed(old.Status) {
		e := base
		e.Type = workflow.EventJobFailed
		out = append(out, e)
	}
	if next.Verification == release.VerificationFailed && old.Verification != release.VerificationFailed {
		e := base
		e.Type = workflow.EventVerificationFailed
		for name := range next.Measurements {
			e.Metrics = append(e.Metrics, name)
		}
		slices.Sort(e.Metrics)
		out = append(out, e)
	}
	if len(out) > 0 {
		e := base
		e.Type = workflow.EventReleaseFailed
		out = append(out, e)
	}
	return out
}

// ResourceEvent is the event of a resource write: typ is
// resource.created, resource.updated or resource.deleted.
func ResourceEvent(typ workflow.EventType, resourceID string, at time.Time) Event {
	return Event{Type: typ, At: StoredTime(at), ResourceID: resourceID}
}

// ReleaseEvent is the release.created event of a release the store just
// created.
func ReleaseEvent(r *release.Release) Event {
	return Event{Type: workflow.EventReleaseCreated, At: StoredTime(r.CreatedAt), ReleaseID: r.ID,
		TargetKey: r.Target.Key(), VersionID: r.VersionID}
}

// Events is the release store's event outbox, read by the workflow hooks'
// processor (engine/flow). Invariants (checked by porttest.Events):
//   - ReleaseUpsert that creates a release records release.created; a
//     JobUpdate records JobEvents(stored, written); a Put of a resource
//     records resource.created (new) or resource.updated, and its Delete
//     resource.deleted (ResourceEvent); each in the same
//     atomic write as its change (a refused or conflicting write records
//     nothing), and no other write records any.
//   - EventsPending lists unprocessed events by Seq, at most limit;
//     EventsDone marks events processed (again: no-op), so they are
//     listed no more. Processing is at least once: a processor that dies
//     before EventsDone leaves the event pending for the next one, so what
//     it starts must be idempotent per event.
type Events interface {
	// EventsPending lists up to limit unprocessed events, oldest first.
	EventsPending(ctx context.Context, limit int) ([]Event, error)
	// EventsDone marks the events with these sequence numbers processed.
	EventsDone(ctx context.Context, seqs []int64) error
}
