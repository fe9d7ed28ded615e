package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/engine/pull"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
)

// pulled is a workflow template whose one task runs on pull agent ext.
var pulled = map[string]any{
	"apiVersion": "reconciler.dev/v1", "kind": "WorkflowTemplate", "metadata": map[string]any{"name": "pulled"},
	"spec": map[string]any{"tasks": []any{
		map[string]any{"name": "deploy", "type": "job", "jobAgentRef": "ext", "config": map[string]any{"image": "web:2"}},
	}},
}

// wfTaken is the part of a take's answer about a workflow job.
type wfTaken struct {
	Kind string `json:"kind"`
	Job  struct {
		ID         string    `json:"id"`
		Status     string    `json:"status"`
		ReleaseID  string    `json:"release_id"`
		TargetKey  string    `json:"target_key"`
		LeaseUntil time.Time `json:"lease_until"`
		Config     struct {
			Image string `json:"image"`
		} `json:"job_agent_config"`
		Take struct {
			HandOut int `json:"hand_out"`
		} `json:"take"`
		Workflow struct {
			ID          string `json:"id"`
			Task        string `json:"task"`
			TaskRunID   string `json:"task_run_id"`
			WorkspaceID string `json:"workspace_id"`
		} `json:"workflow"`
	} `json:"job"`
	Deployment struct{ ID string }   `json:"deployment"`
	Resource   struct{ Name string } `json:"resource"`
	TakeToken  string                `json:"take_token"`
}

func (f *fixture) takeWorkflowJob(agent, taker string) wfTaken {
	f.t.Helper()
	res := f.do(http.MethodPost, takePath(agent, "0s"), "agent", map[string]any{"taker": taker})
	require.Equal(f.t, http.StatusOK, res.status, string(res.body))
	var tk wfTaken
	require.NoError(f.t, json.Unmarshal(res.body, &tk))
	require.Equal(f.t, "workflow", tk.Kind)
	return tk
}

// listedJobs lists jobs with query q and returns them by id.
func (f *fixture) listedJobs(q string) map[string]map[string]any {
	f.t.Helper()
	res := f.do(http.MethodGet, "/api/v1/jobs?"+q, "read", nil)
	require.Equal(f.t, http.StatusOK, res.status, string(res.body))
	out := map[string]map[string]any{}
	for _, it := range res.json(f.t)["items"].([]any) {
		j := it.(map[string]any)
		out[j["id"].(string)] = j
	}
	return out
}

