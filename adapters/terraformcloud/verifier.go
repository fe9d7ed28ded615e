package terraformcloud

import (
	"context"
	"fmt"
	"net/http"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/ports"
)

// Verifier is the terraform-cloud verification provider: a measurement
// reads a run's status. The result the conditions read as `result` is
// {run_id, status, has_changes}, e.g. successCondition
// `result.status == "applied"`. Goroutine-safe.
type Verifier struct{ api *api }

var _ ports.Verifier = (*Verifier)(nil)

// NewVerifier returns a verifier reading tokens through secrets.
func NewVerifier(secrets ports.SecretResolver, o outbound.Options) *Verifier {
	return &Verifier{api: newAPI(secrets, o)}
}

// Type returns "terraform-cloud".
func (v *Verifier) Type() string { return Type }

type verifierConfig struct{ address, runID, tokenRef string }

// ValidateProviderConfig checks a terraform-cloud provider.config; a
// refusal is a *release.FieldError naming provider.config.<key>. Keys:
// runId (default: the verified job's external id), tokenRef (required),
// address (default https://app.terraform.io).
func ValidateProviderConfig(cfg map[string]any) error {
	_, err := parseVerifierConfig(cfg, "run-default")
	return err
}

func parseVerifierConfig(cfg map[string]any, jobRun string) (verifierConfig, error) {
	r := &configmap.Reader{Prefix: "provider.config", Map: cfg}
	c := verifierConfig{address: r.URL("address", DefaultAddress), runID: r.String("runId", jobRun), tokenRef: r.SecretRef("tokenRef", "")}
	if r.Err == nil && !runID.MatchString(c.runID) {
		r.Fail("runId", fmt.Sprintf("want a run id such as \"run-CZcmD7eagjhyX0vN\" (default: the job's external id), got %q", c.runID))
	}
	return c, r.Err
}

// Measure reads the run's status once.
func (v *Verifier) Measure(ctx context.Context, r ports.MeasureRequest) (any, error) {
	cfg, err := parseVerifierConfig(r.Metric.Provider.Config, r.Job.ExternalID)
	if err != nil {
		return nil, fmt.Errorf("%s: metric %q: %w", Type, r.Metric.Name, err)
	}
	h, err := v.api.header(ctx, "provider.config.tokenRef", cfg.tokenRef, cfg.address)
	if err != nil {
		return nil, fmt.Errorf("%s: metric %q: %w", Type, r.Metric.Name, err)
	}
	run, err := v.api.getRun(ctx, cfg.address, h, cfg.runID)
	if outbound.StatusOf(err) == http.StatusNotFound {
		return nil, fmt.Errorf("%s: metric %q: run %s not found: %w", Type, r.Metric.Name, cfg.runID, err)
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"run_id": run.ID, "status": run.Attributes.Status, "has_changes": run.Attributes.HasChanges}, nil
}
