package githubactions

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/delivery"
	"github.com/reconcilerhq/reconciler/internal/githubhook"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// MaxWebhookBody caps a webhook delivery's body (GitHub caps payloads at
// 25 MB; a workflow_run event is a few KB).
const MaxWebhookBody = 1 << 20

// VerifySignature reports whether header, an X-Hub-Signature-256 value
// ("sha256=" and the hex HMAC-SHA256 of body under secret), signs body.
// The comparison takes constant time.
func VerifySignature(secret, body []byte, header string) bool {
	return githubhook.VerifySignature(secret, body, header)
}

// Sign returns the X-Hub-Signature-256 value of body under secret, as
// GitHub computes it.
func Sign(secret, body []byte) string { return githubhook.Sign(secret, body) }

// WebhookHandler takes GitHub's webhook deliveries for one agent record:
// it verifies X-Hub-Signature-256 with the secret SecretRef names, and
// reports a workflow_run event's status by (AgentID, run id). A delivery
// may be application/json or application/x-www-form-urlencoded (GitHub's
// default: the JSON in the payload field); the signature is checked over
// the raw body either way. Other
// events (ping, ...) are acknowledged and ignored. It answers 202 when it
// reported (or the job could not take the status: it already ended), 204
// for an ignored event, 400 for a malformed one, 401 for a bad signature,
// 405 for a method other than POST, 413 for a body over MaxWebhookBody
// and 503 when the report failed (the delivery may be redelivered). With
// Deliveries set, a verified delivery is taken once by its
// X-GitHub-Delivery id (delivery.Admit: 200 for a replay).
type WebhookHandler struct {
	AgentID    string
	SecretRef  string
	Secrets    ports.SecretResolver
	Reporter   ports.JobReporter
	Deliveries delivery.Claim
}

var _ http.Handler = WebhookHandler{}

// ServeHTTP handles one delivery.
func (h WebhookHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxWebhookBody+1))
	if err != nil {
		http.Error(w, "cannot read body", http.StatusBadRequest)
		return
	}
	if len(body) > MaxWebhookBody {
		http.Error(w, "body over "+strconv.Itoa(MaxWebhookBody)+" bytes", http.StatusRequestEntityTooLarge)
		return
	}
	secret, err := configmap.Resolve(r.Context(), h.Secrets, "webhook secret", h.SecretRef)
	if err != nil {
		http.Error(w, "webhook secret unavailable", http.StatusServiceUnavailable)
		return
	}
	if !VerifySignature([]byte(secret), body, r.Header.Get("X-Hub-Signature-256")) {
		http.Error(w, "bad X-Hub-Signature-256", http.StatusUnauthorized)
		return
	}
	payload, err := githubhook.Payload(r.Header.Get("Content-Type"), body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !delivery.Admit(w, r, h.Deliveries) {
		return
	}
	reported, err := h.HandleEvent(r.Context(), r.Header.Get("X-GitHub-Event"), payload)
	switch {
	case errors.Is(err, errMalformedEvent):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case err != nil:
		http.Error(w, "report failed", http.StatusServiceUnavailable)
	case reported:
		w.WriteHeader(http.StatusAccepted)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

var errMalformedEvent = errors.New("malformed workflow_run event")

// HandleEvent reports a verified delivery's workflow run status; it
// reports whether the event was a workflow_run it reported. A status the
// job can no longer take (it ended) is not an error.
func (h WebhookHandler) HandleEvent(ctx context.Context, event string, body []byte) (bool, error) {
	if event != "workflow_run" {
		return false, nil
	}
	var ev struct {
		Action      string `json:"action"`
		WorkflowRun *run   `json:"workflow_run"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return false, errors.Join(errMalformedEvent, err)
	}
	if ev.WorkflowRun == nil || ev.WorkflowRun.ID <= 0 || ev.WorkflowRun.Status == "" {
		return false, errMalformedEvent
	}
	st := stateOf(*ev.WorkflowRun)
	err := h.Reporter.ReportJob(ctx, ports.JobReport{AgentID: h.AgentID, ExternalID: strconv.FormatInt(ev.WorkflowRun.ID, 10),
		Status: st.Status, Message: st.Message, Outputs: st.Outputs})
	if errors.Is(err, release.ErrInvalid) || errors.Is(err, ports.ErrNotFound) {
		return true, nil // the job ended already, or is not ours
	}
	return err == nil, err
}