// TestWorkflowJobsArePullJobs: a workflow task on a pull agent is a job a
// taker takes, heartbeats and reports through the pull routes, fenced as a
// release job is; it is listed by GET /jobs meanwhile with its workflow
// (and release when the workflow runs one), and the taker's report
// completes the workflow. Another agent's token reaches none of it.
func TestWorkflowJobsArePullJobs(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		f.publish("pulled", pulled)
		res := f.do(http.MethodPost, "/api/v1/workflows", "write", map[string]any{"template": "pulled", "id": "wfp"})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
		f.drain()
		id := "wf/wfp/deploy/0"
		listed := f.listedJobs("job_agent_id=ext&status=pending")
		require.Contains(t, listed, id, "the pending workflow job is listed: %v", listed)
		require.Equal(t, map[string]any{"id": "wfp", "task": "deploy", "task_run_id": "deploy", "attempt": float64(0)}, listed[id]["workflow"])
		require.Equal(t, "pending", f.jobField(id, "status"))
		require.Empty(t, f.listedJobs("job_agent_id=gha"), "filters keep working")

		// Another agent's token reaches nothing of ext's.
		f.do(http.MethodPost, takePath("ext", "0s"), "agent-elsewhere", map[string]any{"taker": "mallory"}).problem(t, http.StatusForbidden)
		tk := f.takeWorkflowJob("ext", "host-1")
		require.Equal(t, id, tk.Job.ID)
		require.Equal(t, "inProgress", tk.Job.Status)
		require.Equal(t, "wfp", tk.Job.Workflow.ID)
		require.Equal(t, "deploy", tk.Job.Workflow.Task)
		require.Equal(t, "web:2", tk.Job.Config.Image)
		require.Empty(t, tk.Job.ReleaseID, "the workflow runs no release")
		require.Equal(t, http.StatusNoContent, f.do(http.MethodPost, takePath("ext", "0s"), "agent", map[string]any{"taker": "host-2"}).status,
			"a taken workflow job is not handed out again while its lease runs")
		body := map[string]any{"hand_out": 1, "take_token": tk.TakeToken}
		f.do(http.MethodPost, beatPath("ext", id), "agent-elsewhere", body).problem(t, http.StatusForbidden)
		f.do(http.MethodPost, reportPath("ext", id), "agent-elsewhere", map[string]any{"hand_out": 1, "take_token": tk.TakeToken, "status": "failure"}).problem(t, http.StatusForbidden)
		f.do(http.MethodPost, "/api/v1/jobs/"+url.PathEscape(id)+"/report", "agent-elsewhere", map[string]any{"status": "failure"}).problem(t, http.StatusForbidden)
		f.do(http.MethodPost, "/api/v1/jobs/"+url.PathEscape(id)+"/report", "agent", map[string]any{"status": "failure"}).problem(t, http.StatusForbidden)
		f.do(http.MethodPost, beatPath("ext", id), "agent", map[string]any{"hand_out": 1, "take_token": "guess"}).problem(t, http.StatusForbidden)
		f.do(http.MethodPost, beatPath("ext", id), "agent", map[string]any{"hand_out": 2, "take_token": tk.TakeToken}).problem(t, http.StatusConflict)
		require.Equal(t, "inProgress", f.jobField(id, "status"), "the refusals changed nothing")

		// Heartbeat extends the lease; the workflow runs on meanwhile.
		f.clock.Advance(30 * time.Second)
		res = f.do(http.MethodPost, beatPath("ext", id), "agent", body)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Equal(t, f.clock.Now().Add(release.DefaultPullLease).Format(time.RFC3339Nano), res.json(t)["lease_until"])
		f.clock.Advance(45 * time.Second) // past the first lease, within the renewed one
		f.drain()
		require.Equal(t, "inProgress", f.jobField(id, "status"), "a renewed lease is not lost")
		require.Equal(t, "Running", f.do(http.MethodGet, "/api/v1/workflows/wfp", "read", nil).json(t)["workflow"].(map[string]any)["phase"])

		res = f.do(http.MethodPost, reportPath("ext", id), "agent", map[string]any{"hand_out": 1, "take_token": tk.TakeToken,
			"status": "successful", "message": "deployed", "outputs": map[string]any{"url": "https://web"}})
		require.Equal(t, http.StatusNoContent, res.status, string(res.body))
		f.drain()
		st := f.do(http.MethodGet, "/api/v1/workflows/wfp", "read", nil).json(t)
		require.Equal(t, "Succeeded", st["workflow"].(map[string]any)["phase"], "the taker's report completes the workflow: %v", st)
		require.Equal(t, "successful", f.jobField(id, "status"))
		require.Equal(t, "deployed", f.jobField(id, "message"))
		require.Contains(t, f.listedJobs("status=successful"), id)
		f.do(http.MethodPost, beatPath("ext", id), "agent", body).problem(t, http.StatusConflict)
	})
}

