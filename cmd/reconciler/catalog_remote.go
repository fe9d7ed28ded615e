package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// catalogService is what the catalog commands call: the catalog service
// on --dsn, or remoteCatalog through the API on --server.
type catalogService interface {
	List(ctx context.Context, p ports.CatalogListParams) ([]ports.Revision, error)
	LatestPublished(ctx context.Context, obj revision.Object) (ports.Revision, error)
	GetRevision(ctx context.Context, obj revision.Object, number int) (ports.Revision, error)
	Create(ctx context.Context, p catalog.CreateParams) (ports.Revision, error)
	Edit(ctx context.Context, p catalog.EditParams) (ports.Revision, error)
	Propose(ctx context.Context, c catalog.Change) (ports.Revision, error)
	Unpropose(ctx context.Context, c catalog.Change) (ports.Revision, error)
	Approve(ctx context.Context, p catalog.ApproveParams) (ports.Revision, error)
	Reject(ctx context.Context, p catalog.RejectParams) (ports.Revision, error)
	ProposeDelete(ctx context.Context, c catalog.Change) (ports.Revision, error)
	UndoProposeDelete(ctx context.Context, c catalog.Change) (ports.Revision, error)
	UpdateMetadata(ctx context.Context, p catalog.MetadataParams) (ports.Revision, error)
	Delete(ctx context.Context, c catalog.Change) error
}

var _ catalogService = (*catalog.Service)(nil)

// remoteCatalog runs the catalog commands through the API. The approver of
// an approval is the token's name.
type remoteCatalog struct{ c *client.Client }

func (r remoteCatalog) List(ctx context.Context, p ports.CatalogListParams) ([]ports.Revision, error) {
	return r.c.ListCatalog(ctx, p)
}

func (r remoteCatalog) LatestPublished(ctx context.Context, obj revision.Object) (ports.Revision, error) {
	rs, err := r.c.ListRevisions(ctx, obj, revision.Published)
	if err != nil {
		return ports.Revision{}, err
	}
	var best *ports.Revision
	for i := range rs {
		if best == nil || rs[i].Revision > best.Revision {
			best = &rs[i]
		}
	}
	if best == nil {
		return ports.Revision{}, fmt.Errorf("%s has no published revision: %w", obj, ports.ErrNotFound)
	}
	return *best, nil
}

func (r remoteCatalog) GetRevision(ctx context.Context, obj revision.Object, number int) (ports.Revision, error) {
	if number <= 0 {
		return ports.Revision{}, usagef("get %s revision %d: not a revision number", obj, number)
	}
	rs, err := r.c.ListRevisions(ctx, obj)
	if err != nil {
		return ports.Revision{}, err
	}
	for _, rev := range rs {
		if rev.Revision == number {
			return rev, nil
		}
	}
	return ports.Revision{}, fmt.Errorf("get %s revision %d: %w", obj, number, ports.ErrNotFound)
}

func (r remoteCatalog) Create(ctx context.Context, p catalog.CreateParams) (ports.Revision, error) {
	return r.c.CreateRevision(ctx, revision.Object{Kind: p.Kind, Name: p.Name},
		api.RevisionCreate{Content: p.Content, From: p.From, Labels: p.Labels, Annotations: p.Annotations})
}

func (r remoteCatalog) Edit(ctx context.Context, p catalog.EditParams) (ports.Revision, error) {
	return r.c.EditRevision(ctx, p.Ref, api.RevisionEdit{Version: p.Version, Content: p.Content})
}

func (r remoteCatalog) Propose(ctx context.Context, c catalog.Change) (ports.Revision, error) {
	return r.c.ChangeRevision(ctx, c.Ref, "propose", c.Version)
}

func (r remoteCatalog) Unpropose(ctx context.Context, c catalog.Change) (ports.Revision, error) {
	return r.c.ChangeRevision(ctx, c.Ref, "unpropose", c.Version)
}

func (r remoteCatalog) Approve(ctx context.Context, p catalog.ApproveParams) (ports.Revision, error) {
	return r.c.ChangeRevision(ctx, p.Ref, "approve", p.Version)
}

func (r remoteCatalog) Reject(ctx context.Context, p catalog.RejectParams) (ports.Revision, error) {
	return r.c.RejectRevision(ctx, p.Ref, api.RevisionReject{Version: p.Version, Reason: p.Reason})
}

func (r remoteCatalog) ProposeDelete(ctx context.Context, c catalog.Change) (ports.Revision, error) {
	return r.c.ChangeRevision(ctx, c.Ref, "propose-delete", c.Version)
}

func (r remoteCatalog) UndoProposeDelete(ctx context.Context, c catalog.Change) (ports.Revision, error) {
	return r.c.ChangeRevision(ctx, c.Ref, "undo-propose-delete", c.Version)
}

func (r remoteCatalog) UpdateMetadata(ctx context.Context, p catalog.MetadataParams) (ports.Revision, error) {
	return r.c.SetRevisionMetadata(ctx, p.Ref, api.RevisionMetadata{Version: p.Version, Labels: p.Labels, Annotations: p.Annotations})
}

func (r remoteCatalog) Delete(ctx context.Context, c catalog.Change) error {
	return r.c.DeleteRevision(ctx, c.Ref, c.Version)
}

// remoteExit maps a failure through the API onto the CLI's exit table: the
// client's errors carry not found, conflict, bad input and unauthorized.
func remoteExit(obj revision.Object, err error) error {
	if err == nil {
		return nil
	}
	var ec exitCoder
	if errors.As(err, &ec) {
		return err
	}
	if code := exitStatus(err); code == exitConflict {
		return classify(obj, err) // with the re-read hint
	}
	return releaseExit(err)
}
