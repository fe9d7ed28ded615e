package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/ports"
)

// Redrive names a dead-lettered work item to run again.
type Redrive struct {
	Kind      string `json:"kind" minLength:"1"`
	ScopeType string `json:"scope_type" minLength:"1"`
	ScopeID   string `json:"scope_id" minLength:"1"`
}

// KindDepth is the queue depth of one work kind.
type KindDepth struct {
	Kind    string `json:"kind"`
	Pending int    `json:"pending"`
	Leased  int    `json:"leased"`
	Dead    int    `json:"dead"`
	// OldestDue is the earliest not-before of the pending items already
	// due; absent when none is due.
	OldestDue time.Time `json:"oldest_due,omitzero"`
	// OldestAgeSeconds is how long that item has waited for a worker, by
	// the server's clock; 0 when none is due.
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
}

// KindDepths folds per-state counts into one entry per kind, sorted by kind
// (stats come sorted by kind, ports.SortKindStats), with ages measured at
// now. The console shows the same figures.
func KindDepths(stats []ports.KindStats, now time.Time) []KindDepth {
	out := []KindDepth{}
	for _, st := range stats {
		if len(out) == 0 || out[len(out)-1].Kind != st.Kind {
			out = append(out, KindDepth{Kind: st.Kind})
		}
		d := &out[len(out)-1]
		switch st.State {
		case ports.WorkPending:
			d.Pending += st.Count
		case ports.WorkLeased:
			d.Leased += st.Count
		case ports.WorkDead:
			d.Dead += st.Count
		}
		if !st.OldestDue.IsZero() && (d.OldestDue.IsZero() || st.OldestDue.Before(d.OldestDue)) {
			d.OldestDue = st.OldestDue.UTC()
			d.OldestAgeSeconds = max(0, now.Sub(st.OldestDue).Seconds())
		}
	}
	return out
}

func (s *Server) registerOperations() {
	huma.Register(s.api, s.op("listDeadWork", http.MethodGet, "/operations/dead", "List dead-lettered work items, oldest first", ports.ScopeRead, "operations"),
		func(ctx context.Context, in *struct {
			Kind  string `query:"kind" doc:"only this kind's"`
			Limit int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
		}) (*body[[]ports.WorkItem], error) {
			items, err := s.o.Queue.WorkDeadList(ctx, ports.DeadListParams{Kind: in.Kind, Limit: in.Limit})
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			if items == nil {
				items = []ports.WorkItem{}
			}
			return reply(items), nil
		})
	huma.Register(s.api, s.noContent(s.op("redriveWork", http.MethodPost, "/operations/dead/redrive", "Make a dead-lettered item pending again, due now (409 when it is not dead)", ports.ScopeAdmin, "operations")),
		func(ctx context.Context, in *struct{ Body Redrive }) (*struct{}, error) {
			err := s.o.Queue.WorkRedrive(ctx, ports.WorkKey{Kind: in.Body.Kind, ScopeType: in.Body.ScopeType, ScopeID: in.Body.ScopeID})
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			return nil, nil
		})
	huma.Register(s.api, s.op("queueStats", http.MethodGet, "/operations/queue", "Count work items by state (pending, leased, dead)", ports.ScopeRead, "operations"),
		func(ctx context.Context, _ *struct{}) (*body[map[ports.WorkState]int], error) {
			st, err := s.o.Queue.WorkStats(ctx)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			return reply(st), nil
		})
	huma.Register(s.api, s.op("queueKinds", http.MethodGet, "/operations/queue/kinds", "Queue depth per work kind: pending, leased and dead items, and the age of the oldest due pending item", ports.ScopeRead, "operations"),
		func(ctx context.Context, _ *struct{}) (*body[[]KindDepth], error) {
			st, err := s.o.Queue.WorkKindStats(ctx)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			ports.SortKindStats(st)
			return reply(KindDepths(st, s.o.Clock.Now())), nil
		})
}
