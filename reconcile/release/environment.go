package release

// Environment is a stage of a system (staging, production) owning the
// resources its selector matches.
type Environment struct {
	ID       string `json:"id"`
	SystemID string `json:"system_id"`
	Name     string `json:"name"`
	// ResourceSelector is a CEL expression over `resource`; empty matches
	// no resource.
	ResourceSelector string            `json:"resource_selector,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
}

// Validate reports the first invalid field.
func (e *Environment) Validate() error {
	if err := e.validateFields(); err != nil {
		return err
	}
	return CheckText(e)
}

func (e *Environment) validateFields() error {
	if err := CheckObjectID("id", e.ID); err != nil {
		return err
	}
	if err := checkID("system_id", e.SystemID); err != nil {
		return err
	}
	if err := checkRequired("name", e.Name); err != nil {
		return err
	}
	return CheckSelector("resource_selector", e.ResourceSelector, true)
}

// CELValue is the environment as the CEL variable `environment`.
func (e *Environment) CELValue() map[string]any {
	return map[string]any{
		"id":        e.ID,
		"system_id": e.SystemID,
		"name":      e.Name,
		"metadata":  stringMap(e.Metadata),
	}
}
