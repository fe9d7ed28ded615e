package workflow

import "github.com/reconcilerhq/reconciler/reconcile"

// APIVersion is the apiVersion a WorkflowTemplate document carries.
const APIVersion = "reconciler.dev/v1"

// DeprecatedAPIVersion is the group templates carried before
// reconciler.dev/v1 (another project's domain); still accepted, and
// Template.Deprecations says so.
const DeprecatedAPIVersion = "ctrlplane.dev/v1"

// KindWorkflowTemplate is the only kind a template document may carry.
const KindWorkflowTemplate = "WorkflowTemplate"

// Scope says where a template is visible; the most specific scope wins when
// templates share a name (see Resolve).
type Scope string

// The template scopes, from least to most specific.
const (
	ScopeWorkspace  Scope = "workspace"
	ScopeSystem     Scope = "system"
	ScopeDeployment Scope = "deployment"
)

// ParamType is the type of a template parameter.
type ParamType string

// The parameter types. Matrix parameters are not values: they name a source
// that ExpandMatrix turns into a list of items a task fans out over.
const (
	TypeString  ParamType = "string"
	TypeNumber  ParamType = "number"
	TypeBoolean ParamType = "boolean"
	TypeObject  ParamType = "object"
	TypeArray   ParamType = "array"
	TypeMatrix  ParamType = "matrix"
)

// TaskType is what kind of work a task is.
type TaskType string

// The task types. The scheduler dispatches every type to its executor except
// wait, which it completes itself once the duration has passed.
const (
	TaskJob          TaskType = "job"
	TaskVerification TaskType = "verification"
	TaskApproval     TaskType = "approval"
	TaskWait         TaskType = "wait"
	TaskWebhook      TaskType = "webhook"
)

// SourceKind is where a matrix parameter's items come from.
type SourceKind string

// The matrix source kinds.
const (
	SourceResource      SourceKind = "resource"
	SourceEnvironment   SourceKind = "environment"
	SourceReleaseTarget SourceKind = "releaseTarget"
	SourceList          SourceKind = "list"
)

// Template is a parsed WorkflowTemplate document: the reusable blueprint a
// Workflow instantiates. Build it with Parse or Load and treat it as
// immutable: the scheduler caches a compiled plan in it. (A Template built
// any other way is validated and compiled again on every Schedule call.)
type Template struct {
	// APIVersion is reconciler.dev/v1 (ctrlplane.dev/v1 is accepted, deprecated).
	APIVersion string `json:"apiVersion"`
	// Kind is WorkflowTemplate.
	Kind string `json:"kind"`
	// Metadata names and scopes the template.
	Metadata Metadata `json:"metadata"`
	// Spec holds the parameters, tasks and triggers.
	Spec Spec `json:"spec"`

	decodeProblems []Problem
	positions      map[string]position
	cache          *planCache
}

