package workflow_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/workflow"
)

func vars() *workflow.Vars {
	return &workflow.Vars{
		Workflow:  map[string]any{"name": "wf-1", "parameters": map[string]any{"version": "v1.2.3", "replicas": int64(3), "go": true}},
		Release:   map[string]any{"version": map[string]any{"tag": "v1.2.3"}},
		Variables: map[string]any{"REGION": "eu", "TOKEN": workflow.SecretValue{Value: "s3cr3t"}, "DB": workflow.SecretValue{Value: map[string]any{"user": "app", "pass": "pw"}}},
		Matrix: map[string]any{"resource": map[string]any{"name": "c1", "config": map[string]any{"ns": "prod"}, "ports": []any{int64(80), int64(443)}},
			"index": int64(0), "length": int64(2), "isFirst": true, "isLast": false},
		Tasks: map[string]any{"build-app": map[string]any{"outputs": map[string]any{"image": "app:42"}}},
	}
}

func TestInterpolateValues(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   any
		want any
	}{
		{"typed number", "{{workflow.parameters.replicas}}", int64(3)},
		{"typed bool with spaces", "{{ matrix.isFirst }}", true},
		{"typed object", "{{matrix.resource.config}}", map[string]any{"ns": "prod"}},
		{"embedded stringifies", "app-{{matrix.resource.name}}-{{matrix.index}}", "app-c1-0"},
		{"embedded object as JSON", "cfg={{matrix.resource.config}}", `cfg={"ns":"prod"}`},
		{"list index", "{{matrix.resource.ports[1]}}", int64(443)},
		{"hyphenated task name", "{{tasks.build-app.outputs.image}}", "app:42"},
		{"CEL typed", "{{ workflow.parameters.replicas * 2 }}", int64(6)},
		{"CEL embedded", "n={{ matrix.index + 1 }}/{{matrix.length}}", "n=1/2"},
		{"CEL index syntax", `{{ tasks["build-app"].outputs.image }}`, "app:42"},
		{"release", "{{release.version.tag}}", "v1.2.3"},
		{"no references", "plain", "plain"},
		{"recursive", map[string]any{"a": []any{"{{workflow.name}}", int64(1)}, "b": map[string]any{"c": "{{variables.REGION}}"}},
			map[string]any{"a": []any{"wf-1", int64(1)}, "b": map[string]any{"c": "eu"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := workflow.Interpolate(tc.in, vars())
			require.NoError(t, err)
			require.Equal(t, tc.want, r.Dispatch)
			require.Equal(t, tc.want, r.Stored, "no secret involved: both copies agree")
		})
	}
}

func TestInterpolateMissingPathIsAnError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   any
		want string
	}{
		{"missing field", map[string]any{"config": map[string]any{"namespace": "{{matrix.resource.config.namespace}}"}},
			`config.namespace: {{matrix.resource.config.namespace}}: no field "namespace" in matrix.resource.config`},
		{"not an object", "{{matrix.resource.name.first}}", "matrix.resource.name is a string, not an object"},
		{"index out of range", "x{{matrix.resource.ports[5]}}", "index 5 out of range in matrix.resource.ports (length 2)"},
		{"missing in a list", []any{"ok", "{{workflow.parameters.nope}}"}, `[1]: {{workflow.parameters.nope}}: no field "nope" in workflow.parameters`},
		{"CEL error", "{{ workflow.parameters.version + 1 }}", "no such overload"},
		{"root not given", "{{release.version.tag}}", "release is not available here"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := vars()
			if tc.name == "root not given" {
				v.Release = nil
			}
			_, err := workflow.Interpolate(tc.in, v)
			var re *workflow.RefError
			require.ErrorAs(t, err, &re)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestInterpolateRedactsSecretsInTheStoredCopy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		in           any
		stored, sent any
	}{
		{"whole secret", "{{variables.TOKEN}}", workflow.Redacted, "s3cr3t"},
		{"embedded secret", "Bearer {{variables.TOKEN}}", "Bearer " + workflow.Redacted, "Bearer s3cr3t"},
		{"field of a secret object", "{{variables.DB.user}}", workflow.Redacted, "app"},
		{"object holding a secret", "{{variables}}",
			map[string]any{"REGION": "eu", "TOKEN": workflow.Redacted, "DB": workflow.Redacted},
			map[string]any{"REGION": "eu", "TOKEN": "s3cr3t", "DB": map[string]any{"user": "app", "pass": "pw"}}},
		{"CEL reading a secret", "{{ variables.TOKEN.upperAscii() }}", workflow.Redacted, "S3CR3T"},
		{"CEL reading a container of secrets", `{{ variables["TOKEN"] + "!" }}`, workflow.Redacted, "s3cr3t!"},
		{"CEL not reading a secret", "{{ variables.REGION + '-1' }}", "eu-1", "eu-1"},
		{"secret beside plain values", map[string]any{"a": "{{variables.REGION}}", "h": map[string]any{"auth": "{{variables.TOKEN}}"}},
			map[string]any{"a": "eu", "h": map[string]any{"auth": workflow.Redacted}},
			map[string]any{"a": "eu", "h": map[string]any{"auth": "s3cr3t"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := workflow.Interpolate(tc.in, vars())
			require.NoError(t, err)
			require.Equal(t, tc.stored, r.Stored)
			require.Equal(t, tc.sent, r.Dispatch)
		})
	}
}

func TestInterpolateErrorsDoNotLeakSecrets(t *testing.T) {
	t.Parallel()
	_, err := workflow.Interpolate("{{ int(variables.TOKEN) }}", vars())
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cr3t")
	require.Contains(t, err.Error(), "withheld")
}

func TestEvalWhen(t *testing.T) {
	t.Parallel()
	cases := []struct {
		src  string
		want bool
		err  string
	}{
		{"{{workflow.parameters.go}}", true, ""},
		{"{{ workflow.parameters.replicas > 5 }}", false, ""},
		{"matrix.isFirst && workflow.parameters.go", true, ""},
		{"tasks.build-app.outputs.image", false, "is a string, want a boolean"},
		{"{{workflow.parameters.version}} == v1", false, "not text around"},
		{"{{workflow.parameters.missing}}", false, `no field "missing"`},
	}
	for _, tc := range cases {
		t.Run(tc.src, func(t *testing.T) {
			t.Parallel()
			got, err := workflow.EvalWhen(tc.src, vars())
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
