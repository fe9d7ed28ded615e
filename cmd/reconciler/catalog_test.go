package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// deployYAML is a valid workflow template named deploy.
const deployYAML = `apiVersion: reconciler.dev/v1
kind: WorkflowTemplate
metadata:
  name: deploy
spec:
  tasks:
    - name: build
      type: wait
      wait: {duration: 1}
    - name: ship
      type: wait
      wait: {duration: 1}
      dependencies: [build]
`

// deployJSON is deployYAML written as JSON.
const deployJSON = `{"apiVersion": "reconciler.dev/v1", "kind": "WorkflowTemplate", "metadata": {"name": "deploy"},
 "spec": {"tasks": [{"name": "build", "type": "wait", "wait": {"duration": 1}},
   {"name": "ship", "type": "wait", "wait": {"duration": 1}, "dependencies": ["build"]}]}}`

// cycleYAML is a template with a dependency cycle (line 10) and an unknown
// task type (line 16).
const cycleYAML = `apiVersion: reconciler.dev/v1
kind: WorkflowTemplate
metadata:
  name: deploy
spec:
  tasks:
    - name: a
      type: wait
      wait: {duration: 1}
      dependencies: [b]
    - name: b
      type: wait
      wait: {duration: 1}
      dependencies: [a]
    - name: c
      type: lambda
`

// policyJSON returns a valid policy document whose description is desc.
func policyJSON(desc string) string {
	return fmt.Sprintf(`{"id": "gate", "workspace_id": "demo", "name": "Gate", "description": %q, "priority": 1, "enabled": true,
 "rules": [{"id": "approvals", "type": "anyApproval", "min_approvals": 1}]}`, desc)
}

// cliResult is the outcome of one in-process command.
type cliResult struct {
	stdout, stderr string
	code           int
	err            error
}

// runCLI runs `reconciler args...` in process with stdin.
func runCLI(t *testing.T, stdin string, args ...string) cliResult {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	return cliResult{stdout: out.String(), stderr: errOut.String(), code: exitStatus(err), err: err}
}

// catalogCLI runs catalog commands against one database.
type catalogCLI struct {
	t   *testing.T
	dsn string
}

// setupCatalog gives a test a fresh, migrated schema to run catalog
// commands against.
func setupCatalog(t *testing.T) *catalogCLI {
	t.Helper()
	dsn, _ := pgtest.Schema(t)
	db, err := postgres.Open(t.Context(), dsn)
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.MigrateUp(t.Context()))
	return &catalogCLI{t: t, dsn: dsn}
}

// run runs `catalog args...` with the test's DSN.
func (c *catalogCLI) run(stdin string, args ...string) cliResult {
	c.t.Helper()
	return runCLI(c.t, stdin, append(append([]string{"catalog"}, args...), "--dsn", c.dsn)...)
}

// ok runs a command that must succeed.
func (c *catalogCLI) ok(stdin string, args ...string) cliResult {
	c.t.Helper()
	r := c.run(stdin, args...)
	require.NoError(c.t, r.err, "catalog %v", args)
	return r
}

// get returns the revision `get args...` shows, read from its JSON output.
func (c *catalogCLI) get(args ...string) ports.Revision {
	c.t.Helper()
	r := c.ok("", append([]string{"get", "-o", "json"}, args...)...)
	var rev ports.Revision
	require.NoError(c.t, json.Unmarshal([]byte(r.stdout), &rev), r.stdout)
	return rev
}

// version returns the version `get obj` shows, as a flag value.
func (c *catalogCLI) version(args ...string) string {
	c.t.Helper()
	return fmt.Sprint(c.get(args...).Version)
}

// publish creates obj from content and approves it; it returns the
// revision number.
func (c *catalogCLI) publish(obj, content string) int {
	c.t.Helper()
	c.ok(content, "create", obj, "-f", "-")
	c.ok("", "propose", obj, "--version", c.version(obj))
	c.ok("", "approve", obj, "--version", c.version(obj))
	return c.get(obj).Revision
}

