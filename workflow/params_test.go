package workflow_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/workflow"
)

func paramDefs() []workflow.Parameter {
	return []workflow.Parameter{
		{Name: "version", Type: workflow.TypeString, Required: true},
		{Name: "replicas", Type: workflow.TypeNumber, Default: float64(3)},
		{Name: "migrate", Type: workflow.TypeBoolean, Default: false},
		{Name: "strategy", Type: workflow.TypeString, Enum: []any{"rolling", "canary"}, Default: "rolling"},
		{Name: "labels", Type: workflow.TypeObject},
		{Name: "regions", Type: workflow.TypeArray},
		{Name: "targets", Type: workflow.TypeMatrix, Source: &workflow.MatrixSource{Kind: workflow.SourceList, Items: []any{1}}},
	}
}

func TestResolveParametersPriority(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		src  workflow.Sources
		want any
	}{
		{"explicit wins", workflow.Sources{Explicit: map[string]any{"replicas": 5}, VersionConfig: map[string]any{"replicas": 6}, DeploymentVariables: map[string]any{"replicas": 7}}, int64(5)},
		{"version config over variables", workflow.Sources{VersionConfig: map[string]any{"replicas": 6}, DeploymentVariables: map[string]any{"replicas": 7}}, int64(6)},
		{"variables over default", workflow.Sources{DeploymentVariables: map[string]any{"replicas": 7.5}}, 7.5},
		{"default last", workflow.Sources{}, int64(3)},
		{"nil means unset", workflow.Sources{Explicit: map[string]any{"replicas": nil}, VersionConfig: map[string]any{"replicas": json.Number("4")}}, int64(4)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.src.Explicit == nil {
				tc.src.Explicit = map[string]any{}
			}
			tc.src.Explicit["version"] = "v1"
			got, ps := workflow.ResolveParameters(paramDefs(), tc.src)
			require.Empty(t, ps)
			require.Equal(t, tc.want, got["replicas"])
			require.Equal(t, "v1", got["version"])
			require.NotContains(t, got, "targets", "matrix parameters are expanded, not resolved")
			require.NotContains(t, got, "labels", "an optional parameter without value is absent")
		})
	}
}

func TestResolveParametersProblems(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		src  workflow.Sources
		path string
		want string
	}{
		{"missing required", workflow.Sources{}, "parameters.version", `required parameter "version" has no value`},
		{"wrong type", workflow.Sources{Explicit: map[string]any{"version": "v", "migrate": "yes"}}, "parameters.migrate", "explicit value: want a boolean, got a string"},
		{"outside enum", workflow.Sources{Explicit: map[string]any{"version": "v"}, DeploymentVariables: map[string]any{"strategy": "blue-green"}}, "parameters.strategy", `deployment variable value: "blue-green" is not one of ["rolling","canary"]`},
		{"object", workflow.Sources{Explicit: map[string]any{"version": "v", "labels": []any{"x"}}}, "parameters.labels", "want an object, got an array"},
		{"array", workflow.Sources{Explicit: map[string]any{"version": "v", "regions": "eu"}}, "parameters.regions", "want an array, got a string"},
		{"undeclared explicit", workflow.Sources{Explicit: map[string]any{"version": "v", "bogus": 1}}, "parameters.bogus", "not declared"},
		{"explicit matrix", workflow.Sources{Explicit: map[string]any{"version": "v", "targets": []any{}}}, "parameters.targets", "is a matrix parameter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, ps := workflow.ResolveParameters(paramDefs(), tc.src)
			require.Len(t, ps, 1, "%v", ps)
			require.Equal(t, tc.path, ps[0].Path)
			require.Contains(t, ps[0].Message, tc.want)
		})
	}
}

func TestResolveParametersKeepsSecretsWithoutEchoingThem(t *testing.T) {
	t.Parallel()
	defs := []workflow.Parameter{{Name: "token", Type: workflow.TypeString, Enum: []any{"a", "b"}}, {Name: "key", Type: workflow.TypeString}}
	got, ps := workflow.ResolveParameters(defs, workflow.Sources{DeploymentVariables: map[string]any{
		"token": workflow.SecretValue{Value: "hunter2"}, "key": workflow.SecretValue{Value: "k-123"},
	}})
	require.Len(t, ps, 1)
	require.NotContains(t, ps[0].Message, "hunter2")
	require.Equal(t, workflow.SecretValue{Value: "k-123"}, got["key"])

	s := got["key"].(workflow.SecretValue)
	b, err := json.Marshal(map[string]any{"key": s})
	require.NoError(t, err)
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "key", s)
	for _, rendered := range []string{fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s", s, s, s, s), string(b), logged.String()} {
		require.NotContains(t, rendered, "k-123")
		require.Contains(t, rendered, workflow.Redacted)
	}
}
