package client

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/engine/apply"
)

// Apply applies documents (POST /apply), all or nothing. A dry run's
// plan is read whole, page after page (ApplyPage, the largest pages the
// API serves): the response holds every target and no cursor. Each page
// is computed again; a page whose plan_summary digest differs from the
// first's (the store changed meanwhile) is an error.
func (c *Client) Apply(ctx context.Context, r apply.Request) (apply.Response, error) {
	resp, err := c.ApplyPage(ctx, r, maxPlanPage, "")
	for err == nil && resp.PlanNextCursor != "" && resp.Plan != nil {
		next, err := c.ApplyPage(ctx, r, maxPlanPage, resp.PlanNextCursor)
		if err != nil {
			return apply.Response{}, err
		}
		if next.Plan == nil {
			return apply.Response{}, errors.New("apply: a page of the plan came without its targets")
		}
		if next.PlanSummary == nil || resp.PlanSummary == nil || next.PlanSummary.Digest != resp.PlanSummary.Digest {
			return apply.Response{}, errors.New("apply: the plan changed while its pages were read (another write landed meanwhile): run the dry run again")
		}
		resp.Plan.Targets = append(resp.Plan.Targets, next.Plan.Targets...)
		resp.PlanSummary, resp.PlanNextCursor = next.PlanSummary, next.PlanNextCursor
	}
	return resp, err
}

// maxPlanPage is the largest page of a plan the API serves (limit).
const maxPlanPage = 1000

// ApplyPage is Apply with a dry run's plan read one page of at most limit
// targets (0: the API's default), continuing after cursor (a previous
// page's PlanNextCursor; "" for the first page).
func (c *Client) ApplyPage(ctx context.Context, r apply.Request, limit int, cursor string) (apply.Response, error) {
	path := "/apply"
	if r.DryRun {
		path += query("limit", strconv.Itoa(limit), "cursor", cursor)
	}
	return post[apply.Response](ctx, c, http.MethodPost, path, r)
}

// Documents reads every object of kind as documents, by name.
func (c *Client) Documents(ctx context.Context, kind string) ([]apply.Document, error) {
	l, err := get[api.DocumentList](ctx, c, "/documents/"+esc(kind))
	return l.Items, err
}

// Document reads one object as a document.
func (c *Client) Document(ctx context.Context, kind, name string) (apply.Document, error) {
	return get[apply.Document](ctx, c, "/documents/"+esc(kind)+"/"+esc(name))
}

// DeleteDocument deletes one object with its release targets.
func (c *Client) DeleteDocument(ctx context.Context, kind, name string) error {
	return c.do(ctx, http.MethodDelete, "/documents/"+esc(kind)+"/"+esc(name), nil, nil)
}
