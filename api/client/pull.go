package client

import (
	"context"
	"net/http"
	"time"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/engine/pull"
)

// NextJob takes the next job of pull agent agentID as taker, waiting up
// to wait (at most api.MaxTakeWait) for one; ok is false when none came.
// The job is leased to the caller: renew it with HeartbeatJob before
// Job.LeaseUntil and report with ReportTakenJob, both under
// Taken.HandOut(). The client's own timeout is stretched past wait.
func (c *Client) NextJob(ctx context.Context, agentID, taker string, wait time.Duration) (pull.Taken, bool, error) {
	var t pull.Taken
	err := c.stretched(wait).do(ctx, http.MethodPost, "/job-agents/"+esc(agentID)+"/jobs/next"+query("wait", wait.String()),
		api.TakeRequest{Taker: taker}, &t)
	if err != nil || t.Job.ID == "" {
		return pull.Taken{}, false, err
	}
	return t, true, nil
}

// HeartbeatJob renews the lease of hand-out handOut (with the take's
// Taken.TakeToken) of job jobID of pull agent agentID; a job handed out
// again or ended is an *Error of status 409, another take token 403.
func (c *Client) HeartbeatJob(ctx context.Context, agentID, jobID string, handOut int, takeToken string) (api.Heartbeat, error) {
	return post[api.Heartbeat](ctx, c, http.MethodPost, "/job-agents/"+esc(agentID)+"/jobs/"+esc(jobID)+"/heartbeat",
		api.HeartbeatRequest{HandOut: handOut, TakeToken: takeToken})
}

// ReportTakenJob reports on job jobID that pull agent agentID's taker
// took, under r.HandOut; a job handed out again is an *Error of status
// 409. A non-terminal report renews the lease.
func (c *Client) ReportTakenJob(ctx context.Context, agentID, jobID string, r api.TakerReport) error {
	return c.do(ctx, http.MethodPost, "/job-agents/"+esc(agentID)+"/jobs/"+esc(jobID)+"/report", r, nil)
}

// stretched is c with its timeout stretched past a long-poll of wait.
func (c *Client) stretched(wait time.Duration) *Client {
	cc := *c
	if c.http.Timeout > 0 {
		hc := *c.http
		hc.Timeout = max(hc.Timeout, wait+30*time.Second)
		cc.http = &hc
	}
	return &cc
}
