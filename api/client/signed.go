package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/engine/pull"
)

// Signer signs requests as a job agent with its report secret (the value
// of its config.report_secret reference), instead of sending a token.
type Signer struct {
	// Secret is the HMAC key; it must not be empty.
	Secret string
	// Now is the signing clock; nil means time.Now.
	Now func() time.Time
}

// ReportJobSigned reports on a job as its agent, signed with the agent's
// report secret at time at (no token is sent): see api.SignRequest.
func (c *Client) ReportJobSigned(ctx context.Context, id string, r api.JobReport, secret string, at time.Time) error {
	return c.signed(ctx, Signer{Secret: secret, Now: func() time.Time { return at }}, "/jobs/"+esc(id)+"/report", "", id, r, nil)
}

// NextJobSigned is NextJob signed by pull agent agentID's Signer.
func (c *Client) NextJobSigned(ctx context.Context, s Signer, agentID, taker string, wait time.Duration) (pull.Taken, bool, error) {
	var t pull.Taken
	err := c.stretched(wait).signed(ctx, s, "/job-agents/"+esc(agentID)+"/jobs/next", query("wait", wait.String()),
		agentID, api.TakeRequest{Taker: taker}, &t)
	if err != nil || t.Job.ID == "" {
		return pull.Taken{}, false, err
	}
	return t, true, nil
}

// HeartbeatJobSigned is HeartbeatJob signed by pull agent agentID's Signer.
func (c *Client) HeartbeatJobSigned(ctx context.Context, s Signer, agentID, jobID string, r api.HeartbeatRequest) (api.Heartbeat, error) {
	var h api.Heartbeat
	return h, c.signed(ctx, s, "/job-agents/"+esc(agentID)+"/jobs/"+esc(jobID)+"/heartbeat", "", jobID, r, &h)
}

// ReportTakenJobSigned is ReportTakenJob signed by pull agent agentID's
// Signer.
func (c *Client) ReportTakenJobSigned(ctx context.Context, s Signer, agentID, jobID string, r api.TakerReport) error {
	return c.signed(ctx, s, "/job-agents/"+esc(agentID)+"/jobs/"+esc(jobID)+"/report", "", jobID, r, nil)
}

// signed POSTs in to path (under /api/v1, escaped; q is its query, "" or
// "?…") signed by s over the method, the escaped URL path the server will
// see, subject (the job id; the agent id for a take) and the body, without
// a token, and decodes the answer into out.
func (c *Client) signed(ctx context.Context, s Signer, path, q, subject string, in, out any) error {
	if s.Secret == "" {
		return fmt.Errorf("POST %s: empty report secret: %w", path, ErrUnauthorized)
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("POST %s: encode: %w", path, err)
	}
	u, err := url.Parse(c.base.String() + api.Prefix + path)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	at := now()
	anon := *c
	anon.token = ""
	return anon.send(ctx, http.MethodPost, path+q, bytes.NewReader(raw), true, out,
		api.TimestampHeader, strconv.FormatInt(at.Unix(), 10),
		api.SignatureHeader, api.SignRequest(s.Secret, at, http.MethodPost, u.EscapedPath(), subject, raw))
}
