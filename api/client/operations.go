package client

import (
	"context"
	"net/http"
	"strconv"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/ports"
)

// DeadWork lists dead-lettered work items (kind "": all).
func (c *Client) DeadWork(ctx context.Context, kind string, limit int) ([]ports.WorkItem, error) {
	return get[[]ports.WorkItem](ctx, c, "/operations/dead"+query("kind", kind, "limit", strconv.Itoa(limit)))
}

// Redrive makes a dead-lettered item pending again.
func (c *Client) Redrive(ctx context.Context, key ports.WorkKey) error {
	return c.do(ctx, http.MethodPost, "/operations/dead/redrive", api.Redrive{Kind: key.Kind, ScopeType: key.ScopeType, ScopeID: key.ScopeID}, nil)
}

// QueueStats counts work items by state.
func (c *Client) QueueStats(ctx context.Context) (map[ports.WorkState]int, error) {
	return get[map[ports.WorkState]int](ctx, c, "/operations/queue")
}

// QueueKinds gives the queue depth of each work kind, sorted by kind.
func (c *Client) QueueKinds(ctx context.Context) ([]api.KindDepth, error) {
	return get[[]api.KindDepth](ctx, c, "/operations/queue/kinds")
}
