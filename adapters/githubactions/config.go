package githubactions

import (
	"regexp"

	"github.com/reconcilerhq/reconciler/internal/configmap"
)

// Config keys and defaults of a job's merged job_agent_config.
const (
	DefaultBaseURL          = "https://api.github.com"
	DefaultRef              = "main"
	DefaultCorrelationInput = "reconciler_job"
)

// config is one job's validated configuration.
type config struct {
	baseURL          string
	owner, repo      string
	workflow         string
	ref              string
	inputs           map[string]string
	tokenRef         string
	correlationInput string
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// ValidateConfig checks a github-actions job_agent_config (the agent's
// config merged with the deployment's, version's or task's); a refusal is
// a *release.FieldError naming job_agent_config.<key>. Keys:
//
//	owner, repo        the repository (required)
//	workflowFile       the workflow's file name or numeric id (required)
//	ref                the git ref to run on (default "main")
//	inputs             workflow inputs, an object of scalars
//	tokenRef           secret reference of the token (required)
//	baseURL            the API root (default https://api.github.com)
//	correlationInput   the input carrying the correlation key
//	                   (default "reconciler_job")
//	webhookSecretRef   secret reference of the secret GitHub signs this
//	                   agent's workflow_run webhook deliveries with
//	                   (optional; see WebhookHandler)
func ValidateConfig(cfg map[string]any) error {
	_, err := parseConfig(cfg)
	if err == nil {
		_, err = WebhookSecretRef(cfg)
	}
	return err
}

// WebhookSecretRef reads the optional webhookSecretRef of an agent
// record's config: "" when absent; a value that is not a secret reference
// is a *release.FieldError naming job_agent_config.webhookSecretRef.
func WebhookSecretRef(cfg map[string]any) (string, error) {
	if _, ok := cfg["webhookSecretRef"]; !ok {
		return "", nil
	}
	r := &configmap.Reader{Prefix: "job_agent_config", Map: cfg}
	ref := r.SecretRef("webhookSecretRef", "")
	return ref, r.Err
}

func parseConfig(cfg map[string]any) (config, error) {
	r := &configmap.Reader{Prefix: "job_agent_config", Map: cfg}
	c := config{
		baseURL:          r.URL("baseURL", DefaultBaseURL),
		owner:            r.Required("owner"),
		repo:             r.Required("repo"),
		workflow:         r.Required("workflowFile"),
		ref:              r.String("ref", DefaultRef),
		inputs:           r.Strings("inputs"),
		tokenRef:         r.SecretRef("tokenRef", ""),
		correlationInput: r.String("correlationInput", DefaultCorrelationInput),
	}
	for key, v := range map[string]string{"owner": c.owner, "repo": c.repo, "workflowFile": c.workflow, "correlationInput": c.correlationInput} {
		if v != "" && !namePattern.MatchString(v) {
			r.Fail(key, "may hold only letters, digits, '.', '_' and '-'")
		}
	}
	if c.ref == "" {
		r.Fail("ref", "must not be empty")
	}
	if _, ok := c.inputs[c.correlationInput]; ok {
		r.Fail("inputs."+c.correlationInput, "is set by the agent (the correlation key)")
	}
	return c, r.Err
}
