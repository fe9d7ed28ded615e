package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
)

// InputScope says where a workflow's store-backed matrix sources select
// from: the workspace's resources, and the environments and deployments of
// the system (of every system of the workspace when SystemID is empty).
type InputScope struct {
	WorkspaceID string
	SystemID    string
}

// checkScope refuses a scope naming a workspace or system that does not
// exist, or a system outside the workspace named, whether or not the
// template reads them: a misspelt --system must not pass in silence.
func (c *Controller) checkScope(ctx context.Context, sc InputScope) error {
	if c.Releases == nil {
		return nil
	}
	if sc.WorkspaceID != "" {
		if _, err := c.Releases.Workspaces().Get(ctx, sc.WorkspaceID); errors.Is(err, ports.ErrNotFound) {
			return release.Invalid("workspace", fmt.Sprintf("workspace %q does not exist", sc.WorkspaceID))
		} else if err != nil {
			return fmt.Errorf("workspace %s: %w", sc.WorkspaceID, err)
		}
	}
	if sc.SystemID == "" {
		return nil
	}
	sys, err := c.Releases.Systems().Get(ctx, sc.SystemID)
	if errors.Is(err, ports.ErrNotFound) {
		return release.Invalid("system", fmt.Sprintf("system %q does not exist", sc.SystemID))
	}
	if err != nil {
		return fmt.Errorf("system %s: %w", sc.SystemID, err)
	}
	if sc.WorkspaceID != "" && sys.Value.WorkspaceID != sc.WorkspaceID {
		return release.Invalid("system", fmt.Sprintf("system %q is in workspace %q, not %q", sc.SystemID, sys.Value.WorkspaceID, sc.WorkspaceID))
	}
	return nil
}

// needs says which candidate lists a template's matrix sources read.
type needs struct{ resources, environments, targets bool }

func needsOf(t *workflow.Template) needs {
	var n needs
	for i := range t.Spec.Parameters {
		p := &t.Spec.Parameters[i]
		if p.Type != workflow.TypeMatrix || p.Source == nil {
			continue
		}
		switch p.Source.Kind {
		case workflow.SourceResource:
			n.resources = true
		case workflow.SourceEnvironment:
			n.environments = true
		case workflow.SourceReleaseTarget:
			n.resources, n.environments, n.targets = true, true, true
		}
	}
	return n
}

// loadInputs fills the candidate lists the template's matrix sources read
// and in leaves empty from the release store: resources of the workspace,
// environments of the scope, and the release targets of the deployments
// that releaseTarget sources name (by id or name), each with its
// deployment, environment and resource objects.
func (c *Controller) loadInputs(ctx context.Context, t *workflow.Template, in workflow.Inputs, sc InputScope) (workflow.Inputs, error) {
	if err := c.checkScope(ctx, sc); err != nil {
		return in, err
	}
	n := needsOf(t)
	n.resources = n.resources && in.Resources == nil
	n.environments = n.environments && in.Environments == nil
	n.targets = n.targets && in.ReleaseTargets == nil
	if !n.resources && !n.environments && !n.targets {
		return in, nil
	}
	if c.Releases == nil {
		return in, errors.New("matrix inputs: no release store to read resources, environments and targets from")
	}
	if sc.WorkspaceID == "" && sc.SystemID != "" {
		sys, err := c.Releases.Systems().Get(ctx, sc.SystemID)
		if err != nil {
			return in, fmt.Errorf("matrix inputs: system %s: %w", sc.SystemID, err)
		}
		sc.WorkspaceID = sys.Value.WorkspaceID
	}
	if sc.WorkspaceID == "" {
		return in, release.Invalid("workspace", "is required: the template's matrix selects resources, environments or release targets")
	}
	systems := []string{sc.SystemID}
	if sc.SystemID == "" {
		all, err := ports.ListAll(ctx, c.Releases.Systems(), sc.WorkspaceID)
		if err != nil {
			return in, fmt.Errorf("matrix inputs: systems of %s: %w", sc.WorkspaceID, err)
		}
		systems = systems[:0]
		for _, s := range all {
			systems = append(systems, s.Value.ID)
		}
	}
	resources := map[string]map[string]any{}
	if n.resources {
		rs, err := ports.ListAll(ctx, c.Releases.Resources(), sc.WorkspaceID)
		if err != nil {
			return in, fmt.Errorf("matrix inputs: resources of %s: %w", sc.WorkspaceID, err)
		}
		in.Resources = make([]map[string]any, len(rs))
		for i := range rs {
			in.Resources[i] = plainObject(rs[i].Value, "variables")
			resources[rs[i].Value.ID] = in.Resources[i]
		}
	}
	environments := map[string]map[string]any{}
	var deployments []release.Deployment
	if n.environments {
		in.Environments = []map[string]any{}
		for _, sys := range systems {
			es, err := ports.ListAll(ctx, c.Releases.Environments(), sys)
			if err != nil {
				return in, fmt.Errorf("matrix inputs: environments of %s: %w", sys, err)
			}
			for i := range es {
				m := plainObject(es[i].Value)
				in.Environments = append(in.Environments, m)
				environments[es[i].Value.ID] = m
			}
			if n.targets {
				ds, err := ports.ListAll(ctx, c.Releases.Deployments(), sys)
				if err != nil {
					return in, fmt.Errorf("matrix inputs: deployments of %s: %w", sys, err)
				}
				for i := range ds {
					deployments = append(deployments, ds[i].Value)
				}
			}
		}
	}
	if n.targets {
		in.ReleaseTargets = []map[string]any{}
		for i := range t.Spec.Parameters {
			p := &t.Spec.Parameters[i]
			if p.Type != workflow.TypeMatrix || p.Source == nil || p.Source.Kind != workflow.SourceReleaseTarget {
				continue
			}
			for j := range deployments {
				d := &deployments[j]
				if d.ID != p.Source.Deployment && d.Name != p.Source.Deployment {
					continue
				}
				ts, err := c.Releases.TargetList(ctx, ports.TargetListParams{Scope: ports.TargetScope{DeploymentID: d.ID}})
				if err != nil {
					return in, fmt.Errorf("matrix inputs: targets of %s: %w", d.ID, err)
				}
				dm := plainObject(*d, "variables")
				for _, rt := range ts {
					in.ReleaseTargets = append(in.ReleaseTargets, map[string]any{"key": rt.Key(), "deploymentId": d.ID,
						"deployment": dm, "environment": environments[rt.EnvironmentID], "resource": resources[rt.ResourceID]})
				}
			}
		}
	}
	return in, nil
}

// plainObject is v as JSON-like values (what templates and selectors
// read), without the named fields.
func plainObject(v any, drop ...string) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return map[string]any{}
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil || m == nil {
		return map[string]any{}
	}
	for _, k := range drop {
		delete(m, k)
	}
	return m
}
