package workflow_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/workflow"
)

// doc builds a template from YAML parameter and task list items.
func doc(params, tasks string) string {
	var b strings.Builder
	b.WriteString("apiVersion: reconciler.dev/v1\nkind: WorkflowTemplate\nmetadata: {name: t}\nspec:\n")
	if params != "" {
		b.WriteString("  parameters:\n")
		for _, l := range strings.Split(strings.TrimSpace(params), "\n") {
			b.WriteString("    " + l + "\n")
		}
	}
	b.WriteString("  tasks:\n")
	for _, l := range strings.Split(strings.TrimSpace(tasks), "\n") {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

const (
	listMatrix = `- {name: shards, type: matrix, source: {kind: list, items: [1, 2]}}`
	resMatrix  = `- {name: targets, type: matrix, source: {kind: resource, selector: 'resource.kind == "K"'}}`
	// objListMatrix lists object items in the seed's shape; item 1 has no region.
	objListMatrix = `- {name: clusters, type: matrix, source: {kind: list, items: [{resource: {name: a, region: eu}}, {resource: {name: b}}]}}`
)

func TestValidateRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, params, tasks string
		path, want          string
	}{
		{"duplicate task name", "", "- {name: a, type: wait, wait: {duration: 1}}\n- {name: a, type: wait, wait: {duration: 1}}",
			"spec.tasks[1].name", `duplicate task name "a"`},
		{"unknown dependency", "", "- {name: a, type: wait, wait: {duration: 1}, dependencies: [nope]}",
			"spec.tasks[0].dependencies[0]", `unknown dependency "nope"`},
		{"self dependency", "", "- {name: a, type: wait, wait: {duration: 1}, dependencies: [a]}",
			"spec.tasks[0].dependencies[0]", "depends on itself"},
		{"duplicate dependency", "", "- {name: a, type: wait, wait: {duration: 1}}\n- {name: b, type: wait, wait: {duration: 1}, dependencies: [a, a]}",
			"spec.tasks[1].dependencies[1]", `duplicate dependency "a"`},
		{"two-task cycle", "", "- {name: a, type: wait, wait: {duration: 1}, dependencies: [b]}\n- {name: b, type: wait, wait: {duration: 1}, dependencies: [a]}",
			"spec.tasks[0].dependencies", "cycle: a -> b -> a"},
		{"three-task cycle", "", "- {name: x, type: wait, wait: {duration: 1}}\n- {name: a, type: wait, wait: {duration: 1}, dependencies: [x, c]}\n- {name: b, type: wait, wait: {duration: 1}, dependencies: [a]}\n- {name: c, type: wait, wait: {duration: 1}, dependencies: [b]}",
			"spec.tasks[1].dependencies", "cycle: a -> c -> b -> a"},
		{"matrix of a non-matrix parameter", "- {name: v, type: string}", `- {name: a, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.v}}"}`,
			"spec.tasks[0].matrix", `parameter "v" is of type string, not matrix`},
		{"matrix of an unknown parameter", "", `- {name: a, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.v}}"}`,
			"spec.tasks[0].matrix", `unknown parameter "v"`},
		{"matrix not a parameter reference", listMatrix, `- {name: a, type: job, jobAgentRef: ci, matrix: "shards"}`,
			"spec.tasks[0].matrix", "want a matrix parameter reference"},
		{"matrixStrategy without matrix", "", "- {name: a, type: job, jobAgentRef: ci, matrixStrategy: {maxParallel: 1}}",
			"spec.tasks[0].matrixStrategy", "only a task with a matrix"},
		{"bad when expression", "- {name: go, type: boolean}", `- {name: a, type: job, jobAgentRef: ci, when: "workflow.parameters.go &&"}`,
			"spec.tasks[0].when", "line 1, column 26"},
		{"when with text around braces", "- {name: go, type: boolean}", `- {name: a, type: job, jobAgentRef: ci, when: "{{workflow.parameters.go}} == true"}`,
			"spec.tasks[0].when", "not text around"},
		{"when naming an unknown root", "", `- {name: a, type: job, jobAgentRef: ci, when: "build.ok"}`,
			"spec.tasks[0].when", `unknown root "build"`},
		{"bad CEL selector", `- {name: m, type: matrix, source: {kind: resource, selector: "resource.kind =="}}`, "- {name: a, type: wait, wait: {duration: 1}}",
			"spec.parameters[0].source.selector", "bad expression"},
		{"structured selector with a bad operator", `- {name: m, type: matrix, source: {kind: resource, selector: {type: kind, operator: equalz, value: K}}}`, "- {name: a, type: wait, wait: {duration: 1}}",
			"spec.parameters[0].source.selector.operator", `unknown operator "equalz"`},
		{"structured selector with a bad regex", `- {name: m, type: matrix, source: {kind: resource, selector: {type: comparison, operator: and, conditions: [{type: name, operator: regex, value: "("}]}}}`, "- {name: a, type: wait, wait: {duration: 1}}",
			"spec.parameters[0].source.selector.conditions[0].value", "bad regular expression"},
		{"selector on a list source", `- {name: m, type: matrix, source: {kind: list, items: [1], selector: "true"}}`, "- {name: a, type: wait, wait: {duration: 1}}",
			"spec.parameters[0].source.selector", "only resource and environment sources"},
		{"resource source without selector", `- {name: m, type: matrix, source: {kind: resource}}`, "- {name: a, type: wait, wait: {duration: 1}}",
			"spec.parameters[0].source.selector", "needs a selector"},
		{"matrix parameter without source", `- {name: m, type: matrix}`, "- {name: a, type: wait, wait: {duration: 1}}",
			"spec.parameters[0].source", "needs a source"},
		{"bad verification condition", "", "- {name: v, type: verification, verification: {metrics: [{name: m, provider: {type: datadog}, successCondition: 'result.value <'}]}}",
			"spec.tasks[0].verification.metrics[0].successCondition", "bad expression"},
		{"verification without metrics", "", "- {name: v, type: verification, verification: {metrics: []}}",
			"spec.tasks[0].verification.metrics", "at least one metric"},
		{"unknown root in config", "", `- {name: a, type: job, jobAgentRef: ci, config: {x: "{{ env.HOME }}"}}`,
			"spec.tasks[0].config.x", `unknown root "env"`},
		{"unknown root in CEL", "", `- {name: a, type: job, jobAgentRef: ci, config: {x: "{{ size(env) }}"}}`,
			"spec.tasks[0].config.x", "undeclared reference to 'env'"},
		{"CEL syntax error in braces", "", `- {name: a, type: job, jobAgentRef: ci, config: {x: "v-{{ 1 + }}"}}`,
			"spec.tasks[0].config.x", "{{1 +}}: line 1, column"},
		{"unterminated braces", "", `- {name: a, type: job, jobAgentRef: ci, config: {x: "{{ workflow.name"}}`,
			"spec.tasks[0].config.x", "unterminated {{"},
		{"outputs of a task that is not a dependency", "", "- {name: a, type: job, jobAgentRef: ci}\n" + `- {name: b, type: job, jobAgentRef: ci, config: {x: "{{tasks.a.outputs.url}}"}}`,
			"spec.tasks[1].config.x", `task "a" is not a dependency of task "b"`},
		{"unknown parameter in config", "", `- {name: a, type: job, jobAgentRef: ci, config: {x: "{{workflow.parameters.nope}}"}}`,
			"spec.tasks[0].config.x", `unknown parameter "nope"`},
		{"unknown workflow field", "", `- {name: a, type: job, jobAgentRef: ci, config: {x: "{{workflow.id}}"}}`,
			"spec.tasks[0].config.x", `no field "id" in workflow`},
		{"matrix parameter read as a value", listMatrix, `- {name: a, type: job, jobAgentRef: ci, config: {x: "{{workflow.parameters.shards}}"}}`,
			"spec.tasks[0].config.x", "is a matrix"},
		{"matrix outside a matrix task", "", `- {name: a, type: job, jobAgentRef: ci, config: {x: "{{matrix.index}}"}}`,
			"spec.tasks[0].config.x", "only available in a task with a matrix"},
		{"field of a scalar list item", listMatrix, `- {name: a, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.shards}}", config: {x: "{{matrix.resource.name}}"}}`,
			"spec.tasks[0].config.x", `no field "resource" in matrix: list item 0 is a number, not an object; read it as matrix.item`},
		{"field missing from one list item", objListMatrix, `- {name: a, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.clusters}}", config: {x: "{{matrix.resource.region}}"}}`,
			"spec.tasks[0].config.x", `no field "region" in list item 1 (matrix.resource.region)`},
		{"field missing from a list item, read by CEL", objListMatrix, `- {name: a, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.clusters}}", config: {x: "{{ matrix.zone + 'x' }}"}}`,
			"spec.tasks[0].config.x", `no field "zone" in list item 0 (matrix.zone)`},
		{"wrong field of a resource item", resMatrix, `- {name: a, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.targets}}", config: {x: "{{matrix.name}}"}}`,
			"spec.tasks[0].config.x", `no field "name" in matrix; items of a resource source are matrix.resource`},
		{"default outside enum", `- {name: s, type: string, enum: [rolling, canary], default: blue}`, "- {name: a, type: wait, wait: {duration: 1}}",
			"spec.parameters[0].default", `"blue" is not one of ["rolling","canary"]`},
		{"default of the wrong type", `- {name: n, type: number, default: three}`, "- {name: a, type: wait, wait: {duration: 1}}",
			"spec.parameters[0].default", "want a number, got a string"},
		{"enum value of the wrong type", `- {name: s, type: string, enum: [a, 2]}`, "- {name: a, type: wait, wait: {duration: 1}}",
			"spec.parameters[0].enum[1]", "want a string"},
		{"unknown parameter type", `- {name: s, type: text}`, "- {name: a, type: wait, wait: {duration: 1}}",
			"spec.parameters[0].type", `unknown parameter type "text"`},
		{"duplicate parameter", "- {name: s, type: string}\n- {name: s, type: number}", "- {name: a, type: wait, wait: {duration: 1}}",
			"spec.parameters[1].name", `duplicate parameter "s"`},
		{"parameter name not an identifier", "- {name: my-param, type: string}", "- {name: a, type: wait, wait: {duration: 1}}",
			"spec.parameters[0].name", "not a valid parameter name"},
		{"unknown task type", "", "- {name: a, type: lambda}",
			"spec.tasks[0].type", `unknown task type "lambda"`},
		{"job without jobAgentRef", "", "- {name: a, type: job}",
			"spec.tasks[0].jobAgentRef", "needs a jobAgentRef"},
		{"jobAgentRef on a wait task", "", "- {name: a, type: wait, jobAgentRef: ci, wait: {duration: 1}}",
			"spec.tasks[0].jobAgentRef", "only a job task"},
		{"wait without duration", "", "- {name: a, type: wait}",
			"spec.tasks[0].wait.duration", "needs a duration"},
		{"block of another type", "", "- {name: a, type: job, jobAgentRef: ci, wait: {duration: 1}}",
			"spec.tasks[0].wait", "only a wait task has a wait block"},
		{"webhook without url", "", "- {name: a, type: webhook, webhook: {method: POST}}",
			"spec.tasks[0].webhook.url", "needs a url"},
		{"webhook with a bad method", "", "- {name: a, type: webhook, webhook: {url: 'https://x', method: FETCH}}",
			"spec.tasks[0].webhook.method", `unknown HTTP method "FETCH"`},
		{"backoff without duration", "", "- {name: a, type: job, jobAgentRef: ci, retryStrategy: {limit: 2, backoff: {factor: 2}}}",
			"spec.tasks[0].retryStrategy.backoff.duration", "needs a duration"},
		{"backoff factor zero", "", "- {name: a, type: job, jobAgentRef: ci, retryStrategy: {limit: 2, backoff: {duration: 1s, factor: 0}}}",
			"spec.tasks[0].retryStrategy.backoff.factor", "at least 1"},
		{"negative maxParallel", listMatrix, `- {name: a, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.shards}}", matrixStrategy: {maxParallel: -1}}`,
			"spec.tasks[0].matrixStrategy.maxParallel", "must not be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ps := problemsOf(t, doc(tc.params, tc.tasks))
			p := findProblem(t, ps, tc.path)
			require.Contains(t, p.Message, tc.want)
			require.Positive(t, p.Line, "every problem in a YAML document has a line")
		})
	}
}

