package client

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Page asks for one page of a list.
type Page struct {
	Limit  int
	Cursor string
}

func (p Page) pairs(more ...string) string {
	return query(append(more, "limit", strconv.Itoa(p.Limit), "cursor", p.Cursor)...)
}

// CreateVersion creates a deployment version.
func (c *Client) CreateVersion(ctx context.Context, v api.VersionCreate) (release.DeploymentVersion, error) {
	return post[release.DeploymentVersion](ctx, c, http.MethodPost, "/versions", v)
}

// GetVersion reads a version.
func (c *Client) GetVersion(ctx context.Context, id string) (release.DeploymentVersion, error) {
	return get[release.DeploymentVersion](ctx, c, "/versions/"+esc(id))
}

// ListVersions lists a deployment's versions, newest first.
func (c *Client) ListVersions(ctx context.Context, deploymentID string, p Page) (api.Page[release.DeploymentVersion], error) {
	return get[api.Page[release.DeploymentVersion]](ctx, c, "/versions"+p.pairs("deployment_id", deploymentID))
}

// SetVersionStatus sets a version ready, paused or rejected.
func (c *Client) SetVersionStatus(ctx context.Context, id string, s release.VersionStatus) (release.DeploymentVersion, error) {
	return post[release.DeploymentVersion](ctx, c, http.MethodPost, "/versions/"+esc(id)+"/status", api.VersionStatusChange{Status: s})
}

// Approve approves a version in an environment as the token's principal.
func (c *Client) Approve(ctx context.Context, versionID, environmentID string) (api.ApprovalResult, error) {
	return post[api.ApprovalResult](ctx, c, http.MethodPost, "/versions/"+esc(versionID)+"/approvals", api.ApprovalCreate{EnvironmentID: environmentID})
}

// ListApprovals lists a version's approvals (environmentID "" for all).
func (c *Client) ListApprovals(ctx context.Context, versionID, environmentID string) ([]release.Approval, error) {
	return get[[]release.Approval](ctx, c, "/versions/"+esc(versionID)+"/approvals"+query("environment_id", environmentID))
}

// ForceDeploy force-deploys a version.
func (c *Client) ForceDeploy(ctx context.Context, versionID string, f api.ForceDeployCreate) (release.PolicySkip, error) {
	return post[release.PolicySkip](ctx, c, http.MethodPost, "/versions/"+esc(versionID)+"/force-deploys", f)
}

// ListForceDeploys lists a version's force-deploys.
func (c *Client) ListForceDeploys(ctx context.Context, versionID string) ([]release.PolicySkip, error) {
	return get[[]release.PolicySkip](ctx, c, "/versions/"+esc(versionID)+"/force-deploys")
}

// EndForceDeploy ends a force-deploy.
func (c *Client) EndForceDeploy(ctx context.Context, versionID, skipID string) error {
	return c.do(ctx, http.MethodDelete, "/versions/"+esc(versionID)+"/force-deploys/"+esc(skipID), nil, nil)
}

// ExplainVersion lists every rule's verdict on a version per target.
func (c *Client) ExplainVersion(ctx context.Context, versionID, environmentID string, p Page) (api.Page[api.VersionTargetVerdicts], error) {
	return get[api.Page[api.VersionTargetVerdicts]](ctx, c, "/versions/"+esc(versionID)+"/explain"+p.pairs("environment_id", environmentID))
}

// TargetFilter narrows a target list; empty fields do not.
type TargetFilter = ports.TargetScope

// ListTargets lists release targets with what they run.
func (c *Client) ListTargets(ctx context.Context, f TargetFilter, p Page) (api.Page[api.TargetStatus], error) {
	return get[api.Page[api.TargetStatus]](ctx, c, "/targets"+p.pairs("system_id", f.SystemID, "deployment_id", f.DeploymentID,
		"environment_id", f.EnvironmentID, "resource_id", f.ResourceID))
}

// GetTarget reads one target's status by key.
func (c *Client) GetTarget(ctx context.Context, key string) (api.TargetStatus, error) {
	return get[api.TargetStatus](ctx, c, "/targets/"+esc(key))
}

// ExplainTarget explains a target's newest versions (0: the server's
// default).
func (c *Client) ExplainTarget(ctx context.Context, key string, versions int) (chain.Explanation, error) {
	return get[chain.Explanation](ctx, c, "/targets/"+esc(key)+"/explain"+query("versions", strconv.Itoa(versions)))
}

// TargetDecisions reads a target's newest desired-release decisions,
// newest first (limit 0: all kept).
func (c *Client) TargetDecisions(ctx context.Context, key string, limit int) ([]ports.TargetDecision, error) {
	return get[[]ports.TargetDecision](ctx, c, "/targets/"+esc(key)+"/decisions"+query("limit", strconv.Itoa(limit)))
}

// ListJobs lists the jobs matching every filter f gives, across targets,
// newest first.
func (c *Client) ListJobs(ctx context.Context, f api.JobFilter, p Page) (api.Page[ports.JobRow], error) {
	return get[api.Page[ports.JobRow]](ctx, c, "/jobs"+p.pairs("status", strings.Join(f.Status, ","), "job_agent_id", f.JobAgentID,
		"deployment_id", f.DeploymentID, "environment_id", f.Environment, "resource_id", f.ResourceID,
		"version_id", f.VersionID, "workspace_id", f.WorkspaceID, "target", f.Target))
}

// GetJob reads a job.
func (c *Client) GetJob(ctx context.Context, id string) (ports.JobRow, error) {
	return get[ports.JobRow](ctx, c, "/jobs/"+esc(id))
}

// ReportJob reports on a job with the client's token (scope agent).
func (c *Client) ReportJob(ctx context.Context, id string, r api.JobReport) error {
	return c.do(ctx, http.MethodPost, "/jobs/"+esc(id)+"/report", r, nil)
}

// CancelJob cancels an active job.
func (c *Client) CancelJob(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/jobs/"+esc(id)+"/cancel", nil, nil)
}

// PlanVersion answers what creating v would do on each target of its
// deployment (environmentID's only when set), storing nothing: one page of
// the plan (POST /versions?dry_run=true).
func (c *Client) PlanVersion(ctx context.Context, v api.VersionCreate, environmentID string, p Page) (api.VersionCreateResult, error) {
	return post[api.VersionCreateResult](ctx, c, http.MethodPost, "/versions"+p.pairs("dry_run", "true", "environment_id", environmentID), v)
}
