package ports

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// ChangeKind names a kind of change of the event stream.
type ChangeKind string

// The kinds of change the stream carries. Object is, by kind: a release
// target's key, a job id, a workflow id, "workflow/taskrun", "kind/id" of
// a run, and "kind/name/id" of a catalog revision.
const (
	// ChangeTargetDesired: a target's desired release changed (data: release_id).
	ChangeTargetDesired ChangeKind = "target.desired"
	// ChangeTargetCurrent: a job of a target succeeded, so its release is
	// the target's current one (data: release_id, job_id, version_id).
	ChangeTargetCurrent ChangeKind = "target.current"
	// ChangeJobCreated: a job was created (data: status, release_id, target_key).
	ChangeJobCreated ChangeKind = "job.created"
	// ChangeJobStatus: a job's status changed (data: status, previous, release_id, target_key).
	ChangeJobStatus ChangeKind = "job.status"
	// ChangeWorkflowStatus: a workflow was created or its phase changed (data: phase).
	ChangeWorkflowStatus ChangeKind = "workflow.status"
	// ChangeTaskRunStatus: a TaskRun was created or its phase changed (data: phase).
	ChangeTaskRunStatus ChangeKind = "taskrun.status"
	// ChangeRunStatus: a run was created or its state changed (data: kind, state).
	ChangeRunStatus ChangeKind = "run.status"
	// ChangeCatalogRevision: a catalog revision was created, changed
	// lifecycle or was deleted (data: kind, name, lifecycle — "deleted"
	// for a deletion —, revision).
	ChangeCatalogRevision ChangeKind = "catalog.revision"
)

// ChangeKinds lists the kinds of change, in documentation order.
var ChangeKinds = []ChangeKind{ChangeTargetDesired, ChangeTargetCurrent, ChangeJobCreated, ChangeJobStatus,
	ChangeWorkflowStatus, ChangeTaskRunStatus, ChangeRunStatus, ChangeCatalogRevision}

// Valid reports whether k is one of ChangeKinds.
func (k ChangeKind) Valid() bool {
	for _, c := range ChangeKinds {
		if k == c {
			return true
		}
	}
	return false
}

// Change is one event of the event stream: a committed change of an
// object the API serves. Data is small and never holds a secret.
type Change struct {
	// ID is assigned when the change is published: unique, increasing in
	// the order changes become visible, never reused.
	ID   int64      `json:"id"`
	Kind ChangeKind `json:"kind"`
	// Workspace is the workspace of the object's resource (targets, jobs);
	// empty for objects outside any workspace.
	Workspace string          `json:"workspace,omitempty"`
	Object    string          `json:"object"`
	At        time.Time       `json:"at"`
	Data      json.RawMessage `json:"data,omitempty"`
}

// ErrChangesExpired is returned for a resume point older than what the
// stream retains: changes after it may have been pruned.
var ErrChangesExpired = errors.New("changes after this id are no longer retained")

// ChangeStream is the event stream's retention and wake-up. Invariants
// (checked by porttest.ChangeStream):
//   - A change is published only once the write that made it has
//     committed: a refused or rolled-back write publishes none.
//   - ChangesAfter(after) lists retained changes with ID > after by ID,
//     at most limit; ids grow in the order changes become visible, so a
//     reader that resumes after the last id it saw misses none.
//   - When changes with ID > after were pruned, ChangesAfter returns
//     ErrChangesExpired.
//   - ChangesLast is the id of the newest change published (0 before
//     any); a reader that starts after it sees only later changes.
//   - ChangesNotify's channel (capacity 1) receives a wake-up after
//     changes are published, until ctx ends; wake-ups may be spurious.
type ChangeStream interface {
	// ChangesAfter lists retained changes with ID > after, oldest first.
	ChangesAfter(ctx context.Context, after int64, limit int) ([]Change, error)
	// ChangesLast returns the id of the newest published change.
	ChangesLast(ctx context.Context) (int64, error)
	// ChangesNotify returns a channel woken when changes may have been published.
	ChangesNotify(ctx context.Context) <-chan struct{}
}

// changeData encodes a change's data; the values are plain strings and
// numbers, so it cannot fail.
func changeData(v map[string]any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// JobChanges are the changes a job write from old (nil: the job was just
// created) to next records: job.created, or job.status when the status
// moved, and target.current when it moved to successful. Memory and
// Postgres share this rule (Postgres in a trigger of migration 0024).
func JobChanges(old, next *release.Job, workspace string, at time.Time) []Change {
	base := Change{Workspace: workspace, Object: next.ID, At: StoredTime(at)}
	if old == nil {
		c := base
		c.Kind = ChangeJobCreated
		c.Data = changeData(map[string]any{"status": next.Status, "release_id": next.ReleaseID, "target_key": next.TargetKey})
		return []Change{c}
	}
	if old.Status == next.Status {
		return nil
	}
	c := base
	c.Kind = ChangeJobStatus
	c.Data = changeData(map[string]any{"status": next.Status, "previous": old.Status, "release_id": next.ReleaseID, "target_key": next.TargetKey})
	out := []Change{c}
	if next.Status == release.JobSuccessful {
		out = append(out, Change{Kind: ChangeTargetCurrent, Workspace: workspace, Object: next.TargetKey, At: StoredTime(at),
			Data: changeData(map[string]any{"release_id": next.ReleaseID, "job_id": next.ID})})
	}
	return out
}

// DesiredChange is the target.desired change of a desired release moving
// from old to next; none when it did not move or was cleared.
func DesiredChange(targetKey, old, next, workspace string, at time.Time) []Change {
	if old == next || next == "" {
		return nil
	}
	return []Change{{Kind: ChangeTargetDesired, Workspace: workspace, Object: targetKey, At: StoredTime(at),
		Data: changeData(map[string]any{"release_id": next})}}
}

// PhaseChange is the change of a status moving from old ("" on creation)
// to next, of kind (workflow.status, taskrun.status, run.status); none
// when it did not move. extra is merged into the data.
func PhaseChange(kind ChangeKind, object, old, next string, at time.Time, extra map[string]any) []Change {
	if old == next {
		return nil
	}
	key := "phase"
	if kind == ChangeRunStatus {
		key = "state"
	}
	data := map[string]any{key: next}
	for k, v := range extra {
		data[k] = v
	}
	return []Change{{Kind: kind, Object: object, At: StoredTime(at), Data: changeData(data)}}
}

// RevisionChange is the catalog.revision change of a revision whose
// lifecycle moved from old ("" on creation) to r's; deleted reports a
// deletion.
func RevisionChange(r *Revision, old string, deleted bool, at time.Time) []Change {
	lc := string(r.Lifecycle)
	if deleted {
		lc = "deleted"
	}
	if lc == old {
		return nil
	}
	return []Change{{Kind: ChangeCatalogRevision, Object: string(r.Kind) + "/" + r.Name + "/" + r.ID, At: StoredTime(at),
		Data: changeData(map[string]any{"kind": r.Kind, "name": r.Name, "lifecycle": lc, "revision": r.Revision})}}
}
