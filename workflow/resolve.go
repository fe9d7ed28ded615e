package workflow

import (
	"errors"
	"fmt"
	"strings"
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

// StoredAs checks that a template may be stored under the catalog object
// name obj: a workspace template under its name, a system or deployment
// template under name.scope.ID (ID: its scopeId when the document gives
// one), so templates sharing a name at several scopes live side by side
// and the catalog name says where each is visible.
func (m *Metadata) StoredAs(obj string) error {
	switch m.Scope {
	case ScopeSystem, ScopeDeployment:
		prefix := m.Name + "." + string(m.Scope) + "."
		id, ok := strings.CutPrefix(obj, prefix)
		switch {
		case !ok || id == "":
			return fmt.Errorf("a %s template named %q is stored as %s<%s id>, not %q", m.Scope, m.Name, prefix, m.Scope, obj)
		case m.ScopeID != "" && id != m.ScopeID:
			return fmt.Errorf("its scopeId %q does not match the catalog name %q", m.ScopeID, obj)
		}
		return nil
	}
	if obj != m.Name {
		return fmt.Errorf("%q must be the catalog object's name %q", m.Name, obj)
	}
	return nil
}

// Lookups are the templates a deployment's reference to name may resolve
// to, with their catalog names as ID, most specific first: the
// deployment's, the system's, the workspace's. from narrows the search to
// that scope and wider ones (empty: from the deployment).
func Lookups(name, deploymentID, systemID string, from Scope) ([]TemplateRef, error) {
	all := []TemplateRef{
		{Name: name, Scope: ScopeDeployment, ScopeID: deploymentID},
		{Name: name, Scope: ScopeSystem, ScopeID: systemID},
		{Name: name, Scope: ScopeWorkspace},
	}
	all[0].ID = name + "." + string(ScopeDeployment) + "." + deploymentID
	all[1].ID = name + "." + string(ScopeSystem) + "." + systemID
	all[2].ID = name
	switch from {
	case "", ScopeDeployment:
		return all, nil
	case ScopeSystem:
		return all[1:], nil
	case ScopeWorkspace:
		return all[2:], nil
	}
	return nil, fmt.Errorf("template %q: unknown scope %q; want deployment, system or workspace", name, from)
}
