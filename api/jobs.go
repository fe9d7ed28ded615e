package api

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/engine/pull"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// JobReport is what an agent reports about a job.
type JobReport struct {
	Status     release.JobStatus `json:"status" enum:"pending,queued,inProgress,actionRequired,successful,failure,cancelled,skipped,invalidJobAgent,invalidIntegration,externalRunNotFound"`
	Message    string            `json:"message,omitempty"`
	ExternalID string            `json:"external_id,omitempty" doc:"the agent's own id of the run"`
	// Outputs are what the job produced, read by later workflow tasks as
	// tasks.NAME.outputs.*.
	Outputs map[string]any `json:"outputs,omitempty"`
	// Links are added to the job's links.
	Links map[string]string `json:"links,omitempty" doc:"links for people, name -> http(s) URL (at most 20; names up to 64 bytes, URLs up to 2048); added to the job's, a name already there takes the new URL; release jobs only"`
}

// JobFilter are the filters of the job list; every one given must match.
type JobFilter struct {
	Status       []string `query:"status" doc:"only jobs in one of these statuses (comma-separated)"`
	JobAgentID   string   `query:"job_agent_id" doc:"only this job agent's jobs"`
	DeploymentID string   `query:"deployment_id" doc:"only this deployment's"`
	Environment  string   `query:"environment_id" doc:"only this environment's"`
	ResourceID   string   `query:"resource_id" doc:"only this resource's"`
	VersionID    string   `query:"version_id" doc:"only jobs of releases of this deployment version"`
	WorkspaceID  string   `query:"workspace_id" doc:"only jobs of deployments of this workspace's systems"`
	Target       string   `query:"target" doc:"only this release target's, DEPLOYMENT:ENVIRONMENT:RESOURCE (404 when it does not exist)"`
}

// jobQuery is a JobFilter checked and turned into the store's query.
type jobQuery struct {
	ports.JobListParams
	target release.ReleaseTarget
}

// params checks the filter: known statuses, a well-formed target that
// agrees with the deployment, environment and resource given.
func (f *JobFilter) params() (jobQuery, error) {
	q := jobQuery{JobListParams: ports.JobListParams{JobAgentID: f.JobAgentID, DeploymentID: f.DeploymentID,
		EnvironmentID: f.Environment, ResourceID: f.ResourceID, VersionID: f.VersionID, WorkspaceID: f.WorkspaceID}}
	for _, st := range f.Status {
		if !release.JobStatus(st).Valid() {
			return q, invalid("query.status", "unknown job status "+strconv.Quote(st)+"; want one of "+jobStatusList())
		}
		q.Statuses = append(q.Statuses, release.JobStatus(st))
	}
	if f.Target == "" {
		return q, nil
	}
	t, err := release.ParseTargetKey(f.Target)
	if err != nil {
		return q, huma.Error400BadRequest("bad target key", &huma.ErrorDetail{Location: "query.target", Message: err.Error(), Value: f.Target})
	}
	for _, c := range []struct{ loc, given, want string }{{"query.deployment_id", f.DeploymentID, t.DeploymentID},
		{"query.environment_id", f.Environment, t.EnvironmentID}, {"query.resource_id", f.ResourceID, t.ResourceID}} {
		if c.given != "" && c.given != c.want {
			return q, invalid(c.loc, "target "+f.Target+" is not in "+c.given)
		}
	}
	q.target = t
	q.DeploymentID, q.EnvironmentID, q.ResourceID = t.DeploymentID, t.EnvironmentID, t.ResourceID
	return q, nil
}

