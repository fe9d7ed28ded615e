package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/engine/flow"
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

// JobPath names a job in a path.
type JobPath struct {
	ID string `path:"id" doc:"job id (workflow jobs' ids hold slashes: escape them as %2F)"`
}

func (s *Server) registerJobs() {
	huma.Register(s.api, s.op("listJobs", http.MethodGet, "/jobs", "List a release target's jobs, newest first", ports.ScopeRead, "jobs"),
		func(ctx context.Context, in *struct {
			Target string `query:"target" required:"true" doc:"target key DEPLOYMENT:ENVIRONMENT:RESOURCE"`
			Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
		}) (*body[[]ports.JobRow], error) {
			t, err := (&TargetPath{Key: in.Target}).target()
			if err != nil {
				return nil, huma.Error400BadRequest("bad target key", &huma.ErrorDetail{Location: "query.target", Message: err.Error(), Value: in.Target})
			}
			if _, err := s.o.Releases.TargetGet(ctx, t); err != nil {
				return nil, s.fail(ctx, err)
			}
			jobs, err := s.o.Releases.JobsByTarget(ctx, t, in.Limit)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			if jobs == nil {
				jobs = []ports.JobRow{}
			}
			return reply(jobs), nil
		})
	huma.Register(s.api, s.op("getJob", http.MethodGet, "/jobs/{id}", "Read a job of the release chain", ports.ScopeRead, "jobs"),
		func(ctx context.Context, in *JobPath) (*body[ports.JobRow], error) {
			j, err := s.o.Releases.JobGet(ctx, in.ID)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			return reply(j), nil
		})
	report := s.op("reportJob", http.MethodPost, "/jobs/{id}/report",
		"Report a job's status as its agent: with a token of scope agent, or signed with the agent's report_secret "+
			"(headers "+TimestampHeader+": Unix seconds and "+SignatureHeader+": sha256=HEX of HMAC-SHA256(secret, TIMESTAMP.JOB_ID.BODY); "+
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
			if err := s.o.Flows.ReportJob(ctx, rep); err != nil {
				return nil, s.fail(ctx, err)
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
		}
		if err := s.o.Chain.ReportJob(ctx, rep); err != nil {
			return nil, s.fail(ctx, err)
		}
		return nil, nil
	})
	huma.Register(s.api, s.noContent(s.op("cancelJob", http.MethodPost, "/jobs/{id}/cancel", "Cancel an active job: its agent is asked to stop it and it ends cancelled", ports.ScopeWrite, "jobs")),
		func(ctx context.Context, in *JobPath) (*struct{}, error) {
			if err := s.o.Chain.CancelJob(ctx, in.ID, principal(ctx).Name); err != nil {
				return nil, s.fail(ctx, err)
			}
			return nil, nil
		})
}