// TestCatalogCLIHappyPath: create → propose → approve publishes revision 1
// with the document as given, recording the approver.
func TestCatalogCLIHappyPath(t *testing.T) {
	t.Parallel()
	c := setupCatalog(t)
	r := c.ok(deployYAML, "create", "workflow-template/deploy", "-f", "-")
	require.Contains(t, r.stdout, "created workflow-template/deploy: draft")
	d := c.get("workflow-template/deploy")
	require.Equal(t, revision.Draft, d.Lifecycle)
	require.Zero(t, d.Revision, "a draft has no number")

	c.ok("", "propose", "workflow-template/deploy", "--version", fmt.Sprint(d.Version))
	r = c.ok("", "approve", "workflow-template/deploy", "--version", c.version("workflow-template/deploy"))
	require.Contains(t, r.stdout, "revision 1")

	got := c.get("workflow-template/deploy")
	require.Equal(t, 1, got.Revision)
	require.Equal(t, revision.Published, got.Lifecycle)
	require.Equal(t, localPrincipal(), got.ApprovedBy, "an offline approval")
	require.Equal(t, d.ID, got.ID, "approval publishes the draft itself")
	require.JSONEq(t, deployJSON, string(got.Content), "YAML is stored as the equivalent JSON")
	require.Equal(t, got.ID, c.get("workflow-template/deploy", "--revision", "1").ID)

	text := c.ok("", "get", "workflow-template/deploy").stdout
	for _, want := range []string{"revision:    1", "lifecycle:   published", "approved by: " + localPrincipal(), "name: ship"} {
		require.Contains(t, text, want)
	}
	list := c.ok("", "list").stdout
	require.Contains(t, list, "workflow-template/deploy")
	require.Contains(t, list, "published")
}