// jobStatusList names the job statuses, comma-separated.
func jobStatusList() string {
	names := make([]string, len(release.JobStatuses))
	for i, s := range release.JobStatuses {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// JobPath names a job in a path.
type JobPath struct {
	ID string `path:"id" doc:"job id (workflow jobs' ids hold slashes: escape them as %2F)"`
}

func (s *Server) registerJobs() {
	huma.Register(s.api, s.op("listJobs", http.MethodGet, "/jobs", "List jobs across targets, newest first, filtered by every parameter given: "+
		"the release chain's, and workflow tasks' on pull agents (with `workflow` set)", ports.ScopeRead, "jobs"),
		func(ctx context.Context, in *struct {
			JobFilter
			PageParams
		}) (*body[Page[ports.JobRow]], error) {
			p, err := in.params()
			if err != nil {
				return nil, err
			}
			if in.Target != "" {
				if _, err := s.o.Releases.TargetGet(ctx, p.target); err != nil {
					return nil, s.fail(ctx, err)
				}
			}
			out, err := newestPage(&in.PageParams, func(after *ports.NewestKey, limit int) ([]ports.JobRow, error) {
				q := p.JobListParams
				q.After, q.Limit = after, limit
				return s.jobList(ctx, q)
			}, func(j *ports.JobRow) (time.Time, string) { return j.CreatedAt, j.ID })
			if err != nil {
				return nil, s.failPage(ctx, err)
			}
			return reply(out), nil
		})
	huma.Register(s.api, s.op("getJob", http.MethodGet, "/jobs/{id}", "Read a job: the release chain's, or a workflow task's on a pull agent", ports.ScopeRead, "jobs"),
		func(ctx context.Context, in *JobPath) (*body[ports.JobRow], error) {
			get := s.o.Releases.JobGet
			if wj := s.workflowJobs(); wj != nil && flow.IsJobID(in.ID) {
				get = wj.WorkflowJobGet
			}
			j, err := get(ctx, in.ID)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			return reply(j), nil
		})
	report := s.op("reportJob", http.MethodPost, "/jobs/{id}/report",
		"Report a job's status as its agent: with a token of scope agent, or signed with the agent's report_secret "+
			"(headers "+TimestampHeader+": Unix seconds and "+SignatureHeader+": sha256= and the 64 lowercase hex digits of HMAC-SHA256(secret, TIMESTAMP.POST.PATH.JOB_ID.BODY), PATH as sent, without the query; "+
			"a signature is accepted once, within 5 minutes of its timestamp)", ports.ScopeAgent, "jobs")
	report.Security = append(report.Security, map[string][]string{securitySignature: {}})
	report.Metadata[metaSigned] = true
	report.DefaultStatus = http.StatusNoContent
	huma.Register(s.api, report, func(ctx context.Context, in *struct {
		JobPath
		Timestamp string `header:"X-Reconciler-Timestamp" doc:"Unix seconds, for a signed report"`
		Signature string `header:"X-Reconciler-Signature" doc:"sha256=HEX, for a signed report"`
		RawBody   []byte
		Body      JobReport
	}) (*struct{}, error) {
		rep := ports.JobReport{JobID: in.ID, Status: in.Body.Status, Message: in.Body.Message, ExternalID: in.Body.ExternalID, Outputs: in.Body.Outputs, Links: in.Body.Links}
		if flow.IsJobID(in.ID) {
			if len(rep.Links) > 0 {
				return nil, huma.Error422UnprocessableEntity("workflow jobs keep no links", &huma.ErrorDetail{Location: "body.links", Message: "workflow jobs keep no links; report outputs instead"})
			}
			if principal(ctx).Signed {
				return nil, huma.Error401Unauthorized("workflow jobs take reports with a bearer token of scope agent")
			}
			wj := s.workflowJobs()
			if t := principal(ctx).Token; !t.Allows(ports.ScopeAdmin) {
				agent, err := s.o.Flows.JobAgentOf(ctx, in.ID)
				if err != nil {
					return nil, s.fail(ctx, err)
				}
				if err := s.reportableWithToken(ctx, t, in.ID, agent); err != nil {
					return nil, err
				}
				if wj != nil {
					if row, err := wj.WorkflowJobGet(ctx, in.ID); err == nil && row.Take != nil {
						return nil, huma.Error403Forbidden("job " + in.ID + " is taken by a pull agent: its taker reports under its take, an operator with scope admin here")
					}
				}
			}
			if err := s.o.Flows.ReportJob(ctx, rep); err != nil {
				return nil, s.fail(ctx, err)
			}
			if wj != nil && rep.Status.IsTerminal() {
				if err := pull.EndWorkflowJob(ctx, wj, in.ID, rep.Status, rep.Message, s.o.Clock.Now()); err != nil {
					return nil, s.fail(ctx, err)
				}
			}
			return nil, nil
		}
		j, err := s.o.Releases.JobGet(ctx, in.ID)
		if principal(ctx).Signed {
			if err != nil {
				// Say nothing about which jobs exist to an unauthenticated caller.
				return nil, huma.Error401Unauthorized("bad signature")
			}
			if _, err := s.verifySignedReport(ctx, j, in.Timestamp, in.Signature, in.RawBody); err != nil {
				return nil, err
			}
		} else if err != nil {
			return nil, s.fail(ctx, err)
		} else {
			t := principal(ctx).Token
			if err := s.reportableWithToken(ctx, t, j.ID, j.JobAgentID); err != nil {
				return nil, err
			}
			if j.Take != nil && !t.Allows(ports.ScopeAdmin) {
				return nil, huma.Error403Forbidden("job " + j.ID + " is taken by a pull agent: its taker reports under its take, an operator with scope admin here")
			}
		}
		if err := s.o.Chain.ReportJob(ctx, rep); err != nil {
			return nil, s.fail(ctx, err)
		}
		return nil, nil
	})
	huma.Register(s.api, s.noContent(s.op("cancelJob", http.MethodPost, "/jobs/{id}/cancel", "Cancel an active job: its agent is asked to stop it and it ends cancelled. "+
		"A workflow task's job ends its TaskRun Cancelled without a retry; the workflow is not cancelled, its failure policy decides "+
		"(the task's dependents are cancelled, other branches run on, and the workflow ends Failed)", ports.ScopeWrite, "jobs")),
		func(ctx context.Context, in *JobPath) (*struct{}, error) {
			cancel := s.o.Chain.CancelJob
			if flow.IsJobID(in.ID) {
				cancel = s.o.Flows.CancelJob
			}
			if err := cancel(ctx, in.ID, principal(ctx).Name); err != nil {
				return nil, s.fail(ctx, err)
			}
			return nil, nil
		})
}

// reportableWithToken checks a bearer report on job jobID (a release or a
// workflow job) of agent agentID: an admin token may report on any job; an
// agent token only on a job of a job agent it is bound to, whose jobs
// report through the API (release.ReportsThroughAPI: not a followed push
// agent's, whose status is the vendor's). A release job a pull taker holds
// is refused to agent tokens by the caller (the taker reports through
// /job-agents/{id}/jobs/{job}/report under its take).
func (s *Server) reportableWithToken(ctx context.Context, t ports.Token, jobID, agentID string) error {
	if t.Allows(ports.ScopeAdmin) {
		return nil
	}
	if !t.ActsFor(agentID) {
		return huma.Error403Forbidden("this token does not act for the job's agent")
	}
	a, err := s.objects().JobAgents().Get(ctx, agentID)
	if err != nil && !errors.Is(err, ports.ErrNotFound) {
		return s.fail(ctx, err)
	}
	if err != nil || !release.ReportsThroughAPI(a.Value.Type) {
		return huma.Error403Forbidden("job " + jobID + "'s agent " + agentID + " is followed by serve (its status comes from the system it runs on): a report here is an operator's override and needs scope admin")
	}
	return nil
}

// workflowJobs is the store of workflow tasks' jobs on pull agents, nil
// when the workflow store keeps none.
func (s *Server) workflowJobs() ports.WorkflowJobs {
	wj, _ := s.o.Workflows.(ports.WorkflowJobs)
	return wj
}

// jobList lists one page of jobs matching q from the release chain and
// the workflow jobs, merged newest first by (created_at, id): both lists
// are in that order below the same cursor, so the merged page is too.
func (s *Server) jobList(ctx context.Context, q ports.JobListParams) ([]ports.JobRow, error) {
	rel, err := s.o.Releases.JobList(ctx, q)
	wj := s.workflowJobs()
	if err != nil || wj == nil {
		return rel, err
	}
	wf, err := wj.WorkflowJobList(ctx, q)
	if err != nil || len(wf) == 0 {
		return rel, err
	}
	out := append(rel, wf...)
	slices.SortFunc(out, func(a, b ports.JobRow) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(b.ID, a.ID))
	})
	return out[:min(len(out), ports.VersionPageSize(q.Limit))], nil
}