// Metadata names and scopes a template.
type Metadata struct {
	// Name is the template's name (its catalog object's).
	Name string `json:"name"`
	// Scope is workspace (the default), system or deployment.
	Scope Scope `json:"scope,omitempty"`
	// ScopeID is the id of the system or deployment a template of that
	// scope belongs to; a workspace template has none.
	ScopeID string `json:"scopeId,omitempty"`
	// Labels are free key-value pairs.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are free key-value notes.
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Spec holds a template's parameters and tasks, and what starts it
// besides a release or a user: hooks (events of the release chain) and a
// cron schedule.
type Spec struct {
	// Parameters are what a run of the template takes.
	Parameters []Parameter `json:"parameters,omitempty"`
	// Tasks are the DAG's nodes; dependencies order them.
	Tasks []Task `json:"tasks"`
	// Hooks start a workflow on events (see EventType); an event starts at
	// most one workflow of the template, from its first matching hook.
	Hooks []Hook `json:"hooks,omitempty"`
	// Schedule is a cron schedule (see ParseCron) in Timezone (an IANA
	// zone, default UTC). ConcurrencyPolicy says what a fire does while
	// the previous scheduled workflow runs: allow (default) starts
	// another, forbid skips the fire, replace cancels the running one and
	// starts. A fire missed while no process ran starts once, when one
	// runs again, unless it is older than StartingDeadlineSeconds.
	Schedule string `json:"schedule,omitempty"`
	// Timezone is the IANA zone of Schedule (default UTC).
	Timezone string `json:"timezone,omitempty"`
	// ConcurrencyPolicy is allow (default), forbid or replace.
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`
	// StartingDeadlineSeconds is how late a missed fire may still start.
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`
}

// Parameter declares a workflow parameter. Value parameters (every type but
// matrix) are resolved by ResolveParameters; matrix parameters name a Source
// and are expanded by ExpandMatrix.
type Parameter struct {
	// Name is how tasks refer to it: {{workflow.parameters.NAME}}.
	Name string `json:"name"`
	// Type is string, number, boolean, object, array or matrix.
	Type ParamType `json:"type"`
	// Description says what the parameter is for.
	Description string `json:"description,omitempty"`
	// Required parameters must be given (a default does not count as given).
	Required bool `json:"required,omitempty"`
	// Default is the value when none is given.
	Default any `json:"default,omitempty"`
	// Enum lists the values allowed.
	Enum []any `json:"enum,omitempty"`
	// Source is where a matrix parameter's items come from (type matrix only).
	Source *MatrixSource `json:"source,omitempty"`
}

// MatrixSource says where a matrix parameter's items come from: resources or
// environments matching a selector, the release targets of a deployment, or
// an explicit list.
type MatrixSource struct {
	// Kind is resource, environment, releaseTarget or list.
	Kind SourceKind `json:"kind"`
	// Selector picks resources or environments: CEL over `resource` or `environment`, or a structured Condition.
	Selector *Selector `json:"selector,omitempty"`
	// Deployment is the deployment whose release targets a releaseTarget source lists.
	Deployment string `json:"deployment,omitempty"`
	// Items are the explicit items of a list source.
	Items []any `json:"items,omitzero"`
}

// Task is one unit of work in a template. Config and the type's block
// (verification, approval, wait, webhook) may use {{ }} references; they are
// resolved per TaskRun when the task becomes ready.
type Task struct {
	// Name is unique in the template; other tasks depend on it by name.
	Name string `json:"name"`
	// Type is job, verification, approval, wait or webhook.
	Type TaskType `json:"type"`
	// Description says what the task does.
	Description string `json:"description,omitempty"`
	// JobAgentRef is the job agent a job task dispatches to.
	JobAgentRef string `json:"jobAgentRef,omitempty"`
	// Config is the job's configuration, merged into the agent's; may use {{ }} references.
	Config map[string]any `json:"config,omitempty"`
	// Dependencies are the tasks that must succeed first.
	Dependencies []string `json:"dependencies,omitempty"`
	// When is a CEL condition; false skips the task.
	When string `json:"when,omitempty"`
	// Matrix is "{{workflow.parameters.NAME}}" of a matrix parameter: one TaskRun per item.
	Matrix string `json:"matrix,omitempty"`
	// MatrixStrategy bounds the fan-out.
	MatrixStrategy *MatrixStrategy `json:"matrixStrategy,omitempty"`
	// RetryStrategy retries a failed attempt.
	RetryStrategy *RetryStrategy `json:"retryStrategy,omitempty"`
	// Timeout fails an attempt that runs longer (e.g. "10m").
	Timeout *reconcile.Duration `json:"timeout,omitempty"`
	// Verification is the block of a verification task.
	Verification *Verification `json:"verification,omitempty"`
	// Approval is the block of an approval task.
	Approval *Approval `json:"approval,omitempty"`
	// Wait is the block of a wait task.
	Wait *Wait `json:"wait,omitempty"`
	// Webhook is the block of a webhook task.
	Webhook *Webhook `json:"webhook,omitempty"`
}

// MatrixParam is the name of the matrix parameter the task fans out over
// (its Matrix reference "{{workflow.parameters.NAME}}"); empty when it has
// none or the reference is malformed.
func (t *Task) MatrixParam() string {
	if m := matrixRefRe.FindStringSubmatch(t.Matrix); m != nil {
		return m[1]
	}
	return ""
}

// MatrixStrategy bounds a matrix task's fan-out. MaxParallel caps the items
// running at once (0 means no cap); FailFast stops launching new items once
// one dispatched item has failed for good.
type MatrixStrategy struct {
	// MaxParallel caps the items running at once (0: no cap).
	MaxParallel int `json:"maxParallel,omitempty"`
	// FailFast stops launching items once one failed for good.
	FailFast bool `json:"failFast,omitempty"`
}

// RetryStrategy retries a failed attempt, as Argo's retryStrategy does:
// Limit is the number of retries after the first attempt.
type RetryStrategy struct {
	// Limit is the number of retries after the first attempt.
	Limit IntOrString `json:"limit"`
	// Backoff spaces the retries.
	Backoff *Backoff `json:"backoff,omitempty"`
}

// Backoff spaces retries: retry n (0-based) waits Duration * Factor^n after
// the failed attempt finished, at most Cap; no retry starts later than
// MaxDuration after the first attempt started.
type Backoff struct {
	// Duration is the first retry's wait.
	Duration *reconcile.Duration `json:"duration,omitempty"`
	// Factor multiplies the wait for each further retry.
	Factor *IntOrString `json:"factor,omitempty"`
	// Cap is the longest wait.
	Cap *reconcile.Duration `json:"cap,omitempty"`
	// MaxDuration is how long after the first attempt a retry may still start.
	MaxDuration *reconcile.Duration `json:"maxDuration,omitempty"`
}

// Verification is the block of a verification task: metrics whose success
// and failure conditions are CEL over `result`.
type Verification struct {
	// Metrics must all pass for the task to succeed.
	Metrics []Metric `json:"metrics"`
}

// Metric is one measurement a verification task takes.
type Metric struct {
	// Name names the metric in the TaskRun's measurements.
	Name string `json:"name"`
	// Provider is where the metric's value comes from.
	Provider Provider `json:"provider"`
	// SuccessCondition is CEL over `result`: true is a success.
	SuccessCondition string `json:"successCondition"`
	// FailureCondition is CEL over `result`: true is a failure.
	FailureCondition string `json:"failureCondition,omitempty"`
	// Interval is the time between measurements.
	Interval *reconcile.Duration `json:"interval,omitempty"`
	// Count is how many measurements are taken.
	Count int `json:"count,omitempty"`
	// FailureLimit is how many failed measurements are tolerated.
	FailureLimit int `json:"failureLimit,omitempty"`
}

// Provider says where a metric's value comes from.
type Provider struct {
	// Type is datadog, prometheus, http or terraformCloud.
	Type string `json:"type"`
	// Query is the datadog or prometheus query.
	Query string `json:"query,omitempty"`
	// Address is the prometheus server's URL.
	Address string `json:"address,omitempty"`
	// URL is what an http provider requests.
	URL string `json:"url,omitempty"`
	// Method is the http provider's method (default GET).
	Method string `json:"method,omitempty"`
	// Headers are sent with the request.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is sent with the request.
	Body string `json:"body,omitempty"`
}

// Approval is the block of an approval task.
type Approval struct {
	// Message tells the approvers what they approve. The task run shows it
	// (with secrets redacted) as its message while it waits, "waiting for
	// approval (0 of 1): MESSAGE" (in a release-triggered workflow with
	// "of version TAG (ID) to environment NAME (ID), target KEY" before the
	// colon), and after, "approved by [USER]: MESSAGE", in `workflow
	// status`, the API and the console.
	Message string `json:"message,omitempty"`
	// Approvers, when set, are the only users whose approval counts.
	Approvers []string `json:"approvers,omitempty"`
	// MinApprovals is how many distinct approvals are needed (default 1).
	MinApprovals int `json:"minApprovals,omitempty"`
}

// Wait is the block of a wait task: it succeeds Duration after it started.
type Wait struct {
	// Duration is how long the task waits (e.g. "30s").
	Duration reconcile.Duration `json:"duration"`
}

// Webhook is the block of a webhook task: one HTTP request.
type Webhook struct {
	// URL is the request's address.
	URL string `json:"url"`
	// Method is the request's method (default POST).
	Method string `json:"method,omitempty"`
	// Headers are sent with the request.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is sent as JSON; may use {{ }} references.
	Body any `json:"body,omitempty"`
}

// Param returns the parameter named name, or nil.
func (t *Template) Param(name string) *Parameter {
	for i := range t.Spec.Parameters {
		if t.Spec.Parameters[i].Name == name {
			return &t.Spec.Parameters[i]
		}
	}
	return nil
}

// Task returns the task named name, or nil.
func (t *Template) Task(name string) *Task {
	for i := range t.Spec.Tasks {
		if t.Spec.Tasks[i].Name == name {
			return &t.Spec.Tasks[i]
		}
	}
	return nil
}

// Deprecations lists what the template says in a way that is still
// accepted but should change (a deprecated apiVersion); empty when none.
func (t *Template) Deprecations() []string {
	if t.APIVersion == DeprecatedAPIVersion {
		return []string{"apiVersion: " + DeprecatedAPIVersion + " is deprecated; use " + APIVersion}
	}
	return nil
}
