package release

// Workspace is the tenant boundary: every system and resource belongs to one.
type Workspace struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Validate reports the first invalid field.
func (w *Workspace) Validate() error {
	if err := w.validateFields(); err != nil {
		return err
	}
	return CheckText(w)
}

func (w *Workspace) validateFields() error {
	if err := CheckObjectID("id", w.ID); err != nil {
		return err
	}
	return checkRequired("name", w.Name)
}

// System groups the deployments and environments that release together.
// Targets only pair a deployment with an environment of the same system.
type System struct {
	ID          string `json:"id"`
	WorkspaceID string `json:"workspace_id"`
	Name        string `json:"name"`
}

// Validate reports the first invalid field.
func (s *System) Validate() error {
	if err := s.validateFields(); err != nil {
		return err
	}
	return CheckText(s)
}

func (s *System) validateFields() error {
	if err := CheckObjectID("id", s.ID); err != nil {
		return err
	}
	if err := checkID("workspace_id", s.WorkspaceID); err != nil {
		return err
	}
	return checkRequired("name", s.Name)
}
