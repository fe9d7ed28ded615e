package apply

import (
	"errors"
	"fmt"
	"strings"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// CheckJobAgent checks a job agent's config alone against its type with v
// (nil accepts any). A refusal is a *release.FieldError naming "type" (an
// unknown type) or "config.KEY", relative to the agent's body: apply
// prefixes "spec.", the API's PUT reports it as is.
func CheckJobAgent(v AgentConfigValidator, a *release.JobAgent) error {
	if v == nil {
		return nil
	}
	err := v(a.Type, a.Config)
	if err == nil {
		return nil
	}
	field, msg := agentField(err)
	if field == "type" {
		return release.Invalid("type", msg)
	}
	return release.Invalid(release.Field("config", field), fmt.Sprintf("job agent %s (type %s): %s", a.ID, a.Type, msg))
}

// CheckDeploymentAgent checks agent a's config merged with deployment d's
// job_agent_config (as a job gets it, before the version's layer) with v.
// A refusal names "job_agent_config.KEY" when the key is d's and
// fromAgent is false, else "config.KEY" (or "type") with fromAgent true: the bad key
// is the agent's.
func CheckDeploymentAgent(v AgentConfigValidator, a *release.JobAgent, d *release.Deployment) (fromAgent bool, err error) {
	if v == nil {
		return false, nil
	}
	verr := v(a.Type, release.MergeConfig(a.Config, d.JobAgentConfig))
	if verr == nil {
		return false, nil
	}
	field, msg := agentField(verr)
	msg = fmt.Sprintf("job agent %s (type %s) with deployment %s: %s", a.ID, a.Type, d.ID, msg)
	if field == "type" {
		return true, release.Invalid("type", msg)
	}
	top, _, _ := strings.Cut(field, ".")
	if _, fromDep := d.JobAgentConfig[top]; fromDep {
		return false, release.Invalid(release.Field("job_agent_config", field), msg)
	}
	return true, release.Invalid(release.Field("config", field), msg)
}

// agentField is the config key a validator's refusal names (without its
// "job_agent_config." prefix; "type" for an unknown type) and its message.
func agentField(err error) (string, string) {
	var fe *release.FieldError
	if !errors.As(err, &fe) {
		return "", err.Error()
	}
	if fe.Field == "type" {
		return "type", fe.Msg
	}
	return strings.TrimPrefix(strings.TrimPrefix(fe.Field, "job_agent_config"), "."), fe.Msg
}
