// Package httphook is the net/http implementation of ports.Webhook.
//
// Invariants: Any response is returned (2xx or not); bodies capped at 1 MiB;
// the request's idempotency key goes in `Idempotency-Key`; passes
// `porttest.Webhook` against an httptest server
package httphook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
)

// MaxBody is the most response bytes kept (the rest is discarded).
const MaxBody = 1 << 20

// Client sends webhook requests over HTTP.
type Client struct {
	// HTTP is the client used; nil means one with a 30 s timeout.
	HTTP *http.Client
}

var _ ports.Webhook = Client{}

// Send sends r and returns the response's status and (at most MaxBody of)
// its body. A body that is not a string is sent as JSON with
// Content-Type application/json; an IdempotencyKey goes in the
// Idempotency-Key header.
func (c Client) Send(ctx context.Context, r ports.WebhookRequest) (ports.WebhookResponse, error) {
	method := r.Method
	if method == "" {
		method = http.MethodPost
	}
	var body io.Reader
	contentType := ""
	switch b := r.Body.(type) {
	case nil:
	case string:
		body = bytes.NewReader([]byte(b))
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return ports.WebhookResponse{}, fmt.Errorf("webhook %s: encode body: %w", r.URL, err)
		}
		body, contentType = bytes.NewReader(data), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, r.URL, body)
	if err != nil {
		return ports.WebhookResponse{}, fmt.Errorf("webhook: %w", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	if r.IdempotencyKey != "" {
		req.Header.Set(ports.IdempotencyKeyHeader, r.IdempotencyKey)
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return ports.WebhookResponse{}, fmt.Errorf("webhook %s %s: %w", method, r.URL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		return ports.WebhookResponse{}, fmt.Errorf("webhook %s %s: read response: %w", method, r.URL, err)
	}
	return ports.WebhookResponse{Status: resp.StatusCode, Body: data}, nil
}
