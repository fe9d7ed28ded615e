package release

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestNamesAndIDsAreBounded: ids, names, tags and users refuse control
// characters (ANSI escapes), invalid UTF-8 and excessive length, naming
// the field; a force-deploy must name who forces it.
func TestNamesAndIDsAreBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	version := func(mut func(*DeploymentVersion)) error {
		v := DeploymentVersion{ID: "web-v1", DeploymentID: "web", Tag: "v1", Status: VersionReady, CreatedAt: now}
		mut(&v)
		return v.Validate()
	}
	approval := func(mut func(*Approval)) error {
		a := Approval{VersionID: "web-v1", EnvironmentID: "prod", User: "alice", ApprovedAt: now}
		mut(&a)
		return a.Validate()
	}
	skip := func(mut func(*PolicySkip)) error {
		s := PolicySkip{VersionID: "web-v1", RuleID: ForceDeployRule, CreatedBy: "alice"}
		mut(&s)
		return s.Validate()
	}
	tests := []struct {
		name  string
		err   error
		field string
		msg   string
	}{
		{"ANSI escape in a tag", version(func(v *DeploymentVersion) { v.Tag = "v1\x1b[31mred" }), "tag", "control character U+001B"},
		{"100 KB tag", version(func(v *DeploymentVersion) { v.Tag = strings.Repeat("t", 100_000) }), "tag", "at most 1024"},
		{"100 KB name", version(func(v *DeploymentVersion) { v.Name = strings.Repeat("n", 100_000) }), "name", "at most 1024"},
		{"long id", version(func(v *DeploymentVersion) { v.ID = strings.Repeat("i", 10_000) }), "id", "at most 255"},
		{"invalid UTF-8 id", version(func(v *DeploymentVersion) { v.ID = "web-\xff" }), "id", "UTF-8"},
		{"bell in a user", approval(func(a *Approval) { a.User = "al\aice" }), "user", "control character"},
		{"escape in an environment id", approval(func(a *Approval) { a.EnvironmentID = "prod\x1b" }), "environment_id", "control character"},
		{"force-deploy without a user", skip(func(s *PolicySkip) { s.CreatedBy = "" }), "created_by", "required"},
		{"force-deploy with an escape in the reason", skip(func(s *PolicySkip) { s.Reason = "\x1b[2J" }), "reason", "control character"},
		{"force-deploy naming a bad resource id", skip(func(s *PolicySkip) { s.ResourceID = "a b" }), "resource_id", "white space"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, tt.err, ErrInvalid)
			var fe *FieldError
			require.True(t, errors.As(tt.err, &fe), "%v", tt.err)
			require.Equal(t, tt.field, fe.Field)
			require.Contains(t, fe.Msg, tt.msg)
		})
	}
	require.NoError(t, version(func(v *DeploymentVersion) { v.Tag, v.Name = "v1.2.3-ünïcode", "Release ✓" }))
	require.NoError(t, skip(func(s *PolicySkip) { s.RuleID, s.CreatedBy = "approvals", "" }), "only a force-deploy needs a user")
}