// TestCatalogCLIExitStatus checks each documented exit status: bad input 2,
// conflict 3, not found 4, with a message naming what is wrong.
func TestCatalogCLIExitStatus(t *testing.T) {
	t.Parallel()
	c := setupCatalog(t)
	tmpl := "workflow-template/"
	tests := []struct {
		name string
		// prepare runs first on the case's own object name.
		prepare func(obj string)
		stdin   string
		args    func(obj string) []string
		code    int
		want    []string
	}{
		{
			name:    "stale version",
			prepare: func(obj string) { c.ok(policyJSON("v1"), "create", obj, "-f", "-") },
			stdin:   policyJSON("v2"),
			args:    func(obj string) []string { return []string{"edit", obj, "-f", "-", "--version", "7"} },
			code:    3, want: []string{"conflict:", "expected version 7, stored 1"},
		},
		{
			name:    "second open draft",
			prepare: func(obj string) { c.ok(policyJSON("v1"), "create", obj, "-f", "-") },
			stdin:   policyJSON("v2"),
			args:    func(obj string) []string { return []string{"create", obj, "-f", "-"} },
			code:    3, want: []string{"conflict:", "already has an open draft"},
		},
		{
			name:    "approve a draft",
			prepare: func(obj string) { c.ok(policyJSON("v1"), "create", obj, "-f", "-") },
			args:    func(obj string) []string { return []string{"approve", obj, "--version", "1"} },
			code:    2, want: []string{"cannot approve a draft revision", "propose"},
		},
		{
			name:    "edit without an open draft",
			prepare: func(obj string) { c.publish(obj, policyJSON("v1")) },
			stdin:   policyJSON("v2"),
			args:    func(obj string) []string { return []string{"edit", obj, "-f", "-", "--version", "3"} },
			code:    4, want: []string{"has no open draft"},
		},
		{
			name: "unknown kind",
			args: func(string) []string { return []string{"get", "workflow/deploy"} },
			code: 2, want: []string{`kind: "workflow" is not a catalog kind`},
		},
		{
			name: "bad name",
			args: func(string) []string { return []string{"get", tmpl + "Deploy_1"} },
			code: 2, want: []string{`name: "Deploy_1" is not a valid name`},
		},
		{
			name: "not KIND/NAME",
			args: func(string) []string { return []string{"get", "deploy"} },
			code: 2, want: []string{"want KIND/NAME"},
		},
		{
			name: "no such object",
			args: func(obj string) []string { return []string{"get", obj} },
			code: 4, want: []string{"no such object"},
		},
		{
			name:    "no such revision",
			prepare: func(obj string) { c.publish(obj, policyJSON("v1")) },
			args:    func(obj string) []string { return []string{"get", obj, "--revision", "2"} },
			code:    4, want: []string{"revision 2"},
		},
		{
			name: "missing version",
			args: func(obj string) []string { return []string{"propose", obj} },
			code: 2, want: []string{"--version is required"},
		},
		{
			name: "template with a cycle lists every problem",
			args: func(string) []string { return []string{"create", tmpl + "deploy", "-f", "-"} }, stdin: cycleYAML,
			code: 2, want: []string{"2 problems", "spec.tasks[0].dependencies: dependency cycle: a -> b -> a (line 10",
				`spec.tasks[2].type: unknown task type "lambda"`, "(line 16"},
		},
		{
			name: "template named unlike the object",
			args: func(string) []string { return []string{"create", tmpl + "ship", "-f", "-"} }, stdin: deployYAML,
			code: 2, want: []string{`metadata.name: "deploy" must be the catalog object's name "ship"`},
		},
		{
			name:  "policy with a bad selector",
			args:  func(obj string) []string { return []string{"create", obj, "-f", "-"} },
			stdin: `{"id": "g", "workspace_id": "ws", "name": "G", "selector": "environment.name ==", "rules": []}`,
			code:  2, want: []string{"selector:", "(line 1, column"},
		},
		{
			name: "policy with an unknown field",
			args: func(obj string) []string { return []string{"create", obj, "-f", "-"} }, stdin: "id: g\nname: G\npriorty: 3\n",
			code: 2, want: []string{`priorty: unknown field "priorty" (line 3)`},
		},
		{
			name:  "policy YAML with a bad CEL names the line and column in the file",
			args:  func(obj string) []string { return []string{"create", obj, "-f", "-"} },
			stdin: "id: g\nworkspace_id: ws\nname: G\nselector: environment.name ==\nrules: []\n",
			code:  2, want: []string{"selector: invalid CEL", "(line 4, column 30)"},
		},
		{
			name:  "policy YAML with a bad rule names the rule's line",
			args:  func(obj string) []string { return []string{"create", obj, "-f", "-"} },
			stdin: "id: g\nname: G\nrules:\n  - id: a\n    type: anyApproval\n    min_approvals: 1\n  - id: b\n    type: nope\n",
			code:  2, want: []string{"rules[1]", `unknown rule type "nope"`, "(line 7)"},
		},
		{
			name:  "YAML syntax error names the line in the file",
			args:  func(obj string) []string { return []string{"create", obj, "-f", "-"} },
			stdin: "id: g\nname: G\nrules: [\n  {id: a, type: anyApproval\n",
			code:  2, want: []string{"syntax error at line 4: did not find expected ',' or '}'"},
		},
		{
			name: "JSON syntax error",
			args: func(obj string) []string { return []string{"create", obj, "-f", "-"} }, stdin: "{\n  \"id\": \"g\",\n}",
			code: 2, want: []string{"syntax error at line 3"},
		},
		{
			name: "missing file",
			args: func(obj string) []string { return []string{"create", obj, "-f", "/nonexistent/p.yaml"} },
			code: 2, want: []string{"/nonexistent/p.yaml"},
		},
		{
			name: "no document",
			args: func(obj string) []string { return []string{"create", obj} },
			code: 2, want: []string{"give -f FILE"},
		},
		{
			name: "bad output",
			args: func(obj string) []string { return []string{"list", "-o", "yaml"} },
			code: 2, want: []string{"--output"},
		},
		{
			name: "bad lifecycle filter",
			args: func(string) []string { return []string{"list", "--lifecycle", "live"} },
			code: 2, want: []string{`"live" is not a lifecycle`},
		},
		{
			name: "propose-delete without a revision",
			args: func(obj string) []string { return []string{"propose-delete", obj, "--version", "3"} },
			code: 2, want: []string{"--revision is required"},
		},
		{
			name: "reject without a reason",
			args: func(obj string) []string { return []string{"reject", obj, "--version", "2"} },
			code: 2, want: []string{"--reason is required"},
		},
		{
			name:    "delete a published revision",
			prepare: func(obj string) { c.publish(obj, policyJSON("v1")) },
			args: func(obj string) []string {
				return []string{"delete", obj, "--revision", "1", "--version", "3"}
			},
			code: 2, want: []string{"cannot delete a published revision", "propose-delete"},
		},
		{
			name: "bad label",
			args: func(obj string) []string { return []string{"label", obj, "team", "--version", "1"} },
			code: 2, want: []string{"want key=value"},
		},
		{
			name: "unknown subcommand",
			args: func(string) []string { return []string{"publish"} },
			code: 2, want: []string{`unknown subcommand "publish"`},
		},
		{
			name: "unknown flag",
			args: func(obj string) []string { return []string{"get", obj, "--revison", "1"} },
			code: 2, want: []string{"unknown flag"},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			obj := fmt.Sprintf("policy/p%d", i)
			if tt.prepare != nil {
				tt.prepare(obj)
			}
			r := c.run(tt.stdin, tt.args(obj)...)
			require.Equal(t, tt.code, r.code, "%v", r.err)
			for _, w := range tt.want {
				require.ErrorContains(t, r.err, w)
			}
		})
	}
}

