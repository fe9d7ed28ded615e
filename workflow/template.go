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
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
	Spec       Spec     `json:"spec"`

	decodeProblems []Problem
	positions      map[string]position
	cache          *planCache
}

// Metadata names and scopes a template.
type Metadata struct {
	Name  string `json:"name"`
	Scope Scope  `json:"scope,omitempty"`
	// ScopeID is the id of the system or deployment a template of that
	// scope belongs to; a workspace template has none.
	ScopeID     string            `json:"scopeId,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Spec holds a template's parameters and tasks, and what starts it
// besides a release or a user: hooks (events of the release chain) and a
// cron schedule.
type Spec struct {
	Parameters []Parameter `json:"parameters,omitempty"`
	Tasks      []Task      `json:"tasks"`
	// Hooks start a workflow on events (see EventType); an event starts at
	// most one workflow of the template, from its first matching hook.
	Hooks []Hook `json:"hooks,omitempty"`
	// Schedule is a cron schedule (see ParseCron) in Timezone (an IANA
	// zone, default UTC). ConcurrencyPolicy says what a fire does while
	// the previous scheduled workflow runs: allow (default) starts
	// another, forbid skips the fire, replace cancels the running one and
	// starts. A fire missed while no process ran starts once, when one
	// runs again, unless it is older than StartingDeadlineSeconds.
	Schedule                string            `json:"schedule,omitempty"`
	Timezone                string            `json:"timezone,omitempty"`
	ConcurrencyPolicy       ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`
	StartingDeadlineSeconds *int64            `json:"startingDeadlineSeconds,omitempty"`
}

// Parameter declares a workflow parameter. Value parameters (every type but
// matrix) are resolved by ResolveParameters; matrix parameters name a Source
// and are expanded by ExpandMatrix.
type Parameter struct {
	Name        string        `json:"name"`
	Type        ParamType     `json:"type"`
	Description string        `json:"description,omitempty"`
	Required    bool          `json:"required,omitempty"`
	Default     any           `json:"default,omitempty"`
	Enum        []any         `json:"enum,omitempty"`
	Source      *MatrixSource `json:"source,omitempty"`
}

// MatrixSource says where a matrix parameter's items come from: resources or
// environments matching a selector, the release targets of a deployment, or
// an explicit list.
type MatrixSource struct {
	Kind       SourceKind `json:"kind"`
	Selector   *Selector  `json:"selector,omitempty"`
	Deployment string     `json:"deployment,omitempty"`
	Items      []any      `json:"items,omitzero"`
}

// Task is one unit of work in a template. Config and the type's block
// (verification, approval, wait, webhook) may use {{ }} references; they are
// resolved per TaskRun when the task becomes ready.
type Task struct {
	Name           string              `json:"name"`
	Type           TaskType            `json:"type"`
	Description    string              `json:"description,omitempty"`
	JobAgentRef    string              `json:"jobAgentRef,omitempty"`
	Config         map[string]any      `json:"config,omitempty"`
	Dependencies   []string            `json:"dependencies,omitempty"`
	When           string              `json:"when,omitempty"`
	Matrix         string              `json:"matrix,omitempty"`
	MatrixStrategy *MatrixStrategy     `json:"matrixStrategy,omitempty"`
	RetryStrategy  *RetryStrategy      `json:"retryStrategy,omitempty"`
	Timeout        *reconcile.Duration `json:"timeout,omitempty"`
	Verification   *Verification       `json:"verification,omitempty"`
	Approval       *Approval           `json:"approval,omitempty"`
	Wait           *Wait               `json:"wait,omitempty"`
	Webhook        *Webhook            `json:"webhook,omitempty"`
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
	MaxParallel int  `json:"maxParallel,omitempty"`
	FailFast    bool `json:"failFast,omitempty"`
}

// RetryStrategy retries a failed attempt, as Argo's retryStrategy does:
// Limit is the number of retries after the first attempt.
type RetryStrategy struct {
	Limit   IntOrString `json:"limit"`
	Backoff *Backoff    `json:"backoff,omitempty"`
}

// Backoff spaces retries: retry n (0-based) waits Duration * Factor^n after
// the failed attempt finished, at most Cap; no retry starts later than
// MaxDuration after the first attempt started.
type Backoff struct {
	Duration    *reconcile.Duration `json:"duration,omitempty"`
	Factor      *IntOrString        `json:"factor,omitempty"`
	Cap         *reconcile.Duration `json:"cap,omitempty"`
	MaxDuration *reconcile.Duration `json:"maxDuration,omitempty"`
}

// Verification is the block of a verification task: metrics whose success
// and failure conditions are CEL over `result`.
type Verification struct {
	Metrics []Metric `json:"metrics"`
}

// Metric is one measurement a verification task takes.
type Metric struct {
	Name             string              `json:"name"`
	Provider         Provider            `json:"provider"`
	SuccessCondition string              `json:"successCondition"`
	FailureCondition string              `json:"failureCondition,omitempty"`
	Interval         *reconcile.Duration `json:"interval,omitempty"`
	Count            int                 `json:"count,omitempty"`
	FailureLimit     int                 `json:"failureLimit,omitempty"`
}

// Provider says where a metric's value comes from.
type Provider struct {
	Type    string            `json:"type"`
	Query   string            `json:"query,omitempty"`
	Address string            `json:"address,omitempty"`
	URL     string            `json:"url,omitempty"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
}

// Approval is the block of an approval task.
type Approval struct {
	Message      string   `json:"message,omitempty"`
	Approvers    []string `json:"approvers,omitempty"`
	MinApprovals int      `json:"minApprovals,omitempty"`
}

// Wait is the block of a wait task: it succeeds Duration after it started.
type Wait struct {
	Duration reconcile.Duration `json:"duration"`
}

// Webhook is the block of a webhook task: one HTTP request.
type Webhook struct {
	URL     string            `json:"url"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    any               `json:"body,omitempty"`
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
