package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/engine/pull"
	"github.com/reconcilerhq/reconciler/ports"
)

// MaxTakeWait caps the wait of a pull agent's take (?wait).
const MaxTakeWait = pull.DefaultMaxWait

// TakeRequest is a pull agent's ask for its next job.
type TakeRequest struct {
	Taker string `json:"taker" minLength:"1" maxLength:"255" doc:"who takes the job (a host name), shown on the job"`
}

// HeartbeatRequest renews a taker's lease.
type HeartbeatRequest struct {
	HandOut   int    `json:"hand_out" minimum:"1" doc:"the hand-out the job was taken under (job.take.hand_out)"`
	TakeToken string `json:"take_token" minLength:"1" maxLength:"128" doc:"the take's take_token"`
}

// Heartbeat is a renewed lease.
type Heartbeat struct {
	JobID      string    `json:"job_id"`
	HandOut    int       `json:"hand_out"`
	LeaseUntil time.Time `json:"lease_until" doc:"the lease's new end: heartbeat before it, or the job is handed out again"`
}

// TakerReport is what a pull agent's taker reports about a job it took.
type TakerReport struct {
	HandOut   int    `json:"hand_out" minimum:"1" doc:"the hand-out the job was taken under (job.take.hand_out)"`
	TakeToken string `json:"take_token" minLength:"1" maxLength:"128" doc:"the take's take_token"`
	JobReport
}

// PullAgentPath names a pull agent in a path.
type PullAgentPath struct {
	AgentID string `path:"id" doc:"the pull agent's job agent id"`
}

// PullJobPath names a job of a pull agent in a path.
type PullJobPath struct {
	PullAgentPath
	JobID string `path:"job" doc:"the job id"`
}

// SignedHeaders are the headers of a request signed by a job agent.
type SignedHeaders struct {
	Timestamp string `header:"X-Reconciler-Timestamp" doc:"Unix seconds, for a signed request"`
	Signature string `header:"X-Reconciler-Signature" doc:"sha256=HEX, for a signed request"`
}

// takeOut is a take's answer: 200 with the job, or 204 when none came.
type takeOut struct {
	Status int
	Body   *pull.Taken
}

// signedOp is an operation of scope agent that a pull agent may instead
// sign with its report_secret over subject.
func (s *Server) signedOp(id, path, summary, subject string) huma.Operation {
	op := s.op(id, http.MethodPost, path, summary+"; with a token of scope agent, or signed with the agent's report_secret "+
		"(headers "+TimestampHeader+": Unix seconds and "+SignatureHeader+": sha256= and the 64 lowercase hex digits of HMAC-SHA256(secret, TIMESTAMP.POST.PATH."+subject+".BODY), PATH as sent, without the query; "+
		"a signature is accepted once, within 5 minutes of its timestamp)", ports.ScopeAgent, "pull agents")
	op.Security = append(op.Security, map[string][]string{securitySignature: {}})
	op.Metadata[metaSigned] = true
	return op
}

// checkSigned verifies that the request acts as job agent agentID: a
// signed one by the agent's signature over subject, a bearer one by a token bound to
// the agent (ports.Token.ActsFor; admin acts for every agent).
func (s *Server) checkSigned(ctx context.Context, agentID, subject string, h SignedHeaders, raw []byte) error {
	p := principal(ctx)
	if !p.Signed {
		if !p.Token.ActsFor(agentID) {
			return huma.Error403Forbidden("this token does not act for job agent " + agentID + " (token create --scope agent --agent " + agentID + ")")
		}
		return nil
	}
	_, err := s.verifyAgentSignature(ctx, agentID, subject, h.Timestamp, h.Signature, raw)
	return err
}