// TestCatalogCLIHeldLockIsConflict: a change while another holds the
// object's try-lock is a conflict, and writes nothing.
func TestCatalogCLIHeldLockIsConflict(t *testing.T) {
	t.Parallel()
	c := setupCatalog(t)
	c.ok(policyJSON("v1"), "create", "policy/locked", "-f", "-")

	db, err := postgres.Open(t.Context(), c.dsn)
	require.NoError(t, err)
	defer db.Close()
	store := postgres.NewCatalog(db, ports.SystemClock)
	defer store.Close()
	unlock, err := store.CatalogTryLock(t.Context(), catalog.LockKey(revision.Object{Kind: revision.KindPolicy, Name: "locked"}))
	require.NoError(t, err)

	r := c.run(policyJSON("v2"), "edit", "policy/locked", "-f", "-", "--version", "1")
	require.Equal(t, 3, r.code, "%v", r.err)
	require.ErrorContains(t, r.err, "conflict: ")
	require.ErrorContains(t, r.err, "in progress")
	unlock()

	got := c.get("policy/locked")
	require.Equal(t, int64(1), got.Version)
	require.JSONEq(t, policyJSON("v1"), string(got.Content))
	c.ok(policyJSON("v2"), "edit", "policy/locked", "-f", "-", "--version", "1")
	require.JSONEq(t, policyJSON("v2"), string(c.get("policy/locked").Content))
}

// TestCatalogCLIGetDefault: get shows the open draft, else the latest
// published revision, else the newest one marked for deletion.
func TestCatalogCLIGetDefault(t *testing.T) {
	t.Parallel()
	c := setupCatalog(t)
	const obj = "policy/gate"
	require.Equal(t, 1, c.publish(obj, policyJSON("one")))
	c.ok("", "create", obj, "--from", "1")
	draft := c.get(obj)
	require.Equal(t, revision.Draft, draft.Lifecycle, "an open draft is shown first")
	require.JSONEq(t, policyJSON("one"), string(draft.Content), "--from copies the published content")
	require.Equal(t, 1, c.get(obj, "--published").Revision)

	c.ok(policyJSON("two"), "edit", obj, "-f", "-", "--version", fmt.Sprint(draft.Version))
	c.ok("", "propose", obj, "--version", c.version(obj))
	c.ok("", "approve", obj, "--version", c.version(obj))
	require.Equal(t, 2, c.get(obj).Revision, "then the latest published")

	c.ok("", "propose-delete", obj, "--revision", "2", "--version", c.version(obj, "--revision", "2"))
	require.Equal(t, 1, c.get(obj).Revision, "a published revision before one marked for deletion")
	c.ok("", "propose-delete", obj, "--revision", "1", "--version", c.version(obj, "--revision", "1"))
	got := c.get(obj)
	require.Equal(t, 2, got.Revision, "else the newest marked for deletion")
	require.Equal(t, revision.DeletionProposed, got.Lifecycle)

	c.ok("", "undo-propose-delete", obj, "--revision", "1", "--version", c.version(obj, "--revision", "1"))
	c.ok("", "delete", obj, "--revision", "2", "--version", c.version(obj, "--revision", "2"))
	require.Equal(t, 4, c.run("", "get", obj, "--revision", "2").code, "deleted")
	require.Equal(t, 1, c.get(obj).Revision)
	require.JSONEq(t, policyJSON("one"), c.ok("", "get", obj, "-o", "content").stdout)
}

