package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/engine/apply"
	"github.com/reconcilerhq/reconciler/internal/strictjson"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// ObjectPath names an object of a simple kind in a path.
type ObjectPath struct {
	ID string `path:"id"`
}

// objectKind is how the API serves one kind of the object store.
type objectKind[T any] struct {
	kind ports.Kind[T]
	// objects returns the kind's store for the caller of ctx.
	objects func(ctx context.Context) ports.Objects[T]
	// writeScope is the scope PUT and DELETE need; empty: ScopeWrite.
	writeScope ports.Scope
	// check, when set, checks what the object alone cannot tell before a
	// PUT stores it (references, config by type, a move), as apply does;
	// cur is the stored object, nil when there is none.
	check func(ctx context.Context, v *T, cur *T) error
}

// registerObjects registers list, get, PUT (create or replace) and delete
// of every simple kind. Writes go through the live store (engine/live):
// each enqueues, in its own transaction, exactly the work it affects; a
// policy write publishes a catalog revision, whose hook does the same.
func (s *Server) registerObjects() {
	st := s.objects()
	registerKind(s, objectKind[release.Workspace]{kind: ports.WorkspaceKind, objects: anyCaller(st.Workspaces)})
	registerKind(s, objectKind[release.System]{kind: ports.SystemKind, objects: anyCaller(st.Systems), check: checkSystemMove})
	registerKind(s, objectKind[release.Deployment]{kind: ports.DeploymentKind, objects: anyCaller(st.Deployments), check: s.checkDeployment})
	registerKind(s, objectKind[release.Environment]{kind: ports.EnvironmentKind, objects: anyCaller(st.Environments)})
	registerKind(s, objectKind[release.Resource]{kind: ports.ResourceKind, objects: anyCaller(st.Resources)})
	registerKind(s, objectKind[release.VariableSet]{kind: ports.VariableSetKind, objects: anyCaller(st.VariableSets)})
	registerKind(s, objectKind[release.RelationshipRule]{kind: ports.RelationshipRuleKind, objects: anyCaller(st.RelationshipRules)})
	registerKind(s, objectKind[release.JobAgent]{kind: ports.JobAgentKind, objects: anyCaller(st.JobAgents),
		check: func(_ context.Context, a, _ *release.JobAgent) error {
			return s.fieldProblem(apply.CheckJobAgent(s.o.AgentConfig, a))
		}})
	// Policies are the catalog's: a write publishes a revision approved by
	// the caller (catalog.Policies), hence the approve scope.
	registerKind(s, objectKind[policy.Policy]{kind: ports.PolicyKind, writeScope: ports.ScopeApprove,
		objects: func(ctx context.Context) ports.Objects[policy.Policy] {
			return s.o.Catalog.Policies(principal(ctx).Name)
		}, check: s.checkPolicy})
}

// checkPolicy refuses a policy whose workspace does not exist: it would
// apply to nothing.
func (s *Server) checkPolicy(ctx context.Context, p, _ *policy.Policy) error {
	_, err := s.objects().Workspaces().Get(ctx, p.WorkspaceID)
	if errors.Is(err, ports.ErrNotFound) {
		return invalid("body.workspace_id", fmt.Sprintf("workspace %q does not exist", p.WorkspaceID))
	}
	if err != nil {
		return s.fail(ctx, err)
	}
	return nil
}

// objects is the store the object routes write through: the live store
// when the API has a queue, else the release store itself.
func (s *Server) objects() ports.ObjectStore {
	if s.live == nil {
		return s.o.Releases
	}
	return s.live
}

// anyCaller adapts a store accessor to objectKind.objects.
func anyCaller[T any](objs func() ports.Objects[T]) func(context.Context) ports.Objects[T] {
	return func(context.Context) ports.Objects[T] { return objs() }
}

// ifMatch parses an If-Match header: a version, quoted or not; "" when
// absent.
func ifMatch(h string) (int64, bool, error) {
	h = strings.TrimPrefix(strings.TrimSpace(h), "W/")
	if h == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(strings.Trim(h, `"`), 10, 64)
	if err != nil || n < 0 {
		return 0, false, huma.Error400BadRequest("bad If-Match", &huma.ErrorDetail{Location: "header.If-Match", Message: "want the object's version, e.g. \"3\"", Value: h})
	}
	return n, true, nil
}

// etag renders a version as an ETag.
func etag(v int64) string { return `"` + strconv.FormatInt(v, 10) + `"` }

// stored is an object with its ETag header.
type stored[T any] struct {
	ETag string `header:"ETag"`
	Body Object[T]
}

// storedReply is v with its ETag.
func storedReply[T any](v ports.Stored[T]) *stored[T] {
	return &stored[T]{ETag: etag(v.Version), Body: Object[T](v)}
}

// staleVersion is the 412 of a write whose If-Match (or object_version)
// names a version other than the stored one (RFC 9110, 13.1.1).
func staleVersion(kind, id string, want, cur int64) error {
	return huma.NewError(http.StatusPreconditionFailed, fmt.Sprintf("%s %q is at version %d, not %d: read it again", kind, id, cur, want),
		&huma.ErrorDetail{Location: "header.If-Match", Message: fmt.Sprintf("the stored version is %d", cur), Value: want})
}

