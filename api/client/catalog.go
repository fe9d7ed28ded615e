package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/policy/plan"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// revisions is the path of an object's revisions.
func revisions(obj revision.Object) string {
	return "/catalog/" + esc(string(obj.Kind)) + "/" + esc(obj.Name) + "/revisions"
}

// ListRevisions lists an object's revisions, in the given lifecycles
// (none: all).
func (c *Client) ListRevisions(ctx context.Context, obj revision.Object, lifecycles ...revision.Lifecycle) ([]ports.Revision, error) {
	q := ""
	for i, l := range lifecycles {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		q += sep + "lifecycle=" + esc(string(l))
	}
	return get[[]ports.Revision](ctx, c, revisions(obj)+q)
}

// ListCatalog lists revisions across catalog objects, by every filter p
// gives (Kind, Name, Lifecycles, Revision).
func (c *Client) ListCatalog(ctx context.Context, p ports.CatalogListParams) ([]ports.Revision, error) {
	q := url.Values{}
	if p.Kind != "" {
		q.Set("kind", string(p.Kind))
	}
	if p.Name != "" {
		q.Set("name", p.Name)
	}
	for _, l := range p.Lifecycles {
		q.Add("lifecycle", string(l))
	}
	if p.Revision != 0 {
		q.Set("revision", strconv.Itoa(p.Revision))
	}
	path := "/catalog/revisions"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return get[[]ports.Revision](ctx, c, path)
}

// SetRevisionMetadata replaces a revision's labels or annotations (a nil
// map is kept) at the version read.
func (c *Client) SetRevisionMetadata(ctx context.Context, ref ports.RevisionRef, m api.RevisionMetadata) (ports.Revision, error) {
	return post[ports.Revision](ctx, c, http.MethodPut, revisions(ref.Object())+"/"+esc(ref.ID)+"/metadata", m)
}

// GetRevision reads a revision by id.
func (c *Client) GetRevision(ctx context.Context, ref ports.RevisionRef) (ports.Revision, error) {
	return get[ports.Revision](ctx, c, revisions(ref.Object())+"/"+esc(ref.ID))
}

// CreateRevision opens a draft.
func (c *Client) CreateRevision(ctx context.Context, obj revision.Object, r api.RevisionCreate) (ports.Revision, error) {
	return post[ports.Revision](ctx, c, http.MethodPost, revisions(obj), r)
}

// EditRevision replaces a draft's content at the version read.
func (c *Client) EditRevision(ctx context.Context, ref ports.RevisionRef, e api.RevisionEdit) (ports.Revision, error) {
	return post[ports.Revision](ctx, c, http.MethodPut, revisions(ref.Object())+"/"+esc(ref.ID), e)
}

// ChangeRevision moves a revision along its lifecycle: op is propose,
// approve or propose-delete.
func (c *Client) ChangeRevision(ctx context.Context, ref ports.RevisionRef, op string, version int64) (ports.Revision, error) {
	return post[ports.Revision](ctx, c, http.MethodPost, revisions(ref.Object())+"/"+esc(ref.ID)+"/"+esc(op), api.RevisionChange{Version: version})
}

// RejectRevision sends a proposed revision back to draft.
func (c *Client) RejectRevision(ctx context.Context, ref ports.RevisionRef, r api.RevisionReject) (ports.Revision, error) {
	return post[ports.Revision](ctx, c, http.MethodPost, revisions(ref.Object())+"/"+esc(ref.ID)+"/reject", r)
}

// DeleteRevision deletes a draft, proposed or deletion-proposed revision.
func (c *Client) DeleteRevision(ctx context.Context, ref ports.RevisionRef, version int64) error {
	return c.do(ctx, http.MethodDelete, revisions(ref.Object())+"/"+esc(ref.ID)+"?version="+strconv.FormatInt(version, 10), nil, nil)
}

// PlanRevision is what publishing revision id of policy name would change
// (GET .../catalog/policy/{name}/revisions/{id}/plan).
func (c *Client) PlanRevision(ctx context.Context, name, id string) (plan.Diff, error) {
	return get[plan.Diff](ctx, c, revisions(revision.Object{Kind: revision.KindPolicy, Name: name})+"/"+esc(id)+"/plan")
}