// TestCatalogCLIReviewLoop: reject records the reason and returns the
// draft for rework; unpropose too; a draft can be deleted.
func TestCatalogCLIReviewLoop(t *testing.T) {
	t.Parallel()
	c := setupCatalog(t)
	const obj = "policy/gate"
	c.ok(policyJSON("one"), "create", obj, "-f", "-")
	c.ok("", "propose", obj, "--version", "1")
	c.ok("", "reject", obj, "--version", "2", "--reason", "needs two approvals")
	d := c.get(obj)
	require.Equal(t, revision.Draft, d.Lifecycle)
	require.Equal(t, "needs two approvals", d.Annotations[catalog.AnnotationRejectReason])

	c.ok("", "propose", obj, "--version", fmt.Sprint(d.Version))
	c.ok("", "unpropose", obj, "--version", fmt.Sprint(d.Version+1))
	require.Equal(t, revision.Draft, c.get(obj).Lifecycle)

	r := c.ok("", "delete", obj, "--version", fmt.Sprint(d.Version+2), "-o", "json")
	require.JSONEq(t, fmt.Sprintf(`{"kind": "policy", "name": "gate", "id": %q, "revision": 0, "deleted": true}`, d.ID), r.stdout)
	require.Equal(t, 4, c.run("", "get", obj).code)
}

// TestCatalogCLILabel: label sets and removes keys, keeps the others, in
// any lifecycle, under the version check.
func TestCatalogCLILabel(t *testing.T) {
	t.Parallel()
	c := setupCatalog(t)
	const obj = "policy/gate"
	c.publish(obj, policyJSON("one"))
	c.ok("", "label", obj, "team=infra", "tier=1", "--version", "3")
	c.ok("", "label", obj, "tier-", "owner=ana", "--revision", "1", "--version", "4")
	got := c.get(obj)
	require.Equal(t, map[string]string{"team": "infra", "owner": "ana"}, got.Labels)
	require.JSONEq(t, policyJSON("one"), string(got.Content), "labels never touch published content")

	r := c.run("", "label", obj, "team=web", "--version", "4")
	require.Equal(t, 3, r.code, "%v", r.err)
	require.Equal(t, "infra", c.get(obj).Labels["team"])
}

// TestCatalogCLIFiles: -f reads YAML and JSON files and stdin alike.
func TestCatalogCLIFiles(t *testing.T) {
	t.Parallel()
	c := setupCatalog(t)
	dir := t.TempDir()
	yml, js := filepath.Join(dir, "deploy.yaml"), filepath.Join(dir, "deploy.json")
	require.NoError(t, os.WriteFile(yml, []byte(deployYAML), 0o600))
	require.NoError(t, os.WriteFile(js, []byte(deployJSON), 0o600))

	c.ok("", "create", "workflow-template/deploy", "-f", yml)
	require.JSONEq(t, deployJSON, string(c.get("workflow-template/deploy").Content))
	c.ok("", "edit", "workflow-template/deploy", "-f", js, "--version", "1")
	require.Equal(t, strings.TrimSpace(deployJSON), c.ok("", "get", "workflow-template/deploy", "-o", "content").stdout[:len(deployJSON)],
		"a JSON document is stored as written")
}

// TestCatalogCLINoDSN: without a database the commands refuse with exit 2,
// say how to point at Postgres and why there is no in-memory fallback.
func TestCatalogCLINoDSN(t *testing.T) {
	t.Setenv("RECONCILER_DSN", "")
	for _, args := range [][]string{
		{"catalog", "list"},
		{"catalog", "get", "policy/gate"},
		{"catalog", "propose", "policy/gate", "--version", "1"},
	} {
		r := runCLI(t, "", args...)
		require.Equal(t, 2, r.code, "%v", r.err)
		require.ErrorContains(t, r.err, "set --dsn or RECONCILER_DSN")
		require.ErrorContains(t, r.err, "no in-memory catalog")
	}
}

