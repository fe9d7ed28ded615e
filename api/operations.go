package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/ports"
)

// Redrive names a dead-lettered work item to run again.
type Redrive struct {
	Kind      string `json:"kind" minLength:"1"`
	ScopeType string `json:"scope_type" minLength:"1"`
	ScopeID   string `json:"scope_id" minLength:"1"`
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
}
