package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/engine/apply"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
)

const shopStaging = `# a comment before the first document
apiVersion: reconciler.dev/v1
kind: Environment
metadata: {name: qa, system: shop}
spec:
  resource_selector: 'resource.kind == "KubernetesCluster"'
---
apiVersion: reconciler.dev/v1
kind: Deployment
metadata:
  name: api
  system: shop
spec:
  name: API
  slug: api
  job_agent_id: runner
  resource_selector: 'resource.kind == "KubernetesCluster"'
`

// TestApplyCLI: apply -f (stdin, file, directory), its output, the
// get -o yaml round trip, --dry-run, a bad document placed at its file and
// line (exit 2, nothing written), and delete's exit statuses.
func TestApplyCLI(t *testing.T) {
	t.Parallel()
	url, tok := apiServer(t)
	as := func(s ports.Scope, stdin string, args ...string) cliResult {
		return runCLI(t, stdin, append(args, "--server", url, "--token", tok[s])...)
	}
	r := as(ports.ScopeWrite, shopStaging, "apply", "-f", "-", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "environment/qa created (dry run)\ndeployment/api created (dry run)\nplan:\n"), r.stdout)
	require.Contains(t, r.stdout, "  target api:prod:eu-1 created\n    desired: none -> no release\n    + prod-gate/after-staging (environmentProgression, revision 1)\n    + prod-gate/approval (anyApproval, revision 1)\n")
	require.Regexp(t, `  target web:qa:eu-1 created\n    desired: none -> v1 \(release [0-9a-f]{12}\)\n`, r.stdout, "qa would get web's v1 at once")
	r = as(ports.ScopeWrite, shopStaging, "apply", "-f", "-", "--dry-run", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var dry apply.Response
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &dry), r.stdout)
	require.NotNil(t, dry.Plan)
	require.Len(t, dry.Plan.Targets, 18, "api in four environments and web and worker in qa, on three clusters")
	require.Empty(t, dry.PlanNextCursor, "every page read")
	r = as(ports.ScopeWrite, shopStaging, "apply", "-f", "-", "--dry-run", "--limit", "5")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 5, strings.Count(r.stdout, "  target "), r.stdout)
	require.Contains(t, r.stdout, "plan: 5 of 18 targets shown (--limit); 18 created, 0 removed, 6 with gates changing, 0 rules lifted, 18 releases moving in all\n", r.stdout)
	require.Equal(t, 2, as(ports.ScopeWrite, shopStaging, "apply", "-f", "-", "--limit", "5").code, "--limit without --dry-run")
	require.Equal(t, 2, as(ports.ScopeWrite, shopStaging, "apply", "-f", "-", "--dry-run", "--limit", "0").code, "--limit 0")
	r = as(ports.ScopeWrite, shopStaging, "apply", "-f", "-")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "environment/qa created\ndeployment/api created\n", r.stdout)
	r = as(ports.ScopeRead, "", "get", "targets", "--deployment", "api")
	require.Equal(t, 13, strings.Count(r.stdout, "\n"), "a header and api in four environments on three clusters: %s", r.stdout)

	// What get prints, apply takes unchanged: every object of every kind.
	var all strings.Builder
	for _, k := range []string{"workspaces", "job-agents", "systems", "variable-sets", "resources", "environments", "deployments", "policies"} {
		r = as(ports.ScopeRead, "", "get", k, "-o", "yaml")
		require.Equal(t, 0, r.code, "%s: %v", k, r.err)
		all.WriteString("---\n" + r.stdout)
	}
	// The policies among them need the approve scope, so admin applies.
	r = as(ports.ScopeAdmin, all.String(), "apply", "-f", "-")
	require.Equal(t, 0, r.code, "%v", r.err)
	require.Contains(t, r.stdout, "policy/prod-gate unchanged\n")
	require.NotContains(t, r.stdout, " created")
	require.NotContains(t, r.stdout, " changed")
	require.Contains(t, r.stdout, "deployment/web unchanged\n")
	r = as(ports.ScopeRead, "", "get", "deployment", "api", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"kind": "Deployment"`)
	require.Equal(t, 4, as(ports.ScopeRead, "", "get", "deployment", "nope").code)

	// A file in a directory; a change with --dry-run shows the field.
	dir := t.TempDir()
	changed := strings.Replace(shopStaging, "name: API", "name: API v2", 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "shop.yaml"), []byte(changed), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not read"), 0o600))
	r = as(ports.ScopeWrite, "", "apply", "-f", dir, "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "environment/qa unchanged (dry run)\ndeployment/api changed (dry run)\n  spec.name: \"API\" -> \"API v2\"\n"+
		"plan: no release target changes its gating rules or its desired release\n", r.stdout)

	// A bad document: exit 2, the file, the field's line and the field; nothing written.
	bad := strings.Replace(changed, `slug: api`, `slug: Not A Slug`, 1)
	file := filepath.Join(dir, "shop.yaml")
	require.NoError(t, os.WriteFile(file, []byte(bad), 0o600))
	r = as(ports.ScopeWrite, "", "apply", "-f", file)
	require.Equal(t, 2, r.code, r.stdout)
	require.Contains(t, r.err.Error(), file+`:15: Deployment "api": spec.slug:`)
	r = as(ports.ScopeRead, "", "get", "deployment", "api", "-o", "yaml")
	require.Contains(t, r.stdout, "name: API\n", "the refused apply changed nothing")
	r = as(ports.ScopeWrite, "apiVersion: reconciler.dev/v1\nkind: Deployment\nmetadata: {name: x, system: shop}\nspec: {slug: x}\ncolour: red\n", "apply", "-f", "-")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.err.Error(), "stdin:5: colour")
	require.Equal(t, 2, as(ports.ScopeWrite, "", "apply").code, "-f is required")
	require.Equal(t, 2, as(ports.ScopeWrite, "key: [", "apply", "-f", "-").code, "a YAML syntax error")
	require.Equal(t, 5, as(ports.ScopeRead, shopStaging, "apply", "-f", "-").code, "scope write")

	// catalog plan: a draft of prod-gate that disables it would let prod
	// take v1 (desired before -> after, as the dry run decides it).
	r = as(ports.ScopeRead, "", "catalog", "get", "policy/prod-gate", "-o", "content")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"enabled":true`)
	r = as(ports.ScopeWrite, strings.Replace(r.stdout, `"enabled":true`, `"enabled":false`, 1), "catalog", "create", "policy/prod-gate", "-f", "-")
	require.Equal(t, 0, r.code, r.stderr)
	r = as(ports.ScopeRead, "", "catalog", "plan", "policy/prod-gate")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `  target web:prod:eu-1 changed\n    desired: no release -> v1 \(release [0-9a-f]{12}\)\n    - prod-gate/after-staging`, r.stdout)

	// Renaming the environment prod-gate's selector reads lifts its rules:
	// write only is refused (exit 5) naming target and rule; admin applies.
	prod := "apiVersion: reconciler.dev/v1\nkind: Environment\nmetadata: {name: prod, system: shop}\nspec: {name: 'prod ', resource_selector: 'resource.kind == \"KubernetesCluster\"'}\n"
	r = as(ports.ScopeWrite, prod, "apply", "-f", "-", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "  target api:prod:eu-1 changed\n    desired: no release (unchanged)\n    - prod-gate/after-staging (environmentProgression, revision 1)\n    - prod-gate/approval (anyApproval, revision 1)\n")
	require.Regexp(t, `  target web:prod:eu-1 changed\n    desired: no release -> v1 \(release [0-9a-f]{12}\)\n`, r.stdout, "without its gate, prod would get v1")
	r = as(ports.ScopeWrite, prod, "apply", "-f", "-")
	require.Equal(t, 5, r.code, r.stdout)
	require.Contains(t, r.err.Error(), "prod-gate/approval (anyApproval, revision 1) from target api:prod:eu-1")
	r = as(ports.ScopeRead, "", "get", "environment", "prod", "-o", "yaml")
	require.Contains(t, r.stdout, "name: prod\n", "the refused apply changed nothing")
	r = as(ports.ScopeAdmin, prod, "apply", "-f", "-")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "environment/prod changed\n", r.stdout)

	// delete: 0, then 4; in use 3; unknown kind 2.
	r = as(ports.ScopeWrite, "", "delete", "deployment", "api")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "deployment/api deleted\n", r.stdout)
	require.Equal(t, 4, as(ports.ScopeWrite, "", "delete", "deployment", "api").code)
	require.Equal(t, 3, as(ports.ScopeWrite, "", "delete", "system", "shop").code)
	require.Equal(t, 2, as(ports.ScopeWrite, "", "delete", "cluster", "x").code)
}