func registerKind[T any](s *Server, k objectKind[T]) {
	name := k.kind.Name
	path := "/" + strings.ReplaceAll(k.kind.Plural, " ", "-")
	op, plural := pascal(k.kind.Name), pascal(k.kind.Plural)
	tag := strings.ReplaceAll(k.kind.Plural, " ", "-")
	listDoc := "List " + k.kind.Plural + " by id"
	if k.kind.ParentKind != "" {
		listDoc += " (parent: a " + k.kind.ParentKind + " id; workspace: the objects of a workspace"
		if k.kind.ParentKind == ports.SystemKind.Name {
			listDoc += ", through their system"
		}
		listDoc += ")"
	}
	writeScope := k.writeScope
	if writeScope == "" {
		writeScope = ports.ScopeWrite
	}
	huma.Register(s.api, s.op("list"+plural, http.MethodGet, path, listDoc, ports.ScopeRead, tag),
		func(ctx context.Context, in *struct {
			Parent    string `query:"parent" doc:"only the objects of this parent id"`
			Workspace string `query:"workspace" doc:"only the objects of this workspace (directly or through their system)"`
			PageParams
		}) (*body[Page[Object[T]]], error) {
			if in.Parent != "" && k.kind.ParentKind == "" {
				return nil, huma.Error400BadRequest(k.kind.Plural+" have no parent", &huma.ErrorDetail{Location: "query.parent", Message: k.kind.Plural + " are top-level"})
			}
			if in.Workspace != "" && k.kind.ParentKind == "" {
				return nil, huma.Error400BadRequest(k.kind.Plural+" are in no workspace", &huma.ErrorDetail{Location: "query.workspace", Message: k.kind.Plural + " are top-level"})
			}
			p, err := k.objects(ctx).List(ctx, ports.ListParams{Parent: in.Parent, Workspace: in.Workspace, Continue: in.Cursor, Limit: in.limit()})
			if err != nil {
				if errors.Is(err, release.ErrInvalid) && in.Cursor != "" {
					return nil, huma.Error400BadRequest("bad cursor", &huma.ErrorDetail{Location: "query.cursor", Message: "not a cursor this API returned"})
				}
				return nil, s.fail(ctx, err)
			}
			items := make([]Object[T], len(p.Items))
			for i, it := range p.Items {
				items[i] = Object[T](it)
			}
			return reply(Page[Object[T]]{Items: items, NextCursor: p.Continue}), nil
		})
	huma.Register(s.api, s.op("get"+op, http.MethodGet, path+"/{id}", "Read a "+name+" with its version (also its ETag)", ports.ScopeRead, tag),
		func(ctx context.Context, in *ObjectPath) (*stored[T], error) {
			v, err := k.objects(ctx).Get(ctx, in.ID)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			return storedReply(v), nil
		})
	put := s.op("put"+op, http.MethodPut, path+"/{id}", "Create or replace a "+name+": with If-Match (or the body's object_version) only at that version (else 412), "+
		"without either whatever is stored; writing the stored content again changes nothing. The body may be what a GET returned, edited", writeScope, tag)
	put.RequestBody = &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{
		"application/json": {Schema: objectSchema[T](s.api.OpenAPI().Components.Schemas, false)}}}
	huma.Register(s.api, put, func(ctx context.Context, in *struct {
		ObjectPath
		IfMatch string `header:"If-Match" doc:"the version read; absent: create, or replace whatever is stored"`
		RawBody []byte
	}) (*stored[T], error) {
		raw, bodyVersion, err := stripObjectFields(in.RawBody)
		if err != nil {
			return nil, err
		}
		var v T
		if err := strictjson.Decode(raw, &v); err != nil {
			return nil, decodeProblem(err)
		}
		if id := k.kind.ID(&v); id != in.ID {
			return nil, invalid("body.id", "must equal the path's id "+strconv.Quote(in.ID)+", got "+strconv.Quote(id))
		}
		want, conditional, err := ifMatch(in.IfMatch)
		if err != nil {
			return nil, err
		}
		if !conditional && bodyVersion > 0 {
			want, conditional = bodyVersion, true
		}
		objs := k.objects(ctx)
		cur, err := objs.Get(ctx, in.ID)
		if k.check != nil && (err == nil || errors.Is(err, ports.ErrNotFound)) {
			var was *T
			if err == nil {
				was = &cur.Value
			}
			if cerr := k.check(ctx, &v, was); cerr != nil {
				return nil, cerr
			}
		}
		switch {
		case err == nil:
			if conditional && cur.Version != want {
				return nil, staleVersion(name, in.ID, want, cur.Version)
			}
			want = cur.Version
			if reflect.DeepEqual(normalized(cur.Value), normalized(v)) {
				return storedReply(cur), nil // idempotent
			}
		case !errors.Is(err, ports.ErrNotFound):
			return nil, s.fail(ctx, err)
		case conditional && want > 0:
			return nil, huma.NewError(http.StatusPreconditionFailed, fmt.Sprintf("%s %q does not exist, so it is at no version %d", name, in.ID, want),
				&huma.ErrorDetail{Location: "header.If-Match", Message: "no stored object", Value: want})
		}
		put := func(ctx context.Context) error { _, err := objs.Put(ctx, v, want); return err }
		if k.writeScope != ports.ScopeApprove {
			put = s.gatedWrite(put)
		}
		if err := put(ctx); err != nil {
			if errors.Is(err, ports.ErrConflict) && conditional {
				if now, gerr := objs.Get(ctx, in.ID); gerr == nil && now.Version != want {
					return nil, staleVersion(name, in.ID, want, now.Version) // written meanwhile
				}
			}
			return nil, s.fail(ctx, err)
		}
		got, err := objs.Get(ctx, in.ID)
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		if got.Version == 1 {
			noteAudit(ctx, fmt.Sprintf("created %s %s", name, in.ID))
		} else {
			noteAudit(ctx, fmt.Sprintf("replaced %s %s at version %d, now %d", name, in.ID, want, got.Version))
		}
		return storedReply(got), nil
	})
	huma.Register(s.api, s.noContent(s.op("delete"+op, http.MethodDelete, path+"/{id}", "Delete a "+name+" (409 while others depend on it, 412 at a stale If-Match)", writeScope, tag)),
		func(ctx context.Context, in *struct {
			ObjectPath
			IfMatch string `header:"If-Match" doc:"the version read; absent: whatever is stored"`
		}) (*struct{}, error) {
			want, conditional, err := ifMatch(in.IfMatch)
			if err != nil {
				return nil, err
			}
			objs := k.objects(ctx)
			cur, err := objs.Get(ctx, in.ID)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			if conditional && cur.Version != want {
				return nil, staleVersion(name, in.ID, want, cur.Version)
			}
			del := func(ctx context.Context) error { return objs.Delete(ctx, in.ID, cur.Version) }
			if k.writeScope != ports.ScopeApprove {
				del = s.gatedWrite(del)
			}
			if err := del(ctx); err != nil {
				if errors.Is(err, ports.ErrConflict) && !errors.Is(err, ports.ErrInUse) {
					if now, gerr := objs.Get(ctx, in.ID); gerr == nil && now.Version != cur.Version && conditional {
						return nil, staleVersion(name, in.ID, want, now.Version)
					}
				}
				return nil, s.fail(ctx, err)
			}
			return nil, nil
		})
}

