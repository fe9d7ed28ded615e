package release

import (
	"fmt"

	"github.com/reconcilerhq/reconciler/expr"
)

// The CEL variables a selector can name.
const (
	VarResource    = "resource"
	VarDeployment  = "deployment"
	VarEnvironment = "environment"
	VarVersion     = "version"
)

// SelectorEnv is the CEL environment of every selector: resource,
// deployment, environment and version are declared. Their fields are the
// JSON names of the types (resource.metadata.team, environment.name,
// version.tag, version.created_at as a timestamp).
var SelectorEnv = expr.MustEnv(VarResource, VarDeployment, VarEnvironment, VarVersion)

// Subject is what a selector is evaluated over. Nil fields are not bound, so
// an expression naming them fails to evaluate (and does not match). The
// activation is built once per Subject and reused, so do not change the
// pointed-to values between evaluations of the same Subject.
type Subject struct {
	Resource    *Resource
	Deployment  *Deployment
	Environment *Environment
	Version     *DeploymentVersion

	vars map[string]any
}

// Vars returns the CEL activation for the subject, building it on first use.
func (s *Subject) Vars() map[string]any {
	if s.vars != nil {
		return s.vars
	}
	v := make(map[string]any, 4)
	if s.Resource != nil {
		v[VarResource] = s.Resource.CELValue()
	}
	if s.Deployment != nil {
		v[VarDeployment] = s.Deployment.CELValue()
	}
	if s.Environment != nil {
		v[VarEnvironment] = s.Environment.CELValue()
	}
	if s.Version != nil {
		v[VarVersion] = s.Version.CELValue()
	}
	s.vars = v
	return v
}

// Selector evaluates selector expressions over a subject. Implementations
// must treat an empty selector as matching nothing.
type Selector interface {
	// Match reports whether selector holds for s. An error means the
	// selector could not be evaluated (it does not compile, or it failed or
	// returned a non-boolean for this subject).
	Match(selector string, s *Subject) (bool, error)
}

// CEL is the Selector backed by expr in SelectorEnv. Compiled
// programs are cached by source. The zero value is ready to use and safe for
// concurrent use.
type CEL struct{}

// Match compiles (cached) and evaluates selector over s.
func (CEL) Match(selector string, s *Subject) (bool, error) {
	if selector == "" {
		return false, nil
	}
	p, err := SelectorEnv.Compile(selector)
	if err != nil {
		return false, err
	}
	ok, err := p.EvalBool(s.Vars())
	if err != nil {
		return false, fmt.Errorf("selector %q: %w", selector, err)
	}
	return ok, nil
}
