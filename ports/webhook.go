package ports

import (
	"context"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// WebhookRequest is one HTTP request of a workflow's webhook task.
type WebhookRequest struct {
	URL     string
	Method  string // default POST
	Headers map[string]string
	// Body is sent as JSON unless it is a string, which is sent as is.
	Body any
}

// WebhookResponse is what came back.
type WebhookResponse struct {
	Status int
	Body   []byte
}

// Webhook sends webhook tasks' requests. An error means no response came
// (the task fails with it); any response, 2xx or not, is returned.
type Webhook interface {
	Send(ctx context.Context, r WebhookRequest) (WebhookResponse, error)
}

// SecretResolver turns a sensitive value's reference into its value, at
// the moment an executor sends it; the value is never stored or logged.
type SecretResolver interface {
	Resolve(ctx context.Context, ref release.SecretRef) (string, error)
}