// TestServeReleaseDemoChoice: the release demo is seeded in memory unless
// --demo=false, and on PostgreSQL only when --demo or --demo-dir is given.
func TestServeReleaseDemoChoice(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		o    serveOptions
		want bool
	}{
		{"memory, default", serveOptions{demo: true}, true},
		{"memory, --demo=false", serveOptions{demo: false, demoAsked: true}, false},
		{"postgres, default", serveOptions{dsn: "x", demo: true}, false},
		{"postgres, --demo", serveOptions{dsn: "x", demo: true, demoAsked: true}, true},
		{"postgres, --demo-dir", serveOptions{dsn: "x", demo: true, demoDir: "d"}, true},
		{"postgres, --demo=false --demo-dir", serveOptions{dsn: "x", demo: false, demoAsked: true, demoDir: "d"}, false},
	} {
		require.Equal(t, c.want, c.o.releaseDemo(), c.name)
	}
}

// TestReleaseDemoOnPostgresIsIdempotent: seeding the demo twice into one
// database (serve --dsn --demo started twice) changes nothing the second
// time: objects, targets, versions, approvals and templates are counted
// before and after.
func TestReleaseDemoOnPostgresIsIdempotent(t *testing.T) {
	t.Parallel()
	dsn, _ := pgtest.Schema(t)
	be, err := openBackend(t.Context(), dsn, true, ports.SystemClock)
	require.NoError(t, err)
	t.Cleanup(be.close)
	rt := newReleaseRuntime(be.releases, be.workflows, be.catalog, be.queue, ports.SystemClock, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	t.Cleanup(rt.close)
	fsys, where, err := demoFS("")
	require.NoError(t, err)
	w, err := loadReleaseDemo(fsys, where)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel() // stops the demo's delayed v2
	state := func() string {
		t.Helper()
		a := &apply.Applier{Store: be.releases, Tx: be.tx}
		out := map[string]any{}
		for _, k := range apply.KindNames() {
			docs, err := a.Get(ctx, k, "")
			require.NoError(t, err)
			out[k] = docs
		}
		ts, err := be.releases.TargetList(ctx, ports.TargetListParams{})
		require.NoError(t, err)
		out["targets"] = len(ts)
		for _, v := range w.Versions {
			if v.After == 0 {
				got, err := be.releases.VersionGet(ctx, v.ID)
				require.NoError(t, err)
				out["version "+v.ID] = got.CreatedAt
			}
		}
		aps, err := be.releases.ApprovalList(ctx, "web-v1", "")
		require.NoError(t, err)
		out["approvals"] = aps
		revs, err := be.catalog.CatalogList(ctx, ports.CatalogListParams{})
		require.NoError(t, err)
		out["templates"] = revs
		b, err := json.Marshal(out)
		require.NoError(t, err)
		return string(b)
	}
	require.NoError(t, seedReleaseDemo(ctx, rt.chain, be.catalog, be.tx, w))
	first := state()
	require.Contains(t, first, `"name":"web"`)
	require.NoError(t, seedReleaseDemo(ctx, rt.chain, be.catalog, be.tx, w))
	require.Equal(t, first, state(), "the second seed changed something")
}

// TestApplyPlacesAProblemWhoseFieldHasALineBreak: a server problem whose
// field holds a line break (a JSON key of the user's, echoed) is placed in
// the file like any other, the field quoted, never printed raw (found by
// FuzzApplyManifest: the location pattern stopped at the line break).
func TestApplyPlacesAProblemWhoseFieldHasALineBreak(t *testing.T) {
	t.Parallel()
	m := &manifest{}
	require.NoError(t, m.add("f.yaml", []byte("apiVersion: reconciler.dev/v1\nkind: System\nmetadata: {name: shop, workspace: acme}\nspec: {name: Shop}\n")))
	problem := &client.Error{Status: 422, Title: "Unprocessable Entity"}
	problem.Errors = append(problem.Errors, struct {
		Message  string `json:"message"`
		Location string `json:"location"`
	}{Message: "unexpected property", Location: "body.documents[0].spec.a\nb"})
	err := m.place(problem)
	require.EqualError(t, err, `f.yaml:1: System "shop": "spec.a\nb": unexpected property`)
	require.ErrorIs(t, err, problem, "the problem stays the cause")
}
