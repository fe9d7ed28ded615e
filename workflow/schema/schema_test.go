package schema_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/reconcilerhq/reconciler/workflow"
	"github.com/reconcilerhq/reconciler/workflow/schema"
)

func setup(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema.WorkflowTemplate()))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource(schema.URL, doc))
	sch, err := c.Compile(schema.URL)
	require.NoError(t, err)
	return sch
}

// instance converts a YAML document to the value the validator expects.
func instance(t *testing.T, data []byte) any {
	t.Helper()
	j, err := yaml.YAMLToJSON(data)
	require.NoError(t, err)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	require.NoError(t, err)
	return v
}

// templates returns every template in testdata/workflows: the template
// files and the templates inlined in scenarios.
func templates(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	files, err := filepath.Glob("../../testdata/workflows/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		out[filepath.Base(f)] = data
	}
	scenarios, err := filepath.Glob("../../testdata/workflows/scenarios/*.yaml")
	require.NoError(t, err)
	for _, f := range scenarios {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var sc struct {
			Template map[string]any `json:"template"`
		}
		require.NoError(t, yaml.Unmarshal(data, &sc))
		if sc.Template == nil {
			continue
		}
		tdata, err := yaml.Marshal(sc.Template)
		require.NoError(t, err)
		out["scenarios/"+filepath.Base(f)] = tdata
	}
	return out
}

func TestSchemaAcceptsTestdataTemplates(t *testing.T) {
	t.Parallel()
	sch := setup(t)
	for name, data := range templates(t) {
		require.NoError(t, sch.Validate(instance(t, data)), name)
		_, err := workflow.Load(data)
		require.NoError(t, err, "the Go loader agrees on %s", name)
	}
}

func TestSchemaRejectsWhatTheLoaderRejects(t *testing.T) {
	t.Parallel()
	sch := setup(t)
	seed, err := os.ReadFile("../../testdata/workflows/multi-cluster-deployment.yaml")
	require.NoError(t, err)
	cases := map[string]struct{ old, new string }{
		"unknown nested field":    {"maxParallel: 2", "maxParalel: 2"},
		"unknown top-level field": {"kind: WorkflowTemplate", "kind: WorkflowTemplate\nstatus: {}"},
		"unknown selector field":  {"operator: equals", "operator: equals\n          negate: true"},
		"unknown task type":       {"type: verification", "type: verify"},
		"job without agent":       {"      jobAgentRef: argocd\n", ""},
		"bad scope":               {"scope: system", "scope: galaxy"},
		"wrong type":              {"failFast: false", "failFast: nope"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Contains(t, string(seed), tc.old)
			data := []byte(strings.Replace(string(seed), tc.old, tc.new, 1))
			require.Error(t, sch.Validate(instance(t, data)), "the schema refuses it")
			_, err := workflow.Load(data)
			require.Error(t, err, "the Go loader refuses it too")
		})
	}
}

// TestSchemaRejectsBadTriggers: the trigger fields the schema can check
// (shape, events, policy, the schedule's field count, dependencies on
// schedule) are refused by the schema and the Go loader alike.
func TestSchemaRejectsBadTriggers(t *testing.T) {
	t.Parallel()
	sch := setup(t)
	hooks, err := os.ReadFile("../../testdata/workflows/notify-on-failure.yaml")
	require.NoError(t, err)
	cron, err := os.ReadFile("../../testdata/workflows/nightly-smoke.yaml")
	require.NoError(t, err)
	cases := map[string]struct {
		seed     []byte
		old, new string
	}{
		"unknown event":           {hooks, "event: job.failed", "event: job.exploded"},
		"unknown hook field":      {hooks, "    - event: verification.failed\n", "    - event: verification.failed\n      when: x\n"},
		"hook without event":      {hooks, "    - event: verification.failed\n      parameters:", "    - parameters:"},
		"filter not a string":     {hooks, `filter: event.environment.name == "production" && event.job.status == "failure"`, "filter: [1]"},
		"four-field schedule":     {cron, `schedule: "0 3 * * *"`, `schedule: "0 3 * *"`},
		"unknown macro":           {cron, `schedule: "0 3 * * *"`, `schedule: "@every 5m"`},
		"unknown policy":          {cron, "concurrencyPolicy: forbid", "concurrencyPolicy: queue"},
		"negative deadline":       {cron, "startingDeadlineSeconds: 3600", "startingDeadlineSeconds: -1"},
		"fractional deadline":     {cron, "startingDeadlineSeconds: 3600", "startingDeadlineSeconds: 1.5"},
		"local timezone":          {cron, "timezone: Europe/Paris", "timezone: Local"},
		"timezone without a cron": {cron, `  schedule: "0 3 * * *"` + "\n", ""},
		"schedule not a string":   {cron, `schedule: "0 3 * * *"`, "schedule: 3"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Contains(t, string(tc.seed), tc.old)
			data := []byte(strings.Replace(string(tc.seed), tc.old, tc.new, 1))
			require.Error(t, sch.Validate(instance(t, data)), "the schema refuses it")
			_, err := workflow.Load(data)
			require.Error(t, err, "the Go loader refuses it too")
		})
	}
}
