package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/reconcilerhq/reconciler/api"
)

// ReportJobSigned reports on a job as its agent, signed with the agent's
// report secret at time at (no token is sent): see api.SignReport.
func (c *Client) ReportJobSigned(ctx context.Context, id string, r api.JobReport, secret string, at time.Time) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("report job %s: encode: %w", id, err)
	}
	anon := *c
	anon.token = ""
	return anon.send(ctx, http.MethodPost, "/jobs/"+esc(id)+"/report", bytes.NewReader(raw), true, nil,
		api.TimestampHeader, strconv.FormatInt(at.Unix(), 10), api.SignatureHeader, api.SignReport(secret, at, id, raw))
}
