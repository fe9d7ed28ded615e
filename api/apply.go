package api

import (
	"context"
	"errors"
	"net/http"
	"reflect"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/engine/apply"
	"github.com/reconcilerhq/reconciler/internal/strictjson"
	"github.com/reconcilerhq/reconciler/ports"
)

// DocumentPath names an object by document kind and name.
type DocumentPath struct {
	Kind string `path:"kind" doc:"Workspace, System, VariableSet, Deployment, Environment, Resource, JobAgent or Policy (also plural or lower case, e.g. deployments, job-agents)"`
	Name string `path:"name" doc:"metadata.name, the object's id"`
}

// DocumentList is the documents of one kind.
type DocumentList struct {
	Items []apply.Document `json:"items"`
}

// applier is the declarative-configuration service over the API's stores;
// policies are the catalog's, published as approved by the caller.
func (s *Server) applier(ctx context.Context) (*apply.Applier, error) {
	if s.o.Tx == nil {
		return nil, errors.New("api: no transactor configured (Options.Tx)")
	}
	a := &apply.Applier{Store: s.o.Releases, Tx: s.o.Tx, Effects: s.o.Chain, AgentConfig: s.o.AgentConfig}
	if s.live != nil {
		// The live store's writes enqueue exactly the work they affect, in
		// apply's transaction (and a dry run's rollback takes them back).
		a.Store, a.Effects = s.live, nil
	}
	if s.o.Catalog != nil {
		a.Policies = s.o.Catalog.Policies(principal(ctx).Name)
	}
	return a, nil
}

// needsApprove refuses a policy write (documents holding a Policy, a
// Policy delete) by a caller without the approve scope: it publishes a
// catalog revision approved by the caller, as PUT /policies does.
func needsApprove(ctx context.Context, kinds ...string) error {
	for _, k := range kinds {
		if tok := principal(ctx).Token; k == "Policy" && !tok.Allows(ports.ScopeApprove) {
			return huma.Error403Forbidden("a policy is published approved by the caller: the token needs scope " + string(ports.ScopeApprove))
		}
	}
	return nil
}

// forKind checks a kind path parameter and returns the document kind with
// the applier.
func (s *Server) forKind(ctx context.Context, kind string) (*apply.Applier, string, error) {
	k, err := apply.ParseKind(kind)
	if err != nil {
		return nil, "", huma.Error404NotFound(err.Error(), &huma.ErrorDetail{Location: "path.kind", Message: err.Error(), Value: kind})
	}
	a, err := s.applier(ctx)
	if err != nil {
		return nil, "", s.fail(ctx, err)
	}
	return a, k, nil
}

func (s *Server) registerApply() {
	op := s.op("apply", http.MethodPost, "/apply", "Apply declarative documents, all or nothing: create or update each object by kind and name, "+
		"report created, changed (with the fields), unchanged; a Policy document also needs scope approve (it is published approved by the caller); dry_run writes nothing and reports the plan: per affected release target, created or removed, the gating rules that start or stop applying and its desired release before and after; the plan is paged in target key order (limit targets, default 100; plan_summary counts them all; post the same request with cursor=plan_next_cursor for the next page, the plan computed again over the store as it is then: pages whose plan_summary.digest is equal are pages of one plan); a change that would take a gating rule off a target needs scope approve (403 naming the target and rule); prune deletes the workspace's objects of the documents' kinds "+
		"that they no longer name; a bad document changes nothing (422 naming body.documents[i].FIELD)", ports.ScopeWrite, "apply")
	op.RequestBody = &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{
		"application/json": {Schema: s.api.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[apply.Request](), true, "ApplyRequest")}}}
	huma.Register(s.api, op, func(ctx context.Context, in *struct {
		PageParams
		RawBody []byte
	}) (*body[apply.Response], error) {
		after, err := in.after()
		if err != nil {
			return nil, err
		}
		var req apply.Request
		if err := strictjson.Decode(in.RawBody, &req); err != nil {
			return nil, decodeProblem(err)
		}
		kinds := make([]string, len(req.Documents))
		for i, d := range req.Documents {
			kinds[i] = d.Kind
		}
		if err := needsApprove(ctx, kinds...); err != nil {
			return nil, err
		}
		a, err := s.applier(ctx)
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		var resp apply.Response
		diff, err := s.guarded(ctx, req.DryRun, func(ctx context.Context) error {
			var err error
			in := req
			// gate.Check rolls a dry run back after reading its writes.
			in.CallerRollsBack = req.DryRun && s.gateChecks()
			resp, err = a.Apply(ctx, in)
			return err
		})
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		if req.DryRun {
			sum := diff.Summary()
			p, next := diff.Page(after, in.limit())
			resp.Plan, resp.PlanSummary = &p, &sum
			if next != "" {
				resp.PlanNextCursor = cursorOf(next)
			}
		}
		if resp.Results == nil {
			resp.Results = []apply.Result{}
		}
		return reply(resp), nil
	})
	huma.Register(s.api, s.op("listDocuments", http.MethodGet, "/documents/{kind}", "Read every object of a kind as the documents apply accepts unchanged, by name", ports.ScopeRead, "apply"),
		func(ctx context.Context, in *struct {
			Kind string `path:"kind" doc:"Workspace, System, VariableSet, Deployment, Environment, Resource, JobAgent or Policy (also plural or lower case)"`
		}) (*body[DocumentList], error) {
			a, k, err := s.forKind(ctx, in.Kind)
			if err != nil {
				return nil, err
			}
			docs, err := a.Get(ctx, k, "")
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			if docs == nil {
				docs = []apply.Document{}
			}
			return reply(DocumentList{Items: docs}), nil
		})
	huma.Register(s.api, s.op("getDocument", http.MethodGet, "/documents/{kind}/{name}", "Read one object as the document apply accepts unchanged", ports.ScopeRead, "apply"),
		func(ctx context.Context, in *DocumentPath) (*body[apply.Document], error) {
			a, k, err := s.forKind(ctx, in.Kind)
			if err != nil {
				return nil, err
			}
			docs, err := a.Get(ctx, k, in.Name)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			return reply(docs[0]), nil
		})
	huma.Register(s.api, s.noContent(s.op("deleteDocument", http.MethodDelete, "/documents/{kind}/{name}", "Delete one object with its release targets, all or nothing "+
		"(409 while objects depend on it: a deployment's versions, a system's deployments)", ports.ScopeWrite, "apply")),
		func(ctx context.Context, in *DocumentPath) (*struct{}, error) {
			a, k, err := s.forKind(ctx, in.Kind)
			if err != nil {
				return nil, err
			}
			if err := needsApprove(ctx, k); err != nil {
				return nil, err
			}
			if err := s.gatedWrite(func(ctx context.Context) error { return a.Delete(ctx, k, in.Name) })(ctx); err != nil {
				return nil, s.fail(ctx, err)
			}
			return nil, nil
		})
}
