package release

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type validator interface{ Validate() error }

func TestValidate(t *testing.T) {
	t.Parallel()
	now := time.Unix(1, 0)
	okDeployment := func() *Deployment {
		return &Deployment{ID: "d", SystemID: "s", Name: "api", Slug: "api", ResourceSelector: "true"}
	}
	tests := []struct {
		name      string
		v         validator
		field     string
		line, col int
	}{
		{"workspace ok", &Workspace{ID: "w", Name: "w"}, "", 0, 0},
		{"workspace id", &Workspace{Name: "w"}, "id", 0, 0},
		{"system workspace", &System{ID: "s", Name: "s"}, "workspace_id", 0, 0},
		{"deployment ok", okDeployment(), "", 0, 0},
		{"deployment id with colon", &Deployment{ID: "a:b", SystemID: "s", Name: "n", Slug: "n"}, "id", 0, 0},
		{"deployment slug", &Deployment{ID: "d", SystemID: "s", Name: "n", Slug: "Bad Slug"}, "slug", 0, 0},
		{"deployment empty selector allowed", &Deployment{ID: "d", SystemID: "s", Name: "n", Slug: "n"}, "", 0, 0},
		{"deployment selector syntax", &Deployment{ID: "d", SystemID: "s", Name: "n", Slug: "n", ResourceSelector: "resource.kind ==\n  ==  'x'"}, "resource_selector", 2, 3},
		{"deployment selector of type string", &Deployment{ID: "d", SystemID: "s", Name: "n", Slug: "n", ResourceSelector: `resource.name + "x"`}, "resource_selector", 0, 0},
		{"environment selector of type int", &Environment{ID: "e", SystemID: "s", Name: "n", ResourceSelector: "size(resource.name)"}, "resource_selector", 0, 0},
		{"deployment selector reading a field (dyn) allowed", &Deployment{ID: "d", SystemID: "s", Name: "n", Slug: "n", ResourceSelector: "resource.metadata.enabled"}, "", 0, 0},
		{"deployment variable selector", func() validator {
			d := okDeployment()
			d.Variables = []DeploymentVariable{{Key: "a"}, {Key: "b", Values: []VariableValue{{Selector: "true"}, {Selector: "resource.(", Value: Value{Literal: 1}}}}}
			return d
		}(), "variables[1].values[1].selector", 1, 10},
		{"deployment duplicate variable", func() validator {
			d := okDeployment()
			d.Variables = []DeploymentVariable{{Key: "a"}, {Key: "a"}}
			return d
		}(), "variables[1].key", 0, 0},
		{"deployment value two arms", func() validator {
			d := okDeployment()
			d.Variables = []DeploymentVariable{{Key: "a", Default: &Value{Literal: 1, Sensitive: &SecretRef{Ref: "x"}}}}
			return d
		}(), "variables[0].default", 0, 0},
		{"deployment sensitive needs one source", func() validator {
			d := okDeployment()
			d.Variables = []DeploymentVariable{{Key: "a", Default: &Value{Sensitive: &SecretRef{}}}}
			return d
		}(), "variables[0].default.sensitive", 0, 0},
		{"deployment job timeout", func() validator {
			d := okDeployment()
			d.JobTimeoutSeconds = -1
			return d
		}(), "job_timeout_seconds", 0, 0},
		{"deployment workflow template", func() validator {
			d := okDeployment()
			d.WorkflowTemplate = &WorkflowTemplateRef{Name: "deploy", Scope: "galaxy"}
			return d
		}(), "workflow_template.scope", 0, 0},
		{"environment selector", &Environment{ID: "e", SystemID: "s", Name: "e", ResourceSelector: "nope"}, "resource_selector", 1, 1},
		{"resource kind", &Resource{ID: "r", WorkspaceID: "w", Identifier: "i", Name: "n"}, "kind", 0, 0},
		{"version status", &DeploymentVersion{ID: "v", DeploymentID: "d", Tag: "1", Status: "done", CreatedAt: now}, "status", 0, 0},
		{"version created_at", &DeploymentVersion{ID: "v", DeploymentID: "d", Tag: "1", Status: VersionReady}, "created_at", 0, 0},
		{"job agent type", &JobAgent{ID: "a", Name: "a"}, "type", 0, 0},
		{"job target key", &Job{ID: "j", ReleaseID: "r", TargetKey: "x", Status: JobPending, CreatedAt: now}, "target_key", 0, 0},
		{"job status", &Job{ID: "j", ReleaseID: "r", TargetKey: "d:e:r", Status: "weird", CreatedAt: now}, "status", 0, 0},
		{"job ok", &Job{ID: "j", ReleaseID: "r", TargetKey: "d:e:r", Status: JobPending, CreatedAt: now}, "", 0, 0},
		{"approval user", &Approval{VersionID: "v", EnvironmentID: "e", ApprovedAt: now}, "user", 0, 0},
		{"skip rule", &PolicySkip{VersionID: "v"}, "rule_id", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.v.Validate()
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalid)
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tt.field, fe.Field, err.Error())
			require.Equal(t, tt.line, fe.Line, err.Error())
			require.Equal(t, tt.col, fe.Column, err.Error())
			require.Contains(t, err.Error(), tt.field)
		})
	}
}