// TestWorkflowJobOfAReleaseCarriesItsTarget: a workflow a release runs
// hands its pull job out with the release, version, deployment and
// resource; the list filters by them and pages across both kinds of job.
func TestWorkflowJobOfAReleaseCarriesItsTarget(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		f.publish("pulled", pulled)
		_, err := f.st.releases.Deployments().Put(f.ctx, release.Deployment{ID: "flowed", SystemID: "sys", Name: "flowed", Slug: "flowed",
			ResourceSelector: "true", WorkflowTemplate: &release.WorkflowTemplateRef{Name: "pulled"}}, 0)
		require.NoError(t, err)
		_, err = f.chain.SyncTargets(f.ctx, "sys")
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "flowed", "tag": "v1"}).status)
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).status)
		f.drain()

		wf := f.listedJobs("deployment_id=flowed&environment_id=dev&resource_id=r1")
		var id string
		for jid, j := range wf {
			if j["workflow"] != nil {
				id = jid
			}
		}
		require.NotEmpty(t, id, "the workflow job of target flowed:dev:r1 is listed: %v", wf)
		require.Equal(t, "flowed:dev:r1", wf[id]["target_key"])
		require.NotEmpty(t, wf[id]["release_id"])
		require.Contains(t, f.listedJobs("workspace_id=ws&job_agent_id=ext"), id)
		require.NotContains(t, f.listedJobs("workspace_id=other"), id)

		// Paging: one item a page walks every job once, across both kinds.
		all := f.listedJobs("limit=100")
		seen := map[string]bool{}
		cursor := ""
		for range len(all) + 2 {
			res := f.do(http.MethodGet, "/api/v1/jobs?limit=1"+cursor, "read", nil)
			require.Equal(t, http.StatusOK, res.status, string(res.body))
			page := res.json(t)
			for _, it := range page["items"].([]any) {
				jid := it.(map[string]any)["id"].(string)
				require.False(t, seen[jid], "job %s twice", jid)
				seen[jid] = true
			}
			next, _ := page["next_cursor"].(string)
			if next == "" {
				break
			}
			cursor = "&cursor=" + url.QueryEscape(next)
		}
		require.Len(t, seen, len(all))

		// The release jobs of ext come first (the oldest kind is taken
		// first), then the workflow's.
		var tk wfTaken
		for range len(all) + 1 {
			res := f.do(http.MethodPost, takePath("ext", "0s"), "agent", map[string]any{"taker": "host-1"})
			require.Equal(t, http.StatusOK, res.status, string(res.body))
			require.NoError(t, json.Unmarshal(res.body, &tk))
			if tk.Kind == "workflow" {
				break
			}
		}
		require.Equal(t, id, tk.Job.ID)
		require.Equal(t, "flowed", tk.Deployment.ID)
		require.Equal(t, "r1", tk.Resource.Name)
		require.Equal(t, "ws", tk.Job.Workflow.WorkspaceID)
	})
}

// TestWorkflowJobThroughThePullClient: the pull client (api/client, as
// `reconciler jobs next|heartbeat|report` use it) takes a workflow task's
// job, heartbeats and reports it; the job is listed meanwhile and the
// workflow completes.
func TestWorkflowJobThroughThePullClient(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		f.publish("pulled", pulled)
		c, err := client.New(f.http.URL, f.tokens["agent"])
		require.NoError(t, err)
		admin, err := client.New(f.http.URL, f.tokens["admin"])
		require.NoError(t, err)
		_, err = admin.RunWorkflow(f.ctx, api.WorkflowRun{Template: "pulled", ID: "wfc"})
		require.NoError(t, err)
		f.drain()

		tk, ok, err := c.NextJob(f.ctx, "ext", "runner-1", 0)
		require.NoError(t, err)
		require.True(t, ok, "the workflow's job is handed out")
		require.Equal(t, pull.KindWorkflow, tk.Kind)
		require.Equal(t, "wfc", tk.Job.Workflow.ID)
		page, err := admin.ListJobs(f.ctx, api.JobFilter{JobAgentID: "ext", Status: []string{"inProgress"}}, client.Page{Limit: 10})
		require.NoError(t, err)
		require.Len(t, page.Items, 1)
		require.Equal(t, tk.Job.ID, page.Items[0].ID, "the taken job is listed")
		require.Equal(t, "deploy", page.Items[0].Workflow.Task)

		hb, err := c.HeartbeatJob(f.ctx, "ext", tk.Job.ID, tk.HandOut(), tk.TakeToken)
		require.NoError(t, err)
		require.False(t, hb.LeaseUntil.Before(tk.Job.LeaseUntil), "a heartbeat only extends")
		require.NoError(t, c.ReportTakenJob(f.ctx, "ext", tk.Job.ID, api.TakerReport{HandOut: tk.HandOut(), TakeToken: tk.TakeToken,
			JobReport: api.JobReport{Status: release.JobSuccessful, Message: "done"}}))
		f.drain()
		st, err := admin.GetWorkflow(f.ctx, "wfc")
		require.NoError(t, err)
		require.Equal(t, workflow.WorkflowSucceeded, st.Workflow.Phase)
	})
}

