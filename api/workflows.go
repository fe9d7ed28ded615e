package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// WorkflowRun starts a workflow from a published workflow-template.
type WorkflowRun struct {
	Template string `json:"template" minLength:"1" doc:"name of a workflow-template in the catalog"`
	Revision int    `json:"revision,omitempty" minimum:"0" doc:"published revision number (default, or 0: the latest)"`
	ID       string `json:"id,omitempty" doc:"workflow id (default: template name and a time stamp)"`
	// Parameters are explicit parameter values.
	Parameters  map[string]any `json:"parameters,omitempty"`
	WorkspaceID string         `json:"workspace_id,omitempty" doc:"workspace whose resources matrix sources select"`
	SystemID    string         `json:"system_id,omitempty" doc:"system whose environments and deployments matrix sources select"`
}

// WorkflowPath names a workflow in a path.
type WorkflowPath struct {
	ID string `path:"id"`
}

func (s *Server) registerWorkflows() {
	huma.Register(s.api, s.created(s.op("runWorkflow", http.MethodPost, "/workflows", "Start a workflow from a published template with parameters", ports.ScopeWrite, "workflows")),
		func(ctx context.Context, in *struct{ Body WorkflowRun }) (*body[ports.WorkflowRecord], error) {
			b := in.Body
			var rev ports.Revision
			var err error
			if b.Revision > 0 {
				rev, err = s.o.Catalog.GetRevision(ctx, revision.Object{Kind: revision.KindWorkflowTemplate, Name: b.Template}, b.Revision)
			} else {
				rev, err = s.o.Catalog.LatestPublished(ctx, revision.Object{Kind: revision.KindWorkflowTemplate, Name: b.Template})
			}
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			w, err := s.o.Flows.Start(ctx, flow.StartParams{ID: b.ID, Template: rev.Content, TemplateName: rev.Name, TemplateRevision: rev.Revision,
				Parameters: b.Parameters, Scope: flow.InputScope{WorkspaceID: b.WorkspaceID, SystemID: b.SystemID}})
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			return reply(w), nil
		})
	huma.Register(s.api, s.op("listWorkflows", http.MethodGet, "/workflows", "List workflows by id", ports.ScopeRead, "workflows"),
		func(ctx context.Context, in *struct{ PageParams }) (*body[Page[ports.WorkflowRecord]], error) {
			after, err := in.after()
			if err != nil {
				return nil, err
			}
			ws, err := s.o.Workflows.WorkflowList(ctx, after, in.limit()+1)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			// The store leaves pinned templates and matrices out of lists
			// (they may grow with the fan-out): get one workflow for them.
			return reply(page(ws, in.limit(), func(w *ports.WorkflowRecord) string { return w.ID })), nil
		})
	huma.Register(s.api, s.op("getWorkflow", http.MethodGet, "/workflows/{id}", "Read a workflow with its pinned template (the DAG) and every TaskRun", ports.ScopeRead, "workflows"),
		func(ctx context.Context, in *WorkflowPath) (*body[flow.Status], error) {
			st, err := s.o.Flows.Status(ctx, in.ID)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			return reply(st), nil
		})
	huma.Register(s.api, s.noContent(s.op("cancelWorkflow", http.MethodPost, "/workflows/{id}/cancel", "Cancel a workflow: nothing new starts, what runs is cancelled", ports.ScopeWrite, "workflows")),
		func(ctx context.Context, in *WorkflowPath) (*struct{}, error) {
			if err := s.o.Flows.Cancel(ctx, in.ID); err != nil {
				return nil, s.fail(ctx, err)
			}
			return nil, nil
		})
	huma.Register(s.api, s.noContent(s.op("approveTaskRun", http.MethodPost, "/workflows/{id}/task-runs/{run}/approve", "Approve a running approval task as the caller", ports.ScopeApprove, "workflows")),
		func(ctx context.Context, in *struct {
			WorkflowPath
			Run string `path:"run" doc:"TaskRun id"`
		}) (*struct{}, error) {
			if err := s.o.Flows.Approve(ctx, in.ID, in.Run, principal(ctx).Name); err != nil {
				return nil, s.fail(ctx, err)
			}
			noteAudit(ctx, "approved task run "+in.Run+" of workflow "+in.ID)
			return nil, nil
		})
}
