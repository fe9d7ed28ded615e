package client

import (
	"context"
	"net/http"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/ports"
)

// RunWorkflow starts a workflow from a published template.
func (c *Client) RunWorkflow(ctx context.Context, r api.WorkflowRun) (ports.WorkflowRecord, error) {
	return post[ports.WorkflowRecord](ctx, c, http.MethodPost, "/workflows", r)
}

// ListWorkflows lists workflows by id.
func (c *Client) ListWorkflows(ctx context.Context, p Page) (api.Page[ports.WorkflowRecord], error) {
	return get[api.Page[ports.WorkflowRecord]](ctx, c, "/workflows"+p.pairs())
}

// GetWorkflow reads a workflow with its TaskRuns.
func (c *Client) GetWorkflow(ctx context.Context, id string) (flow.Status, error) {
	return get[flow.Status](ctx, c, "/workflows/"+esc(id))
}

// CancelWorkflow cancels a workflow.
func (c *Client) CancelWorkflow(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/workflows/"+esc(id)+"/cancel", nil, nil)
}

// ApproveTaskRun approves a running approval task as the token's principal.
func (c *Client) ApproveTaskRun(ctx context.Context, workflowID, taskRunID string) error {
	return c.do(ctx, http.MethodPost, "/workflows/"+esc(workflowID)+"/task-runs/"+esc(taskRunID)+"/approve", nil, nil)
}
