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
	// IdempotencyKey, when set, is sent as the Idempotency-Key header: a
	// request sent again after a crash carries the same key, so the
	// receiver can tell it from a new one.
	IdempotencyKey string
}

// WebhookResponse is what came back.
type WebhookResponse struct {
	Status int
	Body   []byte
}

// IdempotencyKeyHeader is the header that carries a request's
// IdempotencyKey.
const IdempotencyKeyHeader = "Idempotency-Key"

// Webhook sends webhook tasks' requests. An error means no response came
// (the task fails with it); any response, 2xx or not, is returned.
//
// Invariants (checked by porttest.Webhook): the request arrives with its
// method (POST when empty), URL, headers and IdempotencyKey (as the
// Idempotency-Key header); a string body as is, any other as JSON with
// Content-Type application/json; any status comes back with its body; a
// server that does not answer, or a cancelled context, is an error.
type Webhook interface {
	Send(ctx context.Context, r WebhookRequest) (WebhookResponse, error)
}

// SecretResolver turns a sensitive value's reference into its value, at
// the moment an executor sends it; the value is never stored or logged.
type SecretResolver interface {
	Resolve(ctx context.Context, ref release.SecretRef) (string, error)
}
