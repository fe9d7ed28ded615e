package catalog

import (
	"errors"
	"fmt"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
	"github.com/reconcilerhq/reconciler/workflow"
)

// DefaultValidators is the validation a Service runs when Config.Validators
// is nil: each kind's own package checks the content in full. A workflow
// template is loaded and validated by package workflow (strict decoding,
// the task DAG: unknown dependencies, cycles, every problem with its path);
// a policy is decoded strictly and validated by package policy (its rules,
// and every CEL expression compiled).
func DefaultValidators() map[revision.Kind]func(content []byte) error {
	return map[revision.Kind]func(content []byte) error{
		revision.KindWorkflowTemplate: ValidateWorkflowTemplate,
		revision.KindPolicy:           ValidatePolicy,
	}
}

// JSONObject is the schema check alone: content must be a JSON object.
func JSONObject(content []byte) error { return ports.ValidateRevisionContent(content) }

// ValidateWorkflowTemplate reports every problem of a workflow template
// document (JSON or YAML) as one *revision.ValidationError.
func ValidateWorkflowTemplate(content []byte) error { return CheckWorkflowTemplate(content, "") }

// CheckWorkflowTemplate is ValidateWorkflowTemplate that also requires the
// template to be stored under the catalog name name (when not empty):
// its metadata.name, or name.scope.id for a system or deployment template
// (workflow.Metadata.StoredAs).
// Positions are lines and columns of src.
func CheckWorkflowTemplate(src []byte, name string) error {
	t, err := workflow.Parse(src)
	if err != nil {
		var ie *workflow.InvalidError
		if errors.As(err, &ie) {
			return problemErrors(ie.Problems)
		}
		return revision.Invalid(fmt.Errorf("content: %w", err))
	}
	ps := workflow.Validate(t)
	if name != "" && t.Metadata.Name != "" {
		if err := t.Metadata.StoredAs(name); err != nil {
			ps = append(ps, workflow.Problem{Path: "metadata.name", Message: err.Error()})
			t.Locate(ps)
		}
	}
	return problemErrors(ps)
}

// problemErrors turns workflow problems into one validation error, nil for
// none.
func problemErrors(ps []workflow.Problem) error {
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = errors.New(p.String())
	}
	return revision.Invalid(errs...)
}

// ValidatePolicy decodes a policy document strictly and validates it,
// compiling its CEL; the problem names the field.
func ValidatePolicy(content []byte) error {
	if _, err := policy.Decode(content); err != nil {
		return revision.Invalid(err)
	}
	return nil
}
