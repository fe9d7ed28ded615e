package workflow

import (
	"errors"
	"fmt"
)

// TemplateRef identifies one stored template revision for scope resolution.
// ScopeID is the workspace, system or deployment id the template belongs to.
type TemplateRef struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Scope   Scope  `json:"scope"`
	ScopeID string `json:"scopeId"`
}

// Sentinel errors of Resolve.
var (
	// ErrTemplateNotFound: no candidate with the name is visible.
	ErrTemplateNotFound = errors.New("workflow template not found")
	// ErrAmbiguousTemplate: two visible candidates share the name and scope.
	ErrAmbiguousTemplate = errors.New("workflow template is ambiguous")
)

// Resolve picks the template named name that a deployment sees, most
// specific scope first: one scoped to the deployment, then to its system,
// then to the workspace. Candidates are the workspace's templates; those
// scoped to other deployments or systems are not visible. Two visible
// candidates at the same scope are ErrAmbiguousTemplate.
func Resolve(name, deploymentID, systemID string, candidates ...TemplateRef) (TemplateRef, error) {
	var best [3][]TemplateRef // deployment, system, workspace
	for _, c := range candidates {
		if c.Name != name {
			continue
		}
		switch {
		case c.Scope == ScopeDeployment && c.ScopeID == deploymentID:
			best[0] = append(best[0], c)
		case c.Scope == ScopeSystem && c.ScopeID == systemID:
			best[1] = append(best[1], c)
		case c.Scope == ScopeWorkspace || c.Scope == "":
			best[2] = append(best[2], c)
		}
	}
	for _, level := range best {
		switch len(level) {
		case 0:
			continue
		case 1:
			return level[0], nil
		default:
			return TemplateRef{}, fmt.Errorf("template %q at scope %s: %d candidates (%s, %s): %w",
				name, scopeOr(level[0].Scope), len(level), level[0].ID, level[1].ID, ErrAmbiguousTemplate)
		}
	}
	return TemplateRef{}, fmt.Errorf("template %q for deployment %s: %w", name, deploymentID, ErrTemplateNotFound)
}

func scopeOr(s Scope) Scope {
	if s == "" {
		return ScopeWorkspace
	}
	return s
}
