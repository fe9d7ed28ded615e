package release

import "time"

// VersionStatus is the lifecycle state of a deployment version.
type VersionStatus string

// The version statuses. Only Ready versions are release candidates.
const (
	VersionBuilding VersionStatus = "building"
	VersionReady    VersionStatus = "ready"
	VersionPaused   VersionStatus = "paused"
	VersionRejected VersionStatus = "rejected"
	VersionFailed   VersionStatus = "failed"
)

// Valid reports whether s is one of the version statuses.
func (s VersionStatus) Valid() bool {
	switch s {
	case VersionBuilding, VersionReady, VersionPaused, VersionRejected, VersionFailed:
		return true
	}
	return false
}

// DeploymentVersion is one build of a deployment that can be released.
type DeploymentVersion struct {
	ID           string `json:"id"`
	DeploymentID string `json:"deployment_id"`
	// Tag is the version's label, e.g. "v1.4.2" or a commit SHA.
	Tag            string            `json:"tag"`
	Name           string            `json:"name,omitempty"`
	Config         map[string]any    `json:"config,omitempty"`
	JobAgentConfig map[string]any    `json:"job_agent_config,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	Status         VersionStatus     `json:"status"`
	CreatedAt      time.Time         `json:"created_at"`
}

// Validate reports the first invalid field.
func (v *DeploymentVersion) Validate() error {
	if err := v.validateFields(); err != nil {
		return err
	}
	return CheckText(v)
}

func (v *DeploymentVersion) validateFields() error {
	// The deployment and the tag first: an id is often derived from them
	// (DEPLOYMENT-TAG), and the error should name what the user gave.
	if err := checkID("deployment_id", v.DeploymentID); err != nil {
		return err
	}
	if err := checkRequired("tag", v.Tag); err != nil {
		return err
	}
	if err := checkID("id", v.ID); err != nil {
		return err
	}
	if err := checkName("name", v.Name); err != nil {
		return err
	}
	if !v.Status.Valid() {
		return Invalid("status", "unknown version status "+quote(string(v.Status))+"; want building, ready, paused, rejected or failed")
	}
	if v.CreatedAt.IsZero() {
		return Invalid("created_at", "is required")
	}
	return nil
}

// CELValue is the version as the CEL variable `version`; created_at is a
// CEL timestamp.
func (v *DeploymentVersion) CELValue() map[string]any {
	return map[string]any{
		"id":            v.ID,
		"deployment_id": v.DeploymentID,
		"tag":           v.Tag,
		"name":          v.Name,
		"config":        anyMap(v.Config),
		"metadata":      stringMap(v.Metadata),
		"status":        string(v.Status),
		"created_at":    v.CreatedAt,
	}
}

func quote(s string) string { return "\"" + s + "\"" }
