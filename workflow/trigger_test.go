package workflow_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/workflow"
)

// triggerDoc is a one-task template with the given spec lines (hooks,
// schedule...) after its parameters; the spec lines start at line 8.
func triggerDoc(spec string) string {
	return "apiVersion: reconciler.dev/v1\nkind: WorkflowTemplate\nmetadata: {name: t}\nspec:\n" +
		"  parameters:\n    - {name: tag, type: string}\n    - {name: shards, type: matrix, source: {kind: list, items: [1]}}\n" +
		spec + "\n  tasks:\n    - {name: a, type: wait, wait: {duration: 1}}\n"
}

// TestValidateTriggers: each bad hook or schedule is refused naming its
// field, with the line and column of the field (and of the CEL error).
func TestValidateTriggers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, spec, path, want string
		line, col              int
	}{
		{"unknown event", "  hooks:\n    - event: job.exploded", "spec.hooks[0].event", `unknown event "job.exploded"`, 9, 7},
		{"filter syntax", "  hooks:\n    - event: job.failed\n      filter: 'event.job.status =='", "spec.hooks[0].filter", "line 1, column 20", 10, 7},
		{"filter not boolean", "  hooks:\n    - event: job.failed\n      filter: 'event.job.status'", "spec.hooks[0].filter", "result is dyn, want bool", 10, 7},
		{"filter of a number", "  hooks:\n    - event: job.failed\n      filter: '1 + 2'", "spec.hooks[0].filter", "result is int, want bool", 10, 7},
		{"filter unknown variable", "  hooks:\n    - event: job.failed\n      filter: 'release.x == 1'", "spec.hooks[0].filter", "undeclared reference to 'release'", 10, 7},
		{"hook parameter unknown", "  hooks:\n    - event: job.failed\n      parameters: {nope: x}", "spec.hooks[0].parameters.nope", `unknown parameter "nope"`, 10, 20},
		{"hook parameter matrix", "  hooks:\n    - event: job.failed\n      parameters: {shards: x}", "spec.hooks[0].parameters.shards", "matrix parameter", 10, 20},
		{"hook parameter other root", "  hooks:\n    - event: job.failed\n      parameters: {tag: '{{release.version.tag}}'}", "spec.hooks[0].parameters.tag", "read only event.<field>", 10, 20},
		{"bad schedule", `  schedule: "0 25 * * *"`, "spec.schedule", "hour: 25 is out of range 0-23", 8, 3},
		{"impossible schedule", `  schedule: "0 0 31 2 *"`, "spec.schedule", "no month of the schedule has day 31", 8, 3},
		{"bad timezone", "  schedule: '@daily'\n  timezone: Europe/Pariss", "spec.timezone", `unknown timezone "Europe/Pariss"`, 9, 3},
		{"bad policy", "  schedule: '@daily'\n  concurrencyPolicy: Forbid", "spec.concurrencyPolicy", `unknown policy "Forbid"`, 9, 3},
		{"timezone without schedule", "  timezone: UTC", "spec.timezone", "only a template with a schedule", 8, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := workflow.Load([]byte(triggerDoc(tc.spec)))
			var inv *workflow.InvalidError
			require.ErrorAs(t, err, &inv)
			require.Len(t, inv.Problems, 1, "%v", inv.Problems)
			p := inv.Problems[0]
			require.Equal(t, tc.path, p.Path)
			require.Contains(t, p.Message, tc.want)
			require.Equal(t, [2]int{tc.line, tc.col}, [2]int{p.Line, p.Column}, p.String())
		})
	}
	_, err := workflow.Load([]byte(triggerDoc("  hooks:\n    - event: release.created\n      filter: 'event.environment.name == \"prod\"'\n  schedule: '*/5 * * * *'\n  timezone: Asia/Tokyo\n  concurrencyPolicy: replace")))
	require.NoError(t, err, "a template with both kinds of triggers")
}

func TestHookMatchesAndParameters(t *testing.T) {
	t.Parallel()
	ev := workflow.Event{"type": "job.failed", "id": "7",
		"environment": map[string]any{"name": "production"},
		"version":     map[string]any{"tag": "v1.2.3"},
		"job":         map[string]any{"id": "j1", "status": "failure", "message": "boom"}}
	h := workflow.Hook{Event: workflow.EventJobFailed, Filter: `event.environment.name == "production"`,
		Parameters: map[string]any{"tag": "{{event.version.tag}}", "why": "job {{ event.job.id }}: {{event.job.message}}", "n": 3}}
	ok, err := workflow.HookMatches(&h, ev)
	require.NoError(t, err)
	require.True(t, ok)
	params, ps := workflow.HookParameters(&h, ev)
	require.Empty(t, ps)
	require.Equal(t, map[string]any{"tag": "v1.2.3", "why": "job j1: boom", "n": 3}, params)

	h.Filter = `event.environment.name == "staging"`
	ok, err = workflow.HookMatches(&h, ev)
	require.NoError(t, err)
	require.False(t, ok, "a false filter")
	h.Filter = ""
	ok, err = workflow.HookMatches(&workflow.Hook{Event: workflow.EventReleaseCreated}, ev)
	require.NoError(t, err)
	require.False(t, ok, "another event type")

	_, ps = workflow.HookParameters(&workflow.Hook{Parameters: map[string]any{"tag": "{{event.resource.name}}"}}, ev)
	require.Len(t, ps, 1)
	require.Equal(t, "parameters.tag", ps[0].Path)
	require.True(t, strings.Contains(ps[0].Message, "the event has no resource"), ps[0].Message)
}
