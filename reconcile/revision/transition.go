package revision

import "fmt"

// Op is a lifecycle operation: the call that moves a revision along an edge.
type Op string

// The lifecycle operations.
const (
	OpCreate            Op = "create"
	OpPropose           Op = "propose"
	OpUnpropose         Op = "unpropose"
	OpReject            Op = "reject"
	OpApprove           Op = "approve"
	OpProposeDelete     Op = "propose-delete"
	OpUndoProposeDelete Op = "undo-propose-delete"
	OpDelete            Op = "delete"
)

// Ops lists the lifecycle operations.
var Ops = []Op{OpCreate, OpPropose, OpUnpropose, OpReject, OpApprove, OpProposeDelete, OpUndoProposeDelete, OpDelete}

// Edge is one allowed lifecycle change: Op moves a revision From → To.
// Absent as From is creation, as To is deletion.
type Edge struct {
	From Lifecycle `json:"from"`
	Op   Op        `json:"op"`
	To   Lifecycle `json:"to"`
}

// Edges is the lifecycle state machine as data. Every other (from, op) and
// every other from → to is refused.
var Edges = []Edge{
	{Absent, OpCreate, Draft},
	{Draft, OpPropose, Proposed},
	{Proposed, OpUnpropose, Draft},
	{Proposed, OpReject, Draft},
	{Proposed, OpApprove, Published},
	{Published, OpProposeDelete, DeletionProposed},
	{DeletionProposed, OpUndoProposeDelete, Published},
	{Draft, OpDelete, Absent},
	{Proposed, OpDelete, Absent},
	{DeletionProposed, OpDelete, Absent},
}

// Allowed reports whether some operation moves a revision from → to.
func Allowed(from, to Lifecycle) bool {
	for _, e := range Edges {
		if e.From == from && e.To == to {
			return true
		}
	}
	return false
}

// Apply returns the lifecycle op leads to from from, or a *TransitionError
// when (from, op) is not an edge.
func Apply(from Lifecycle, op Op) (Lifecycle, error) {
	for _, e := range Edges {
		if e.From == from && e.Op == op {
			return e.To, nil
		}
	}
	return Absent, &TransitionError{From: from, Op: op}
}

// Update describes one stored write of an existing revision, as a store sees
// it: the lifecycle before and after, whether the content bytes change and
// who approved (read only when the write publishes).
type Update struct {
	From           Lifecycle
	To             Lifecycle
	ContentChanged bool
	ApprovedBy     string
}

// CheckUpdate enforces the rules every store applies to every write of an
// existing revision: the lifecycle stays or moves along an edge (deletion
// is not an update); only an open draft's content changes, and it stays open
// while it does; publishing names the approver.
func CheckUpdate(u Update) error {
	if !u.From.Valid() {
		return Invalid(fmt.Errorf("lifecycle: stored %q is not a lifecycle", u.From))
	}
	if !u.To.Valid() {
		return Invalid(fmt.Errorf("lifecycle: %q is not a lifecycle (draft, proposed, published or deletion-proposed)", u.To))
	}
	if u.From != u.To && !Allowed(u.From, u.To) {
		return &TransitionError{From: u.From, To: u.To}
	}
	if u.ContentChanged && !(u.From.Open() && u.To.Open()) {
		return fmt.Errorf("content of a %s revision cannot change (to %s): %w", u.From, u.To, ErrImmutable)
	}
	if Publishes(u.From, u.To) && u.ApprovedBy == "" {
		return Invalid(fmt.Errorf("approved_by: required to publish a revision"))
	}
	return nil
}

// CheckContentChange refuses a content change of a revision in l: only open
// drafts (Draft, Proposed) are editable.
func CheckContentChange(l Lifecycle) error {
	if l.Open() {
		return nil
	}
	return fmt.Errorf("content of a %s revision cannot change: %w", l, ErrImmutable)
}

// Publishes reports whether from → to is a first publication: the moment a
// revision gets its number, approver and publish time.
func Publishes(from, to Lifecycle) bool { return from.Open() && to == Published }

// NextNumber is the number a revision gets when it is published: one more
// than highest, the highest number the object has ever had (0 for none).
func NextNumber(highest int) int { return highest + 1 }