// TestCatalogCLIEnv: RECONCILER_DSN stands in for --dsn, but no variable
// stands in for --version, which a change must always name.
func TestCatalogCLIEnv(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	t.Setenv("RECONCILER_DSN", dsn)
	t.Setenv("RECONCILER_VERSION", "1")
	r := runCLI(t, policyJSON("one"), "catalog", "create", "policy/gate", "-f", "-")
	require.NoError(t, r.err, "migrations are applied on first use")
	r = runCLI(t, "", "catalog", "propose", "policy/gate")
	require.Equal(t, 2, r.code, "%v", r.err)
	require.ErrorContains(t, r.err, "--version is required")
}

// TestCatalogCLINoMigrate: --migrate=false refuses an unmigrated database
// with a pointer to `reconciler migrate up` (exit status 5).
func TestCatalogCLINoMigrate(t *testing.T) {
	t.Parallel()
	dsn, _ := pgtest.Schema(t)
	r := runCLI(t, policyJSON("x"), "catalog", "create", "policy/gate", "-f", "-", "--migrate=false", "--dsn", dsn)
	require.Equal(t, exitNotMigrated, r.code, "%v", r.err)
	require.ErrorContains(t, r.err, "run `reconciler migrate up` first, or drop --migrate=false")
}

// TestShownRevision checks get's default choice over every mix of
// revisions, against the rule as documented.
func TestShownRevision(t *testing.T) {
	t.Parallel()
	rev := func(n int, l revision.Lifecycle) ports.Revision {
		return ports.Revision{ID: fmt.Sprintf("%s-%d", l, n), Revision: n, Lifecycle: l}
	}
	tests := []struct {
		name string
		rs   []ports.Revision
		want string
	}{
		{"nothing", nil, ""},
		{"draft only", []ports.Revision{rev(0, revision.Draft)}, "draft-0"},
		{"draft beats published", []ports.Revision{rev(1, revision.Published), rev(0, revision.Proposed)}, "proposed-0"},
		{"latest published", []ports.Revision{rev(1, revision.Published), rev(2, revision.Published), rev(3, revision.DeletionProposed)}, "published-2"},
		{"published beats newer deletion-proposed", []ports.Revision{rev(1, revision.Published), rev(2, revision.DeletionProposed)}, "published-1"},
		{"newest deletion-proposed", []ports.Revision{rev(1, revision.DeletionProposed), rev(4, revision.DeletionProposed)}, "deletion-proposed-4"},
	}
	for _, tt := range tests {
		got, ok := shown(tt.rs)
		require.Equal(t, tt.want != "", ok, tt.name)
		require.Equal(t, tt.want, got.ID, tt.name)
	}
}