// TestWorkflowJobLostAfterItsLastHandOut: a taker that stops heartbeating
// the last hand-out of a workflow job loses it at its lease's end: the
// workflow's pass then fails the TaskRun and ends the stored job.
func TestWorkflowJobLostAfterItsLastHandOut(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		_, err := f.st.releases.JobAgents().Put(f.ctx, release.JobAgent{ID: "puller", Name: "puller", Type: release.PullAgentType,
			Config: map[string]any{"lease": "10s", "max_hand_outs": 1}}, 0)
		require.NoError(t, err)
		tpl := map[string]any{
			"apiVersion": "reconciler.dev/v1", "kind": "WorkflowTemplate", "metadata": map[string]any{"name": "once"},
			"spec": map[string]any{"tasks": []any{map[string]any{"name": "run", "type": "job", "jobAgentRef": "puller"}}},
		}
		f.publish("once", tpl)
		res := f.do(http.MethodPost, "/api/v1/workflows", "write", map[string]any{"template": "once", "id": "wfl"})
		require.Equal(t, http.StatusCreated, res.status, string(res.body))
		f.drain()
		tk := f.takeWorkflowJob("puller", "host-1")
		f.clock.Advance(5 * time.Second)
		f.drain()
		require.Equal(t, "inProgress", f.jobField(tk.Job.ID, "status"), "not before the lease ends")
		f.clock.Advance(5 * time.Second)
		f.drain()
		st := f.do(http.MethodGet, "/api/v1/workflows/wfl", "read", nil).json(t)
		require.Equal(t, "Failed", st["workflow"].(map[string]any)["phase"], "%v", st)
		require.Equal(t, "failure", f.jobField(tk.Job.ID, "status"))
		require.Contains(t, f.jobField(tk.Job.ID, "message"), "lost")
		require.Equal(t, http.StatusNoContent, f.do(http.MethodPost, takePath("puller", "0s"), "agent", map[string]any{"taker": "h2"}).status)
		f.do(http.MethodPost, beatPath("puller", tk.Job.ID), "agent", map[string]any{"hand_out": 1, "take_token": tk.TakeToken}).problem(t, http.StatusConflict)
	})
}

// TestWorkflowJobEndsWithItsWorkflow: cancelling the workflow ends its
// pull job cancelled: no taker gets it, its taker's heartbeat is refused.
func TestWorkflowJobEndsWithItsWorkflow(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		f.publish("pulled", pulled)
		for _, id := range []string{"wfa", "wfb"} {
			res := f.do(http.MethodPost, "/api/v1/workflows", "write", map[string]any{"template": "pulled", "id": id})
			require.Equal(t, http.StatusCreated, res.status, string(res.body))
		}
		f.drain()
		tk := f.takeWorkflowJob("ext", "host-1")
		require.Equal(t, "wf/wfa/deploy/0", tk.Job.ID)
		for _, id := range []string{"wfa", "wfb"} {
			require.Equal(t, http.StatusNoContent, f.do(http.MethodPost, "/api/v1/workflows/"+id+"/cancel", "write", nil).status)
		}
		f.drain()
		require.Equal(t, "cancelled", f.jobField("wf/wfa/deploy/0", "status"))
		require.Equal(t, "cancelled", f.jobField("wf/wfb/deploy/0", "status"))
		require.Equal(t, http.StatusNoContent, f.do(http.MethodPost, takePath("ext", "0s"), "agent", map[string]any{"taker": "h2"}).status,
			"a cancelled job is never handed out")
		f.do(http.MethodPost, beatPath("ext", tk.Job.ID), "agent", map[string]any{"hand_out": 1, "take_token": tk.TakeToken}).problem(t, http.StatusConflict)
	})
}