func (s *Server) registerPull() {
	next := s.signedOp("takeJob", "/job-agents/{id}/jobs/next",
		"Take the next job of a pull agent: the oldest pending job (or one whose taker's lease ran out), leased to the caller, "+
			"waiting up to ?wait for one (200 with the job, 204 when none came)", "AGENT_ID")
	next.Responses = map[string]*huma.Response{"204": {Description: "no job came within the wait"}}
	next.Metadata[metaLongPoll] = true
	next.Errors = append(next.Errors, http.StatusTooManyRequests)
	huma.Register(s.api, next, func(ctx context.Context, in *struct {
		PullAgentPath
		SignedHeaders
		Wait    string `query:"wait" doc:"how long to wait for a job, a Go duration up to 1m (0s: answer at once)" default:"0s"`
		RawBody []byte
		Body    TakeRequest
	}) (*takeOut, error) {
		wait, err := time.ParseDuration(in.Wait)
		if err != nil || wait < 0 || wait > MaxTakeWait {
			return nil, huma.Error422UnprocessableEntity("bad wait", &huma.ErrorDetail{Location: "query.wait",
				Message: "must be a duration between 0s and " + MaxTakeWait.String(), Value: in.Wait})
		}
		if err := s.checkSigned(ctx, in.AgentID, in.AgentID, in.SignedHeaders, in.RawBody); err != nil {
			return nil, err
		}
		if s.o.Pull == nil {
			return nil, huma.Error404NotFound("pull agents are not served here")
		}
		t, ok, err := s.o.Pull.Next(ctx, in.AgentID, in.Body.Taker, wait)
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		if !ok {
			return &takeOut{Status: http.StatusNoContent}, nil
		}
		return &takeOut{Status: http.StatusOK, Body: &t}, nil
	})
	huma.Register(s.api, s.signedOp("heartbeatJob", "/job-agents/{id}/jobs/{job}/heartbeat",
		"Renew a pull agent's lease on a job it took, by its hand-out and take token (403 for another take token, 409 when the job was handed out again or ended)", "JOB_ID"),
		func(ctx context.Context, in *struct {
			PullJobPath
			SignedHeaders
			RawBody []byte
			Body    HeartbeatRequest
		}) (*body[Heartbeat], error) {
			if err := s.checkSigned(ctx, in.AgentID, in.JobID, in.SignedHeaders, in.RawBody); err != nil {
				return nil, err
			}
			if s.o.Pull == nil {
				return nil, huma.Error404NotFound("pull agents are not served here")
			}
			row, err := s.o.Pull.Heartbeat(ctx, in.AgentID, in.JobID, in.Body.HandOut, in.Body.TakeToken)
			if err != nil {
				return nil, s.failTake(ctx, err)
			}
			return reply(Heartbeat{JobID: row.ID, HandOut: row.Take.HandOut, LeaseUntil: row.LeaseUntil}), nil
		})
	report := s.signedOp("reportTakenJob", "/job-agents/{id}/jobs/{job}/report",
		"Report on a job a pull agent took, by its hand-out and take token (403 for another take token, 409 when the job was handed out again); "+
			"a non-terminal report renews the lease as a heartbeat does", "JOB_ID")
	report.DefaultStatus = http.StatusNoContent
	huma.Register(s.api, report, func(ctx context.Context, in *struct {
		PullJobPath
		SignedHeaders
		RawBody []byte
		Body    TakerReport
	}) (*struct{}, error) {
		if err := s.checkSigned(ctx, in.AgentID, in.JobID, in.SignedHeaders, in.RawBody); err != nil {
			return nil, err
		}
		if s.o.Pull == nil {
			return nil, huma.Error404NotFound("pull agents are not served here")
		}
		b := in.Body
		rep := ports.JobReport{Status: b.Status, Message: b.Message, ExternalID: b.ExternalID, Outputs: b.Outputs, Links: b.Links}
		if err := s.o.Pull.Report(ctx, in.AgentID, in.JobID, b.HandOut, b.TakeToken, rep); err != nil {
			return nil, s.failTake(ctx, err)
		}
		return nil, nil
	})
}

// failTake answers a taker's heartbeat or report error: a wrong take
// token is 403, the rest as s.fail.
func (s *Server) failTake(ctx context.Context, err error) error {
	if errors.Is(err, pull.ErrBadTakeToken) {
		return huma.Error403Forbidden("take_token is not the token of this hand-out")
	}
	return s.fail(ctx, err)
}
