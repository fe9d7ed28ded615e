package policy

import (
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// DeploymentDependency requires another deployment on the same resource to
// run a matching version first.
//
//   - Some entry of Input.Dependencies (another deployment) matches
//     DependsOn.DeploymentSelector (CEL over `deployment`), has a latest
//     successful version on the resource, and that version matches
//     DependsOn.VersionSelector (CEL over `version` and `deployment`; empty
//     matches any version): Allowed.
//   - Otherwise: Pending with no Until (the dependency's job completion
//     re-evaluates).
type DeploymentDependency struct {
	// DependsOn selects the deployment and versions the target waits for.
	DependsOn DependsOn `json:"depends_on"`
}

// DependsOn selects the deployment depended on and the versions of it that
// satisfy the dependency.
type DependsOn struct {
	// DeploymentSelector is CEL over `deployment` choosing the deployment depended on.
	DeploymentSelector string `json:"deployment_selector"`
	// VersionSelector is CEL over `version` and `deployment` its latest successful version must meet (empty: any).
	VersionSelector string `json:"version_selector,omitempty"`
}

// Type is TypeDeploymentDependency.
func (DeploymentDependency) Type() RuleType { return TypeDeploymentDependency }

func (r DeploymentDependency) validate(path string) error {
	p := release.Field(path, "depends_on")
	if err := release.CheckSelector(release.Field(p, "deployment_selector"), r.DependsOn.DeploymentSelector, false); err != nil {
		return err
	}
	return release.CheckSelector(release.Field(p, "version_selector"), r.DependsOn.VersionSelector, true)
}

// Evaluate applies the rule to in.
func (r DeploymentDependency) Evaluate(in *Input) Verdict { return r.evaluate(in, nil) }

func (r DeploymentDependency) evaluate(in *Input, _ *evalContext) Verdict {
	dsel, err := release.SelectorEnv.Compile(r.DependsOn.DeploymentSelector)
	if err != nil {
		return denied("deployment dependency: " + err.Error())
	}
	var vsel interface {
		EvalBool(map[string]any) (bool, error)
	}
	if r.DependsOn.VersionSelector != "" {
		p, err := release.SelectorEnv.Compile(r.DependsOn.VersionSelector)
		if err != nil {
			return denied("deployment dependency: " + err.Error())
		}
		vsel = p
	}
	found := false
	var firstErr error
	for i := range in.Dependencies {
		d := &in.Dependencies[i]
		if d.Deployment.ID == in.Deployment.ID {
			continue
		}
		s := release.Subject{Deployment: &d.Deployment}
		ok, err := dsel.EvalBool(s.Vars())
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if !ok {
			continue
		}
		found = true
		if d.Version == nil {
			continue
		}
		if vsel == nil {
			return allowed("dependency " + d.Deployment.Name + " runs version " + d.Version.Tag)
		}
		vs := release.Subject{Deployment: &d.Deployment, Version: d.Version}
		ok, err = vsel.EvalBool(vs.Vars())
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if ok {
			return allowed("dependency " + d.Deployment.Name + " runs version " + d.Version.Tag)
		}
	}
	msg := "waiting for a dependency to run a matching version on resource " + in.Resource.Name
	if !found {
		msg = "no deployment on resource " + in.Resource.Name + " matches the dependency selector"
	}
	if firstErr != nil {
		msg += " (" + firstErr.Error() + ")"
	}
	return pending(msg, timeZero)
}
