package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/gate"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/policy/plan"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// RevisionCreate opens a draft: Content, or the content of published
// revision From.
type RevisionCreate struct {
	Content     json.RawMessage   `json:"content,omitempty" doc:"the document (a JSON object)"`
	From        int               `json:"from,omitempty" doc:"published revision number to start from when content is absent"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// RevisionEdit replaces an open draft's content at the version read.
type RevisionEdit struct {
	Version int64           `json:"version" minimum:"1"`
	Content json.RawMessage `json:"content"`
}

// RevisionChange moves a revision along its lifecycle at the version read.
type RevisionChange struct {
	Version int64 `json:"version" minimum:"1"`
}

// RevisionReject sends a proposed revision back to draft with a reason.
type RevisionReject struct {
	Version int64  `json:"version" minimum:"1"`
	Reason  string `json:"reason" minLength:"1"`
}

// RevisionMetadata replaces a revision's labels or annotations (an absent
// map is kept) at the version read, in any lifecycle.
type RevisionMetadata struct {
	Version     int64             `json:"version" minimum:"1"`
	Labels      map[string]string `json:"labels,omitempty" doc:"the revision's labels from now on; absent: kept"`
	Annotations map[string]string `json:"annotations,omitempty" doc:"the revision's annotations from now on; absent: kept"`
}

// CatalogObject names a catalog object in a path.
type CatalogObject struct {
	Kind revision.Kind `path:"kind" enum:"workflow-template,policy"`
	Name string        `path:"name"`
}

// RevisionPath names a revision in a path.
type RevisionPath struct {
	CatalogObject
	ID string `path:"id" doc:"revision id"`
}

func (p *RevisionPath) ref() ports.RevisionRef {
	return ports.RevisionRef{Kind: p.Kind, Name: p.Name, ID: p.ID}
}

func (s *Server) registerCatalog() {
	const base = "/catalog/{kind}/{name}/revisions"
	huma.Register(s.api, s.op("listCatalog", http.MethodGet, "/catalog/revisions", "List revisions across catalog objects, by kind and name, then revision order; every filter given must match", ports.ScopeRead, "catalog"),
		func(ctx context.Context, in *struct {
			Kind      revision.Kind        `query:"kind" enum:"workflow-template,policy" doc:"only this kind's objects"`
			Name      string               `query:"name" doc:"only objects of this name"`
			Lifecycle []revision.Lifecycle `query:"lifecycle,explode" enum:"draft,proposed,published,deletion-proposed" doc:"keep revisions in these states"`
			Revision  int                  `query:"revision" minimum:"0" doc:"keep the revision with this published number"`
		}) (*body[[]ports.Revision], error) {
			rs, err := s.o.Catalog.List(ctx, ports.CatalogListParams{Kind: in.Kind, Name: in.Name, Lifecycles: in.Lifecycle, Revision: in.Revision})
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			if rs == nil {
				rs = []ports.Revision{}
			}
			return reply(rs), nil
		})
	huma.Register(s.api, s.op("listRevisions", http.MethodGet, base, "List an object's revisions", ports.ScopeRead, "catalog"),
		func(ctx context.Context, in *struct {
			CatalogObject
			Lifecycle []revision.Lifecycle `query:"lifecycle,explode" enum:"draft,proposed,published,deletion-proposed" doc:"keep revisions in these states"`
		}) (*body[[]ports.Revision], error) {
			rs, err := s.o.Catalog.List(ctx, ports.CatalogListParams{Kind: in.Kind, Name: in.Name, Lifecycles: in.Lifecycle})
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			if rs == nil {
				rs = []ports.Revision{}
			}
			return reply(rs), nil
		})
	huma.Register(s.api, s.op("getRevision", http.MethodGet, base+"/{id}", "Read a revision", ports.ScopeRead, "catalog"),
		func(ctx context.Context, in *RevisionPath) (*body[ports.Revision], error) {
			return s.revision(s.o.Catalog.Get(ctx, in.ref()))(ctx)
		})
	huma.Register(s.api, s.op("planRevision", http.MethodGet, "/catalog/policy/{name}/revisions/{id}/plan",
		"What publishing a policy revision would change, against the published one: per affected release target, the gating rules that start or stop applying (the proposed revision's rules carry revision 0) and its desired release before and after, decided by the release chain as apply's dry run does; nothing is written", ports.ScopeRead, "catalog"),
		func(ctx context.Context, in *struct {
			Name string `path:"name"`
			ID   string `path:"id" doc:"revision id"`
		}) (*body[plan.Diff], error) {
			rev, err := s.o.Catalog.Get(ctx, ports.RevisionRef{Kind: revision.KindPolicy, Name: in.Name, ID: in.ID})
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			p, err := ports.PolicyOf(rev)
			if err != nil {
				return nil, huma.Error422UnprocessableEntity("revision " + in.ID + " holds no policy: " + err.Error())
			}
			var decide gate.PolicyDecider
			if s.o.Chain != nil {
				decide = func(ps []ports.Stored[policy.Policy]) gate.Decider { return s.o.Chain.DecideManyWith(ps) }
			}
			d, err := gate.Publishing(ctx, s.o.Tx, s.o.Releases, p.Value, decide)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			if d.Targets == nil {
				d.Targets = []plan.Target{}
			}
			return reply(d), nil
		})
	huma.Register(s.api, s.created(s.op("createRevision", http.MethodPost, base, "Open a draft revision", ports.ScopeWrite, "catalog")),
		func(ctx context.Context, in *struct {
			CatalogObject
			Body RevisionCreate
		}) (*body[ports.Revision], error) {
			return s.revision(s.o.Catalog.Create(ctx, catalog.CreateParams{Kind: in.Kind, Name: in.Name, Content: in.Body.Content,
				From: in.Body.From, Labels: in.Body.Labels, Annotations: in.Body.Annotations, By: principal(ctx).Name}))(ctx)
		})
	huma.Register(s.api, s.op("editRevision", http.MethodPut, base+"/{id}", "Replace a draft's content (409 on a stale version or a held lock)", ports.ScopeWrite, "catalog"),
		func(ctx context.Context, in *struct {
			RevisionPath
			Body RevisionEdit
		}) (*body[ports.Revision], error) {
			return s.revision(s.o.Catalog.Edit(ctx, catalog.EditParams{Ref: in.ref(), Version: in.Body.Version, Content: in.Body.Content, By: principal(ctx).Name}))(ctx)
		})
	change := func(id, verb, summary string, scope ports.Scope, do func(context.Context, catalog.Change) (ports.Revision, error)) {
		huma.Register(s.api, s.op(id, http.MethodPost, base+"/{id}/"+verb, summary, scope, "catalog"),
			func(ctx context.Context, in *struct {
				RevisionPath
				Body RevisionChange
			}) (*body[ports.Revision], error) {
				if err := policyLifecycleScope(ctx, in.Kind); err != nil {
					return nil, err
				}
				return s.revision(do(ctx, catalog.Change{Ref: in.ref(), Version: in.Body.Version}))(ctx)
			})
	}
	change("proposeRevision", "propose", "Propose a draft for publication", ports.ScopeWrite, s.o.Catalog.Propose)
	change("proposeDeleteRevision", "propose-delete", "Propose deleting a published revision", ports.ScopeWrite, s.o.Catalog.ProposeDelete)
	change("unproposeRevision", "unpropose", "Take a proposed revision back to draft", ports.ScopeWrite, s.o.Catalog.Unpropose)
	change("undoProposeDeleteRevision", "undo-propose-delete", "Withdraw a proposed deletion: the revision is published again", ports.ScopeWrite, s.o.Catalog.UndoProposeDelete)
	change("approveRevision", "approve", "Publish a proposed revision as the caller", ports.ScopeApprove,
		func(ctx context.Context, c catalog.Change) (ports.Revision, error) {
			return s.o.Catalog.Approve(ctx, catalog.ApproveParams{Ref: c.Ref, Version: c.Version, Approver: principal(ctx).Name})
		})
	huma.Register(s.api, s.op("rejectRevision", http.MethodPost, base+"/{id}/reject", "Send a proposed revision back to draft with a reason", ports.ScopeApprove, "catalog"),
		func(ctx context.Context, in *struct {
			RevisionPath
			Body RevisionReject
		}) (*body[ports.Revision], error) {
			return s.revision(s.o.Catalog.Reject(ctx, catalog.RejectParams{Ref: in.ref(), Version: in.Body.Version, Reason: in.Body.Reason}))(ctx)
		})
	huma.Register(s.api, s.op("setRevisionMetadata", http.MethodPut, base+"/{id}/metadata", "Replace a revision's labels or annotations, in any lifecycle (409 on a stale version or a held lock)", ports.ScopeWrite, "catalog"),
		func(ctx context.Context, in *struct {
			RevisionPath
			Body RevisionMetadata
		}) (*body[ports.Revision], error) {
			return s.revision(s.o.Catalog.UpdateMetadata(ctx, catalog.MetadataParams{Ref: in.ref(), Version: in.Body.Version,
				Labels: in.Body.Labels, Annotations: in.Body.Annotations}))(ctx)
		})
	huma.Register(s.api, s.noContent(s.op("deleteRevision", http.MethodDelete, base+"/{id}", "Delete a draft, proposed or deletion-proposed revision", ports.ScopeWrite, "catalog")),
		func(ctx context.Context, in *struct {
			RevisionPath
			Version int64 `query:"version" required:"true" minimum:"1" doc:"the version read"`
		}) (*struct{}, error) {
			if err := policyLifecycleScope(ctx, in.Kind); err != nil {
				return nil, err
			}
			if err := s.o.Catalog.Delete(ctx, catalog.Change{Ref: in.ref(), Version: in.Version}); err != nil {
				return nil, s.fail(ctx, err)
			}
			return nil, nil
		})
}

// policyLifecycleScope refuses a lifecycle change of a policy revision
// (propose, unpropose, propose-delete, undo-propose-delete, delete) to a
// caller without the approve scope: a published policy's gates stop or
// start applying through them, and only who may approve may do that (a
// write token could otherwise lift an approval gate by proposing its
// deletion).
func policyLifecycleScope(ctx context.Context, kind revision.Kind) error {
	if kind != revision.KindPolicy {
		return nil
	}
	p := principal(ctx)
	if p.Token.Allows(ports.ScopeApprove) {
		return nil
	}
	return huma.Error403Forbidden("a lifecycle change of a policy needs scope approve: token " + p.Token.ID + " has " + scopeList(p.Token.Scopes))
}

// scopeList renders scopes for a message.
func scopeList(scopes []ports.Scope) string {
	out := make([]string, len(scopes))
	for i, sc := range scopes {
		out[i] = string(sc)
	}
	return strings.Join(out, ", ")
}

// revision replies with r or the problem of err.
func (s *Server) revision(r ports.Revision, err error) func(context.Context) (*body[ports.Revision], error) {
	return func(ctx context.Context) (*body[ports.Revision], error) {
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		return reply(r), nil
	}
}