// TestCancelWorkflowJobByID: POST /jobs/{id}/cancel cancels a workflow
// task's job as it does a release job's (scope write; agent tokens are
// refused): the job ends cancelled, its taker's heartbeat is refused, and
// its TaskRun ends Cancelled, the workflow Failed (its failure policy
// decides; it is not cancelled). Unknown jobs are 404, ended ones 422.
func TestCancelWorkflowJobByID(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		f.startPulled("wfc")
		id := "wf/wfc/deploy/0"
		path := "/api/v1/jobs/" + url.PathEscape(id) + "/cancel"
		tk := f.takeWorkflowJob("ext", "host-1")
		require.Equal(t, id, tk.Job.ID)

		for _, tok := range []string{"read", "agent", "agent-elsewhere"} {
			f.do(http.MethodPost, path, tok, nil).problem(t, http.StatusForbidden)
		}
		for _, bad := range []string{"wf/nope/deploy/0", "wf/wfc/nope/0", "wf/wfc/deploy/7"} {
			f.do(http.MethodPost, "/api/v1/jobs/"+url.PathEscape(bad)+"/cancel", "write", nil).problem(t, http.StatusNotFound)
		}
		require.Equal(t, "inProgress", f.jobField(id, "status"), "the refusals changed nothing")

		require.Equal(t, http.StatusNoContent, f.do(http.MethodPost, path, "write", nil).status)
		f.drain()
		require.Equal(t, "cancelled", f.jobField(id, "status"))
		f.do(http.MethodPost, beatPath("ext", id), "agent", map[string]any{"hand_out": 1, "take_token": tk.TakeToken}).problem(t, http.StatusConflict)
		st := f.do(http.MethodGet, "/api/v1/workflows/wfc", "read", nil).json(t)
		require.Equal(t, "Failed", st["workflow"].(map[string]any)["phase"], "%v", st)
		runs := st["taskRuns"].([]any)
		require.Len(t, runs, 1)
		require.Equal(t, "Cancelled", runs[0].(map[string]any)["phase"], "%v", runs)
		require.Equal(t, "cancelled by user-write", runs[0].(map[string]any)["message"], "the principal is recorded")
		f.do(http.MethodPost, path, "write", nil).problem(t, http.StatusUnprocessableEntity)
	})
}

// TestPullTakeIsFair: a pull agent whose release jobs keep arriving still
// gets its waiting workflow job: the take looks for the two kinds first
// in turn.
func TestPullTakeIsFair(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		f.startPulled("wff")
		var kinds []string
		for i := range 4 {
			require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v" + jsonNumber(float64(i))}).status)
			f.drain()
			res := f.do(http.MethodPost, takePath("ext", "0s"), "agent", map[string]any{"taker": "host-1"})
			require.Equal(t, http.StatusOK, res.status, string(res.body))
			var tk wfTaken
			require.NoError(t, json.Unmarshal(res.body, &tk))
			kinds = append(kinds, tk.Kind)
			if tk.Kind == "workflow" {
				require.Equal(t, "wf/wff/deploy/0", tk.Job.ID)
				break
			}
			// The release job ends, and the next version brings another.
			require.Equal(t, http.StatusNoContent, f.do(http.MethodPost, reportPath("ext", tk.Job.ID), "agent",
				map[string]any{"hand_out": tk.Job.Take.HandOut, "take_token": tk.TakeToken, "status": "successful"}).status)
		}
		require.Contains(t, kinds, "workflow", "the workflow job waited behind release jobs: %v", kinds)
		require.LessOrEqual(t, len(kinds), 2, "each kind gets at least every other take: %v", kinds)
	})
}

// startPulled starts workflow id of template pulled and runs its passes,
// so its job waits for a pull taker.
func (f *fixture) startPulled(id string) {
	f.t.Helper()
	f.publish("pulled", pulled)
	res := f.do(http.MethodPost, "/api/v1/workflows", "write", map[string]any{"template": "pulled", "id": id})
	require.Equal(f.t, http.StatusCreated, res.status, string(res.body))
	f.drain()
}
