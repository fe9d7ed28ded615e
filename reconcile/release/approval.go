package release

import "time"

// Approval is a user's approval of a version for an environment.
type Approval struct {
	VersionID     string    `json:"version_id"`
	EnvironmentID string    `json:"environment_id"`
	User          string    `json:"user"`
	ApprovedAt    time.Time `json:"approved_at"`
}

// Validate reports the first invalid field.
func (a *Approval) Validate() error {
	if err := a.validateFields(); err != nil {
		return err
	}
	return CheckText(a)
}

func (a *Approval) validateFields() error {
	if err := checkID("version_id", a.VersionID); err != nil {
		return err
	}
	if err := checkID("environment_id", a.EnvironmentID); err != nil {
		return err
	}
	if err := checkRequired("user", a.User); err != nil {
		return err
	}
	if a.ApprovedAt.IsZero() {
		return Invalid("approved_at", "is required")
	}
	return nil
}

// PolicySkip waives one policy rule for one version, optionally only in one
// environment and/or for one resource, optionally until ExpiresAt.
type PolicySkip struct {
	ID        string `json:"id,omitempty"`
	VersionID string `json:"version_id"`
	RuleID    string `json:"rule_id"`
	// EnvironmentID and ResourceID narrow the skip; empty means any.
	EnvironmentID string `json:"environment_id,omitempty"`
	ResourceID    string `json:"resource_id,omitempty"`
	// ExpiresAt ends the skip; zero means it never expires.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	Reason    string    `json:"reason,omitempty"`
	CreatedBy string    `json:"created_by,omitempty"`
}

// Validate reports the first invalid field.
func (s *PolicySkip) Validate() error {
	if err := s.validateFields(); err != nil {
		return err
	}
	return CheckText(s)
}

func (s *PolicySkip) validateFields() error {
	if err := checkID("version_id", s.VersionID); err != nil {
		return err
	}
	if err := checkRequired("rule_id", s.RuleID); err != nil {
		return err
	}
	if s.EnvironmentID != "" {
		if err := checkID("environment_id", s.EnvironmentID); err != nil {
			return err
		}
	}
	if s.ResourceID != "" {
		if err := checkID("resource_id", s.ResourceID); err != nil {
			return err
		}
	}
	if s.RuleID == ForceDeployRule {
		// A force overrides every policy: someone must answer for it.
		if err := checkRequired("created_by", s.CreatedBy); err != nil {
			return err
		}
	} else if err := checkName("created_by", s.CreatedBy); err != nil {
		return err
	}
	if s.ID != "" {
		if err := checkID("id", s.ID); err != nil {
			return err
		}
	}
	return checkName("reason", s.Reason)
}

// ForceDeployRule is the RuleID of a force-deploy: a policy skip that waives
// every version gate for its version in its scope and pins the targets
// there to that version while it applies (the newest such version wins).
// Job gates (concurrency, retry) still hold: a forced version waits for the
// target's active jobs. Delete the skip, or let it expire, to release the
// pin.
const ForceDeployRule = "*"

// IsForceDeploy reports whether the skip is a force-deploy.
func (s *PolicySkip) IsForceDeploy() bool { return s.RuleID == ForceDeployRule }

// Applies reports whether the skip waives rule ruleID for versionID on
// target at now: same version and rule, matching scope, not yet expired.
func (s *PolicySkip) Applies(versionID, ruleID string, target ReleaseTarget, now time.Time) bool {
	return s.VersionID == versionID && s.RuleID == ruleID &&
		(s.EnvironmentID == "" || s.EnvironmentID == target.EnvironmentID) &&
		(s.ResourceID == "" || s.ResourceID == target.ResourceID) &&
		(s.ExpiresAt.IsZero() || now.Before(s.ExpiresAt))
}
