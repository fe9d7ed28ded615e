package ports

import "context"

// Lane names who a store call works for, so that a store with a pool of
// connections can keep a share of them for each: lease renewals and acks
// must never wait behind long passes, nor API reads behind either. A store
// without a pool ignores it.
type Lane int

// The lanes.
const (
	// LaneWork is the default: passes, and everything not marked.
	LaneWork Lane = iota
	// LaneRenewal is lease renewals (queue items and jobs), acks and job
	// reports: short statements that keep work from being taken over.
	LaneRenewal
	// LaneRead is the API's and console's reads: a bounded wait for a
	// connection (ErrBusy past it), never a hang.
	LaneRead
	// LaneLiveness is a process's own liveness beats (Liveness): one
	// statement on a row nobody else writes, so a beat waits neither for a
	// connection held by renewals blocked on row locks nor behind passes.
	LaneLiveness
)

// String names the lane, for metrics and logs.
func (l Lane) String() string {
	switch l {
	case LaneRenewal:
		return "renewal"
	case LaneRead:
		return "read"
	case LaneLiveness:
		return "liveness"
	default:
		return "work"
	}
}

// Lanes lists every lane.
var Lanes = []Lane{LaneWork, LaneRenewal, LaneRead, LaneLiveness}

type laneKey struct{}

// WithLane marks ctx's store calls as working for l. A call inside a
// transaction runs on the transaction's connection whatever its lane.
func WithLane(ctx context.Context, l Lane) context.Context {
	return context.WithValue(ctx, laneKey{}, l)
}

// LaneOf is the lane ctx is marked with, LaneWork when none.
func LaneOf(ctx context.Context) Lane {
	l, _ := ctx.Value(laneKey{}).(Lane)
	return l
}
