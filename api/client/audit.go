package client

import (
	"context"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/ports"
)

// AuditFilter narrows an audit list; empty fields do not.
type AuditFilter struct {
	// Actor, Kind and ID keep the entries equal to them.
	Actor, Kind, ID string
}

// ListAudit lists the audit log of writes, newest first.
func (c *Client) ListAudit(ctx context.Context, f AuditFilter, p Page) (api.Page[ports.AuditEntry], error) {
	return get[api.AuditPage](ctx, c, "/audit"+p.pairs("actor", f.Actor, "kind", f.Kind, "id", f.ID))
}
