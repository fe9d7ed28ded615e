package client

import (
	"context"
	"net/http"
	"strconv"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// RunListParams filter and page a run list; zero fields do not filter.
type RunListParams struct {
	Kind   reconcile.RunKind
	State  reconcile.State
	Limit  int
	Cursor string
}

// CreateRun creates a run in its kind's initial state.
func (c *Client) CreateRun(ctx context.Context, in api.RunCreate) (ports.RunRow, error) {
	return post[ports.RunRow](ctx, c, http.MethodPost, "/runs", in)
}

// Runs lists one page of runs.
func (c *Client) Runs(ctx context.Context, p RunListParams) (api.Page[ports.RunRow], error) {
	return get[api.Page[ports.RunRow]](ctx, c, "/runs"+query("kind", string(p.Kind), "state", string(p.State),
		"limit", strconv.Itoa(p.Limit), "cursor", p.Cursor))
}

// Run reads a run with up to decisions of its newest decisions (0: the
// server's default of 20).
func (c *Client) Run(ctx context.Context, ref reconcile.RunRef, decisions int) (api.RunView, error) {
	return get[api.RunView](ctx, c, runPath(ref)+query("decisions", strconv.Itoa(decisions)))
}

// RunIntent asks a control intent; a refused one is a 409 *Error
// (errors.Is ports.ErrConflict) whose detail holds the kernel's reason.
func (c *Client) RunIntent(ctx context.Context, ref reconcile.RunRef, in reconcile.Intent) (api.RunIntentResult, error) {
	return post[api.RunIntentResult](ctx, c, http.MethodPost, runPath(ref)+"/intents", api.RunIntent{Intent: in})
}

// RunMessage sends a message to a persistent agent.
func (c *Client) RunMessage(ctx context.Context, ref reconcile.RunRef, text string) (ports.RunRow, error) {
	return post[ports.RunRow](ctx, c, http.MethodPost, runPath(ref)+"/messages", api.RunMessage{Text: text})
}

// RunSetSubtask makes repo run child a subtask of ref, blocking or not.
func (c *Client) RunSetSubtask(ctx context.Context, ref reconcile.RunRef, child string, blocking bool) (ports.RunRow, error) {
	return post[ports.RunRow](ctx, c, http.MethodPut, runPath(ref)+"/subtasks/"+esc(child), api.RunSubtask{Blocking: blocking})
}

// RunRemoveSubtask removes child from ref's subtasks.
func (c *Client) RunRemoveSubtask(ctx context.Context, ref reconcile.RunRef, child string) (ports.RunRow, error) {
	return post[ports.RunRow](ctx, c, http.MethodDelete, runPath(ref)+"/subtasks/"+esc(child), nil)
}

// runPath is the path of one run.
func runPath(ref reconcile.RunRef) string {
	return "/runs/" + esc(string(ref.Kind)) + "/" + esc(ref.ID)
}