// TestYAMLToJSON covers the document shapes create and edit accept or
// refuse.
func TestYAMLToJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src, want, err string
	}{
		{"mapping", "a: 1\nb: [x, z]\n", `{"a": 1, "b": ["x", "z"]}`, ""},
		{"two documents", "a: 1\n---\nb: 2\n", "", "exactly one YAML document, got 2"},
		{"sequence", "- a\n- b\n", "", "must be a mapping"},
		// yaml.v3 prints parser errors' lines zero-based; each case names the
		// line of the user's file that holds the mistake.
		{"unclosed bracket at the end", "a: 1\nb: [\n", "", "at line 2: did not find expected node content (the document ends there)"},
		{"unclosed bracket, blank lines after", "a: 1\nb: [\n\n\n# end\n", "", "at line 2: did not find expected node content (the document ends there)"},
		{"unclosed brace mid-file", "a: 1\nb: {x: 1\nc: 2\n", "", "at line 2: did not find expected ',' or '}'"},
		{"unclosed bracket on line 1", "a: [1,\n  2\nb: 3\n", "", "at line 3: did not find expected ',' or ']'"},
		{"bad indentation", "a: 1\nb:\n  - x\n - y\nc: 3\n", "", "at line 4: did not find expected key"},
		{"scanner error", "a: 1\n  b: 2\nc: 3\n", "", "at line 2: mapping values are not allowed"},
		{"unterminated string names its start", "a: 1\nb: \"open\nc: 2\n", "", "at line 2: found unexpected end of stream"},
		{"scanner error on line 1", "@a: 1\n", "", "at line 1: found character that cannot start any token"},
		{"control character", "a: 1\nb: x\x01\n", "", "at line 2: control characters are not allowed"},
		{"invalid UTF-8", "a: 1\nb: 2\nc: \xff\n", "", "at line 3: invalid"},
		{"duplicate key", "a: 1\na: 2\n", "", "already set"},
	}
	for _, tt := range tests {
		got, err := yamlToJSON([]byte(tt.src))
		if tt.err != "" {
			require.ErrorIs(t, err, revision.ErrValidation, tt.name)
			require.ErrorContains(t, err, tt.err, tt.name)
			continue
		}
		require.NoError(t, err, tt.name)
		require.JSONEq(t, tt.want, string(got), tt.name)
	}
}

// TestCatalogValidators: the service's validators refuse what the kinds'
// own packages refuse, naming the field.
func TestCatalogValidators(t *testing.T) {
	t.Parallel()
	v := catalogValidators()
	require.NoError(t, v[revision.KindWorkflowTemplate]([]byte(deployJSON)))
	require.NoError(t, v[revision.KindPolicy]([]byte(policyJSON("x"))))

	err := v[revision.KindWorkflowTemplate]([]byte(cycleYAML))
	var ve *revision.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Len(t, ve.Problems, 2, "every problem is reported")

	err = v[revision.KindPolicy]([]byte(`{"id": "g", "name": "G", "rules": [{"id": "r", "type": "nope"}]}`))
	require.ErrorIs(t, err, revision.ErrValidation)
	require.ErrorContains(t, err, "rules[0]")
}

// TestCatalogCLIUnreachable: a database that cannot be reached is an
// internal error, exit status 1.
func TestCatalogCLIUnreachable(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", "catalog", "list", "--dsn", "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
	require.Error(t, r.err)
	require.Equal(t, 1, r.code)
}

// TestCatalogCLIRefusesNUL: a NUL character in any string of a template
// (a YAML "\0" escape or a JSON "\u0000") is refused at create and at edit
// with exit 2 naming the field; nothing is stored.
func TestCatalogCLIRefusesNUL(t *testing.T) {
	t.Parallel()
	c := setupCatalog(t)
	yamlDoc := func(image string) string {
		return "apiVersion: reconciler.dev/v1\nkind: WorkflowTemplate\nmetadata: {name: nul}\nspec:\n  tasks:\n    - name: a\n      type: job\n      jobAgentRef: ci\n      config: {image: " + image + "}\n"
	}
	const want = "content.spec.tasks[0].config.image: must not contain a NUL character"
	for _, bad := range []string{yamlDoc(`"web\0:2"`), strings.ReplaceAll(deployJSON, `"name": "ship"`, `"name": "ship", "config": {"x": "a\u0000"}`)} {
		r := c.run(bad, "create", "workflow-template/nul", "-f", "-")
		require.Equal(t, 2, r.code, "%s\n%s", r.stderr, r.err)
		require.Contains(t, r.stderr+fmt.Sprint(r.err), "must not contain a NUL character")
	}
	r := c.run("", "list", "-o", "json")
	require.NoError(t, r.err)
	require.NotContains(t, r.stdout, "nul", "a refused create stores nothing")

	c.ok(yamlDoc("web:2"), "create", "workflow-template/nul", "-f", "-")
	r = c.run(yamlDoc(`"web\0:2"`), "edit", "workflow-template/nul", "-f", "-", "--version", c.version("workflow-template/nul"))
	require.Equal(t, 2, r.code, "%s\n%s", r.stderr, r.err)
	require.Contains(t, r.stderr+fmt.Sprint(r.err), want)
}
