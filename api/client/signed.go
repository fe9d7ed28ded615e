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
// report secret at time at (no token is sent): see api.SignRequest.
func (c *Client) ReportJobSigned(ctx context.Context, id string, r api.JobReport, secret string, at time.Time) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("report job %s: encode: %w", id, err)
	}
	anon := *c
	anon.token = ""
	path := "/jobs/" + esc(id) + "/report"
	return anon.send(ctx, http.MethodPost, path, bytes.NewReader(raw), true, nil,
		api.TimestampHeader, strconv.FormatInt(at.Unix(), 10), api.SignatureHeader,
		api.SignRequest(secret, at, http.MethodPost, c.base.EscapedPath()+api.Prefix+path, id, raw))
}