func TestValidateHeader(t *testing.T) {
	t.Parallel()
	ps := problemsOf(t, "apiVersion: v2\nkind: Workflow\nmetadata: {name: Bad_Name, scope: galaxy}\nspec: {tasks: []}\n")
	require.Contains(t, findProblem(t, ps, "apiVersion").Message, `unsupported apiVersion "v2"`)
	require.Contains(t, findProblem(t, ps, "kind").Message, `unsupported kind "Workflow"`)
	require.Contains(t, findProblem(t, ps, "metadata.name").Message, "not a valid name")
	require.Contains(t, findProblem(t, ps, "metadata.scope").Message, `unknown scope "galaxy"`)
	require.Contains(t, findProblem(t, ps, "spec.tasks").Message, "at least one task")
}

func TestValidateScopeID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ meta, want string }{
		{"{name: deploy, scope: deployment, scopeId: Api_1}", "not a valid scope id"},
		{"{name: deploy, scopeId: api}", "only system and deployment templates"},
		{"{name: deploy, scope: workspace, scopeId: api}", "only system and deployment templates"},
	} {
		ps := problemsOf(t, "apiVersion: reconciler.dev/v1\nkind: WorkflowTemplate\nmetadata: "+tc.meta+"\nspec: {tasks: [{name: a, type: wait, wait: {duration: 1s}}]}\n")
		require.Contains(t, findProblem(t, ps, "metadata.scopeId").Message, tc.want, tc.meta)
	}
	ps := problemsOf(t, "apiVersion: reconciler.dev/v1\nkind: WorkflowTemplate\nmetadata: {name: deploy, scope: deployment, scopeId: api}\nspec: {tasks: [{name: a, type: wait, wait: {duration: 1s}}]}\n")
	require.Empty(t, ps)
}

func TestValidateReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	src := doc("- {name: s, type: string, enum: [a], default: b}\n- {name: s, type: number}",
		"- {name: a, type: job, dependencies: [b, ghost]}\n- {name: b, type: job, jobAgentRef: ci, dependencies: [a], when: '1 +'}\n- {name: a, type: lambda}")
	ps := problemsOf(t, src)
	paths := map[string]bool{}
	for _, p := range ps {
		paths[p.Path] = true
	}
	for _, want := range []string{
		"spec.parameters[0].default", "spec.parameters[1].name", "spec.tasks[0].jobAgentRef",
		"spec.tasks[0].dependencies", "spec.tasks[0].dependencies[1]", "spec.tasks[1].when",
		"spec.tasks[2].name", "spec.tasks[2].type",
	} {
		require.True(t, paths[want], "missing %s in %v", want, ps)
	}
	for i := 1; i < len(ps); i++ {
		require.LessOrEqual(t, ps[i-1].Line, ps[i].Line, "problems come in document order")
	}
}

func TestValidTemplates(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ params, tasks string }{
		"required parameter with a default": {"- {name: v, type: string, required: true, default: v1}", "- {name: a, type: wait, wait: {duration: 5s}}"},
		"CEL string selector and matrix fields": {resMatrix,
			`- {name: a, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.targets}}", config: {nm: "{{matrix.resource.name}}", i: "{{matrix.index}}", l: "{{ matrix.isLast ? 'last' : 'more' }}"}}`},
		"outputs of a transitive dependency": {"",
			"- {name: a, type: job, jobAgentRef: ci}\n- {name: b, type: approval, dependencies: [a]}\n" + `- {name: c, type: webhook, dependencies: [b], webhook: {url: "https://x/{{tasks.a.outputs.id}}", body: {v: "{{ tasks['a'].outputs.v }}"}}}`},
		"bare path when with hyphenated task": {"",
			"- {name: build-app, type: job, jobAgentRef: ci}\n" + `- {name: b, type: job, jobAgentRef: ci, dependencies: [build-app], when: "tasks.build-app.outputs.ok"}`},
		"structured selector with not, metadata and or": {`- {name: e, type: matrix, source: {kind: environment, selector: {type: comparison, operator: or, conditions: [{type: metadata, key: tier, operator: equals, value: prod}, {type: name, operator: ends-with, value: "-dr", not: true}]}}}`,
			"- {name: a, type: wait, wait: {duration: 1m}}"},
		"release targets, retries and timeouts": {`- {name: rts, type: matrix, source: {kind: releaseTarget, deployment: api}}`,
			`- {name: a, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.rts}}", timeout: "10m", retryStrategy: {limit: "3", backoff: {duration: "5", factor: "2", cap: 1m, maxDuration: 1h}}, config: {t: "{{matrix.releaseTarget.id}}"}}`},
		"fields of object list items, the whole item and the built-ins": {objListMatrix,
			`- {name: a, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.clusters}}", config: {nm: "{{matrix.resource.name}}", all: "{{matrix.item}}", r: "{{matrix.item.resource}}", i: "{{matrix.index}}", c: "{{ matrix.resource.name.startsWith('a') }}"}}`},
		"the whole item of a resource source": {resMatrix,
			`- {name: a, type: job, jobAgentRef: ci, matrix: "{{workflow.parameters.targets}}", config: {all: "{{matrix.item}}"}}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			require.Empty(t, problemsOf(t, doc(tc.params, tc.tasks)))
		})
	}
}

// TestDeprecatedAPIVersion: a template of the old group still loads, and
// says it is deprecated; the current group says nothing.
func TestDeprecatedAPIVersion(t *testing.T) {
	t.Parallel()
	src := "apiVersion: ctrlplane.dev/v1\nkind: WorkflowTemplate\nmetadata: {name: old}\nspec:\n  tasks:\n    - name: a\n      type: wait\n      wait: {duration: 1s}\n"
	tpl, err := workflow.Load([]byte(src))
	require.NoError(t, err)
	require.Equal(t, []string{"apiVersion: ctrlplane.dev/v1 is deprecated; use reconciler.dev/v1"}, tpl.Deprecations())
	tpl, err = workflow.Load([]byte(strings.Replace(src, "ctrlplane.dev", "reconciler.dev", 1)))
	require.NoError(t, err)
	require.Empty(t, tpl.Deprecations())
}
