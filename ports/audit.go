package ports

import (
	"context"
	"time"
)

// AuditEntry is the record of one write: who made it, from where, what it
// did and when. Entries are never changed or deleted by the application.
type AuditEntry struct {
	// Seq orders the entries; assigned by the log, increasing.
	Seq int64 `json:"seq"`
	// At is when the write was made.
	At time.Time `json:"at"`
	// Actor is the token's name, or local:USER for an offline command.
	Actor string `json:"actor"`
	// Source is where the request came from (the client's address).
	Source string `json:"source,omitempty"`
	// Action is the write's operation ("putDeployment", "approveVersion").
	Action string `json:"action"`
	// Method and Path are the request's.
	Method string `json:"method"`
	Path   string `json:"path"`
	// Kind and ID name the object written, when the request names one.
	Kind string `json:"kind,omitempty"`
	ID   string `json:"id,omitempty"`
	// Summary says what changed, for people.
	Summary string `json:"summary,omitempty"`
	// Status is the HTTP status the write answered.
	Status int `json:"status"`
}

// AuditListParams filter and page an audit list, newest first.
type AuditListParams struct {
	// Before, when positive, lists only entries with a smaller Seq (the
	// cursor of the next page).
	Before int64
	// Actor, Kind and ID keep only entries equal to them when set.
	Actor, Kind, ID string
	// Limit caps the entries returned (1 to 1000; 0 means 100).
	Limit int
}

// AuditLog is where every write leaves its record.
type AuditLog interface {
	// AuditAppend stores e with the next Seq and returns it as stored.
	AuditAppend(ctx context.Context, e AuditEntry) (AuditEntry, error)
	// AuditList returns the entries matching p, newest first.
	AuditList(ctx context.Context, p AuditListParams) ([]AuditEntry, error)
}

// AuditLimit is the page size of an AuditListParams: Limit, or 100 when it
// is not positive, at most 1000.
func AuditLimit(p AuditListParams) int {
	switch {
	case p.Limit <= 0:
		return 100
	case p.Limit > 1000:
		return 1000
	}
	return p.Limit
}
