package release

import (
	"regexp"
	"time"
)

// Deployment is a thing that gets released (a service, a job, a config
// bundle) onto the resources its selector matches.
type Deployment struct {
	ID       string `json:"id"`
	SystemID string `json:"system_id"`
	Name     string `json:"name"`
	// Slug is the URL-safe name: lowercase letters, digits and '-'.
	Slug string `json:"slug"`
	// JobAgentID names the agent that runs this deployment's jobs; empty
	// means jobs fail with invalidJobAgent.
	JobAgentID string `json:"job_agent_id,omitempty"`
	// JobAgentConfig is merged into every job's agent configuration.
	JobAgentConfig map[string]any `json:"job_agent_config,omitempty"`
	// ResourceSelector is a CEL expression over `resource`; empty matches
	// no resource.
	ResourceSelector string            `json:"resource_selector,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
	// Variables are resolved per target into each release.
	Variables []DeploymentVariable `json:"variables,omitempty"`
	// WorkflowTemplate, when set, runs this deployment's jobs as a workflow.
	WorkflowTemplate *WorkflowTemplateRef `json:"workflow_template,omitempty"`
	// JobTimeoutSeconds ends a job still active that long after it started
	// (or was created, if it never started) as a failure, so a job whose
	// agent went away cannot hold its target forever; 0: no limit.
	JobTimeoutSeconds int64 `json:"job_timeout_seconds,omitempty"`
}

// JobTimeout is JobTimeoutSeconds as a duration (0: no limit).
func (d *Deployment) JobTimeout() time.Duration {
	return time.Duration(d.JobTimeoutSeconds) * time.Second
}

// WorkflowTemplateRef names the workflow template a deployment's releases
// run: the published template of that name most specific to the
// deployment, looked up deployment → system → workspace. Scope, when set,
// starts the lookup at that scope ("system" skips deployment templates).
type WorkflowTemplateRef struct {
	Name  string `json:"name"`
	Scope string `json:"scope,omitempty"`
}

// WorkflowAgentType is the job agent type of the built-in agent that runs
// a release's job as a workflow: the chain routes the jobs of a deployment
// with a WorkflowTemplate to it, whatever JobAgentID says.
const WorkflowAgentType = "workflow"

var slugRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Validate reports the first invalid field, including a resource selector or
// variable selector that does not compile.
func (d *Deployment) Validate() error {
	if err := d.validateFields(); err != nil {
		return err
	}
	return CheckText(d)
}

func (d *Deployment) validateFields() error {
	if err := CheckObjectID("id", d.ID); err != nil {
		return err
	}
	if err := checkID("system_id", d.SystemID); err != nil {
		return err
	}
	if err := checkRequired("name", d.Name); err != nil {
		return err
	}
	if !slugRe.MatchString(d.Slug) {
		return Invalid("slug", "must be 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit")
	}
	if err := CheckSelector("resource_selector", d.ResourceSelector, true); err != nil {
		return err
	}
	seen := make(map[string]bool, len(d.Variables))
	for i := range d.Variables {
		path := Index("variables", i)
		if err := d.Variables[i].validate(path); err != nil {
			return err
		}
		if seen[d.Variables[i].Key] {
			return Invalid(Field(path, "key"), "duplicate variable key "+d.Variables[i].Key)
		}
		seen[d.Variables[i].Key] = true
	}
	if d.JobTimeoutSeconds < 0 {
		return Invalid("job_timeout_seconds", "must not be negative (0: no limit)")
	}
	if w := d.WorkflowTemplate; w != nil {
		if err := checkRequired("workflow_template.name", w.Name); err != nil {
			return err
		}
		switch w.Scope {
		case "", "deployment", "system", "workspace":
		default:
			return Invalid("workflow_template.scope", "unknown scope "+w.Scope+"; want deployment, system or workspace")
		}
	}
	return nil
}

// CELValue is the deployment as the CEL variable `deployment`.
func (d *Deployment) CELValue() map[string]any {
	return map[string]any{
		"id":           d.ID,
		"system_id":    d.SystemID,
		"name":         d.Name,
		"slug":         d.Slug,
		"job_agent_id": d.JobAgentID,
		"metadata":     stringMap(d.Metadata),
	}
}

// stringMap returns m, or an empty map for nil so `x.metadata` is always a
// map in CEL.
func stringMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// anyMap returns m, or an empty map for nil.
func anyMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
