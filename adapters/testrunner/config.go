package testrunner

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Config keys read from a job's merged JobAgentConfig.
const (
	keyDelay   = "delay"
	keyOutcome = "outcome"
	keyMessage = "message"
	keyOutputs = "outputs"
)

// Defaults of a job's behaviour.
const (
	defaultDelay   = time.Second
	defaultOutcome = release.JobSuccessful
)

// dispatchStatus is the status every accepted job has after Dispatch.
const dispatchStatus = release.JobInProgress

// jobConfig is one job's behaviour.
type jobConfig struct {
	delay   time.Duration
	outcome release.JobStatus
	message string
	outputs map[string]any
}

// outcomes lists the statuses a job may be configured to end in: the
// terminal statuses reachable from dispatchStatus.
func outcomes() []release.JobStatus {
	var out []release.JobStatus
	for _, s := range release.JobEdges[dispatchStatus] {
		if s.IsTerminal() {
			out = append(out, s)
		}
	}
	return out
}

// configField is the path of a config key in error messages.
func configField(key string) string { return release.Field("job_agent_config", key) }

// parseConfig reads a job's behaviour; a bad value is a *release.FieldError
// naming job_agent_config.<key>.
func parseConfig(cfg map[string]any) (jobConfig, error) {
	c := jobConfig{delay: defaultDelay, outcome: defaultOutcome}
	if v, ok := cfg[keyDelay]; ok {
		s, ok := v.(string)
		if !ok {
			return c, release.Invalid(configField(keyDelay), fmt.Sprintf("want a duration string such as \"2s\", got %T", v))
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return c, release.Invalid(configField(keyDelay), fmt.Sprintf("invalid duration %q", s))
		}
		if d < 0 {
			return c, release.Invalid(configField(keyDelay), fmt.Sprintf("must not be negative, got %q", s))
		}
		c.delay = d
	}
	if v, ok := cfg[keyOutcome]; ok {
		s, ok := v.(string)
		if !ok {
			return c, release.Invalid(configField(keyOutcome), fmt.Sprintf("want a job status string, got %T", v))
		}
		allowed := outcomes()
		c.outcome = release.JobStatus(s)
		if !slices.Contains(allowed, c.outcome) {
			names := make([]string, len(allowed))
			for i, a := range allowed {
				names[i] = string(a)
			}
			return c, release.Invalid(configField(keyOutcome),
				fmt.Sprintf("%q is not a terminal status reachable from %s; want one of %s", s, dispatchStatus, strings.Join(names, ", ")))
		}
	}
	if v, ok := cfg[keyMessage]; ok && v != nil {
		s, ok := v.(string)
		if !ok {
			return c, release.Invalid(configField(keyMessage), fmt.Sprintf("want a string, got %T", v))
		}
		c.message = s
	}
	if v, ok := cfg[keyOutputs]; ok && v != nil {
		m, ok := v.(map[string]any)
		if !ok {
			return c, release.Invalid(configField(keyOutputs), fmt.Sprintf("want an object, got %T", v))
		}
		c.outputs = m
	}
	return c, nil
}

// ValidateConfig checks a job agent config of type test-runner; a bad value
// is a *release.FieldError naming job_agent_config.<key>.
func ValidateConfig(cfg map[string]any) error {
	_, err := parseConfig(cfg)
	return err
}
