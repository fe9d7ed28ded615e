package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// TestClient drives the release chain and the catalog through the typed
// client against the real server, and checks its error mapping.
func TestClient(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		ctx := f.ctx
		c, err := client.New(f.http.URL+"/api/v1/", f.tokens["admin"])
		require.NoError(t, err)
		v, err := c.CreateVersion(ctx, api.VersionCreate{DeploymentID: "web", Tag: "v1"})
		require.NoError(t, err)
		require.Equal(t, "web-v1", v.ID)
		_, err = c.CreateVersion(ctx, api.VersionCreate{DeploymentID: "web", Tag: "v1"})
		require.ErrorIs(t, err, ports.ErrConflict)
		_, err = c.GetVersion(ctx, "nope")
		require.ErrorIs(t, err, ports.ErrNotFound)
		_, err = c.CreateVersion(ctx, api.VersionCreate{DeploymentID: "web", Tag: "v2", Status: "shipped"})
		require.ErrorIs(t, err, release.ErrInvalid)
		require.Contains(t, err.Error(), "body.status")
		page, err := c.ListVersions(ctx, "web", client.Page{Limit: 10})
		require.NoError(t, err)
		require.Len(t, page.Items, 1)

		f.drain()
		a, err := c.Approve(ctx, "web-v1", "prod")
		require.NoError(t, err)
		require.Equal(t, "user-admin", a.Approval.User)
		targets, err := c.ListTargets(ctx, client.TargetFilter{DeploymentID: "web"}, client.Page{})
		require.NoError(t, err)
		require.Len(t, targets.Items, 2)
		x, err := c.ExplainTarget(ctx, "web:prod:r1", 1)
		require.NoError(t, err)
		require.Len(t, x.Versions, 1)

		job := f.activeJob("web:dev:r1")
		require.NoError(t, c.ReportJobSigned(ctx, job, api.JobReport{Status: release.JobSuccessful}, agentSecret, f.clock.Now()))
		j, err := c.GetJob(ctx, job)
		require.NoError(t, err)
		require.Equal(t, release.JobSuccessful, j.Status)
		err = c.ReportJobSigned(ctx, job, api.JobReport{Status: release.JobSuccessful}, "wrong", f.clock.Now())
		require.ErrorIs(t, err, client.ErrUnauthorized)

		obj := revision.Object{Kind: revision.KindWorkflowTemplate, Name: "gated"}
		r, err := c.CreateRevision(ctx, obj, api.RevisionCreate{Content: mustJSON(t, gated)})
		require.NoError(t, err)
		r, err = c.ChangeRevision(ctx, r.Ref(), "propose", r.Version)
		require.NoError(t, err)
		_, err = c.ChangeRevision(ctx, r.Ref(), "approve", r.Version-1)
		require.ErrorIs(t, err, ports.ErrConflict)
		r, err = c.ChangeRevision(ctx, r.Ref(), "approve", r.Version)
		require.NoError(t, err)
		require.Equal(t, "user-admin", r.ApprovedBy)
		w, err := c.RunWorkflow(ctx, api.WorkflowRun{Template: "gated", Parameters: map[string]any{"image": "x"}})
		require.NoError(t, err)
		st, err := c.GetWorkflow(ctx, w.ID)
		require.NoError(t, err)
		require.Equal(t, w.ID, st.Workflow.ID)
		require.NoError(t, c.CancelWorkflow(ctx, w.ID))

		reader, err := client.New(f.http.URL, f.tokens["read"])
		require.NoError(t, err)
		_, err = reader.CreateVersion(ctx, api.VersionCreate{DeploymentID: "web", Tag: "v3"})
		require.ErrorIs(t, err, client.ErrUnauthorized)
		var pe *client.Error
		require.ErrorAs(t, err, &pe)
		require.Equal(t, http.StatusForbidden, pe.Status)
	})
}

func TestClientObjects(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		ctx := f.ctx
		c, err := client.New(f.http.URL, f.tokens["admin"])
		require.NoError(t, err)
		env := release.Environment{ID: "qa", SystemID: "sys", Name: "qa", ResourceSelector: "true"}
		got, err := client.PutObject(ctx, c, client.Environments, "qa", env, 0)
		require.NoError(t, err)
		require.EqualValues(t, 1, got.Version)
		_, err = client.PutObject(ctx, c, client.Environments, "qa", env, 5)
		require.ErrorIs(t, err, ports.ErrConflict)
		page, err := client.ListObjects(ctx, c, client.Environments, "sys", client.Page{})
		require.NoError(t, err)
		require.Len(t, page.Items, 3)
		require.ErrorIs(t, client.DeleteObject(ctx, c, client.JobAgents, "ext", 0), ports.ErrConflict)
		_, err = client.GetObject(ctx, c, client.Workspaces, "nope")
		require.ErrorIs(t, err, ports.ErrNotFound)
	})
}
