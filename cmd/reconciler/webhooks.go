package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/reconcilerhq/reconciler/adapters/github"
	"github.com/reconcilerhq/reconciler/adapters/githubactions"
	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/internal/delivery"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// The webhooks serve takes on its listener, under the API's prefix. They
// authenticate by their signature (X-Hub-Signature-256), not a bearer
// token, so they are handlers of their own beside the API's operations.
const (
	// githubWebhookPath takes GitHub's pull_request, pull_request_review,
	// check_suite and check_run deliveries (--github-webhook-secret).
	githubWebhookPath = api.Prefix + "/webhooks/github"
	// githubActionsWebhookPath takes GitHub's workflow_run deliveries:
	// POST /api/v1/webhooks/github-actions/<job agent id>.
	githubActionsWebhookPath = api.Prefix + "/webhooks/github-actions/"
)

// mountWebhooks adds the webhook receivers to serve's handlers by path:
// the GitHub Actions one, and the GitHub one when hook is not nil (its
// bodies capped at 1 MiB). The paths are more specific than the API's
// prefix, so the mux hands them their deliveries without the API's bearer
// check.
func mountWebhooks(extra map[string]http.Handler, actions githubActionsWebhooks, hook http.Handler) {
	extra[githubActionsWebhookPath] = actions
	if w, ok := hook.(github.Webhook); ok && actions.deliveries != nil {
		w.Deliveries = actions.deliveries
		hook = w
	}
	if hook != nil {
		extra[githubWebhookPath] = http.MaxBytesHandler(hook, 1<<20+1)
	}
}

// githubActionsWebhooks serves githubActionsWebhookPath: a delivery for
// job agent record <id> of type github-actions is verified with the secret
// its config's webhookSecretRef names and its run's status reported
// (githubactions.WebhookHandler: 202 reported, 204 ignored event, 400
// malformed, 401 bad signature, 413 over 1 MiB). An unknown id, an agent
// of another type or one without webhookSecretRef is answered exactly as
// a bad signature (401, after the same checks), so job agent ids cannot be
// enumerated without a secret.
type githubActionsWebhooks struct {
	agents  ports.Objects[release.JobAgent]
	secrets ports.SecretResolver
	report  ports.JobReporter
	// deliveries remembers delivery ids, for both webhooks (nil: none).
	deliveries delivery.Claim
}

// deliveryClaims remembers GitHub delivery ids in tokens' nonces for
// delivery.Window, so every process sharing the store takes a delivery
// once.
func deliveryClaims(tokens ports.Tokens, clock ports.Clock) delivery.Claim {
	return func(ctx context.Context, id string) (bool, error) {
		now := clock.Now()
		ok, err := tokens.NonceClaim(ctx, "github-delivery:"+id, now, now.Add(delivery.Window))
		if err != nil {
			return false, fmt.Errorf("claim delivery %s: %w", id, err)
		}
		return ok, nil
	}
}

// ServeHTTP handles one delivery.
func (h githubActionsWebhooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, githubActionsWebhookPath)
	if id == "" || strings.Contains(id, "/") {
		http.NotFound(w, r)
		return
	}
	unknown := githubactions.WebhookHandler{AgentID: id, SecretRef: "env:UNKNOWN", Secrets: unguessableSecret{}, Reporter: h.report}
	a, err := h.agents.Get(r.Context(), id)
	switch {
	case errors.Is(err, ports.ErrNotFound), err == nil && a.Value.Type != githubactions.Type:
		unknown.ServeHTTP(w, r)
		return
	case err != nil:
		http.Error(w, "cannot read the job agent", http.StatusServiceUnavailable)
		return
	}
	ref, err := githubactions.WebhookSecretRef(a.Value.Config)
	if err != nil || ref == "" {
		unknown.ServeHTTP(w, r)
		return
	}
	githubactions.WebhookHandler{AgentID: id, SecretRef: ref, Secrets: h.secrets, Reporter: h.report, Deliveries: h.deliveries}.ServeHTTP(w, r)
}

// unguessableSecret resolves every reference to 32 fresh random bytes: a
// delivery for no agent goes through the same checks as one for a real
// agent and fails its signature the same way.
type unguessableSecret struct{}

// Resolve returns a new random secret.
func (unguessableSecret) Resolve(context.Context, release.SecretRef) (string, error) {
	return rand.Text(), nil
}