// checkSystemMove refuses a PUT that would move a stored system to another
// workspace: its deployments, environments and their targets would change
// tenant without a word. It is invalid input (422 naming the field), as
// apply answers it, not a conflict a retry could resolve.
func checkSystemMove(_ context.Context, v, cur *release.System) error {
	if cur != nil && cur.WorkspaceID != v.WorkspaceID {
		return huma.Error422UnprocessableEntity(fmt.Sprintf("system %q is in workspace %q; a PUT cannot move it to %q", v.ID, cur.WorkspaceID, v.WorkspaceID),
			&huma.ErrorDetail{Location: "body.workspace_id", Message: "must stay " + strconv.Quote(cur.WorkspaceID), Value: v.WorkspaceID})
	}
	return nil
}

// checkDeployment refuses a deployment whose job agent does not exist, or
// whose job_agent_config, merged over the agent's config, its type refuses
// (apply.CheckDeploymentAgent), as apply does.
func (s *Server) checkDeployment(ctx context.Context, d, _ *release.Deployment) error {
	if d.JobAgentID == "" {
		return nil
	}
	a, err := s.objects().JobAgents().Get(ctx, d.JobAgentID)
	if errors.Is(err, ports.ErrNotFound) {
		return invalid("body.job_agent_id", fmt.Sprintf("job agent %q does not exist", d.JobAgentID))
	}
	if err != nil {
		return s.fail(ctx, err)
	}
	fromAgent, err := apply.CheckDeploymentAgent(s.o.AgentConfig, &a.Value, d)
	if err != nil && fromAgent {
		return invalid("body.job_agent_id", err.Error())
	}
	return s.fieldProblem(err)
}

// fieldProblem is the 422 of a field error, nil for nil.
func (s *Server) fieldProblem(err error) error {
	if err == nil {
		return nil
	}
	if p := problem(err); p != nil {
		return p
	}
	return s.fail(context.Background(), err)
}

// normalized is v after a JSON round trip, as a store keeps it, so an
// unchanged PUT compares equal to what is stored.
func normalized[T any](v T) any {
	var out any
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

// decodeProblem turns a strict decoding error into a 422 (or 400 for
// malformed JSON) naming the field.
func decodeProblem(err error) error {
	var se *strictjson.Error
	if errors.As(err, &se) {
		return invalid(location(se.Path), se.Error())
	}
	return huma.Error400BadRequest("malformed JSON: "+err.Error(), &huma.ErrorDetail{Location: "body", Message: err.Error()})
}

// pascal renders "job agent" as "JobAgent", for operation ids.
func pascal(s string) string {
	var b strings.Builder
	for _, w := range strings.Fields(s) {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}
