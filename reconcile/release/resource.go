package release

// Resource is a deployable place: a cluster, a VM, a namespace, a function.
type Resource struct {
	ID          string `json:"id"`
	WorkspaceID string `json:"workspace_id"`
	// Kind is the resource's type, e.g. "KubernetesCluster".
	Kind string `json:"kind"`
	// Identifier is the resource's unique external name.
	Identifier string            `json:"identifier"`
	Name       string            `json:"name"`
	Version    string            `json:"version,omitempty"`
	Config     map[string]any    `json:"config,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	// Variables are the resource's own values for deployment variables;
	// they win over every other source (see ResolveVariables).
	Variables map[string]Value `json:"variables,omitempty"`
}

// Validate reports the first invalid field.
func (r *Resource) Validate() error {
	if err := r.validateFields(); err != nil {
		return err
	}
	return CheckText(r)
}

func (r *Resource) validateFields() error {
	if err := CheckObjectID("id", r.ID); err != nil {
		return err
	}
	if err := checkID("workspace_id", r.WorkspaceID); err != nil {
		return err
	}
	if err := checkRequired("kind", r.Kind); err != nil {
		return err
	}
	if err := checkRequired("identifier", r.Identifier); err != nil {
		return err
	}
	if err := checkRequired("name", r.Name); err != nil {
		return err
	}
	for _, k := range sortedKeys(r.Variables) {
		if err := r.Variables[k].validate(Field("variables", k)); err != nil {
			return err
		}
	}
	return nil
}

// CELValue is the resource as the CEL variable `resource`.
func (r *Resource) CELValue() map[string]any {
	return map[string]any{
		"id":           r.ID,
		"workspace_id": r.WorkspaceID,
		"kind":         r.Kind,
		"identifier":   r.Identifier,
		"name":         r.Name,
		"version":      r.Version,
		"config":       anyMap(r.Config),
		"metadata":     stringMap(r.Metadata),
	}
}
