package apply_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/engine/apply"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// env is an Applier over one store, with the queue its effects enqueue on.
type env struct {
	a     *apply.Applier
	store ports.ReleaseStore
	queue ports.Queue
}

// stores are the adapters every test runs on.
var stores = []string{"memory", "postgres"}

// newEnv builds an Applier on backend, with the chain's effects and an
// agent-config check that refuses a test-runner delay that is not a string.
func newEnv(t *testing.T, backend string) *env {
	t.Helper()
	clock := porttest.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	var e env
	var tx ports.Transactor
	switch backend {
	case "memory":
		s, q := memory.NewReleaseStore(clock), memory.NewQueue(clock)
		e.store, e.queue, tx = s, q, memory.NewTransactor(s, q)
	case "postgres":
		dsn, _ := pgtest.Schema(t)
		db, err := postgres.Open(t.Context(), dsn, postgres.WithMaxConns(4))
		require.NoError(t, err)
		t.Cleanup(db.Close)
		require.NoError(t, db.MigrateUp(t.Context()))
		q := postgres.NewQueue(db, clock)
		t.Cleanup(q.Close)
		e.store, e.queue, tx = postgres.NewReleaseStore(db, clock), q, db
	}
	ch := &chain.Chain{Store: e.store, Queue: e.queue, Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	e.a = &apply.Applier{Store: e.store, Tx: tx, Effects: ch, Policies: catalog.New(e.store, catalog.Config{}).Policies("tester"), AgentConfig: func(typ string, cfg map[string]any) error {
		if d, ok := cfg["delay"]; ok && typ == "test-runner" {
			if _, isString := d.(string); !isString {
				return release.Invalid("job_agent_config.delay", "want a duration string")
			}
		}
		return nil
	}}
	return &e
}

// eachStore runs fn on every store as a parallel subtest.
func eachStore(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, b := range stores {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			fn(t, newEnv(t, b))
		})
	}
}

// doc builds a document; parent is the metadata parent for kinds that
// have one.
func doc(kind, name, parent string, spec map[string]any) apply.Document {
	d := apply.Document{APIVersion: apply.APIVersion, Kind: kind, Metadata: apply.Metadata{Name: name}, Spec: spec}
	switch kind {
	case "System", "Resource", "Policy":
		d.Metadata.Workspace = parent
	case "Deployment", "Environment", "VariableSet":
		d.Metadata.System = parent
	}
	return d
}

const k8s = `resource.kind == "KubernetesCluster"`

// shop is a workspace ws with one system, two environments (staging after
// dev), two clusters, an agent, a deployment and a policy.
func shop(ws string) []apply.Document {
	sys := ws + "-shop"
	return []apply.Document{
		doc("Workspace", ws, "", map[string]any{"name": "Workspace " + ws}),
		doc("System", sys, ws, map[string]any{"name": "Shop"}),
		doc("Environment", ws+"-dev", sys, map[string]any{"name": "dev", "resource_selector": k8s}),
		doc("Environment", ws+"-staging", sys, map[string]any{"name": "staging", "resource_selector": k8s}),
		doc("Resource", ws+"-eu-1", ws, map[string]any{"kind": "KubernetesCluster", "identifier": "k8s/" + ws + "/eu-1", "metadata": map[string]any{"region": "eu-1"}}),
		doc("Resource", ws+"-us-1", ws, map[string]any{"kind": "KubernetesCluster", "identifier": "k8s/" + ws + "/us-1"}),
		doc("JobAgent", ws+"-runner", "", map[string]any{"name": "Runner", "type": "test-runner", "config": map[string]any{"delay": "3s"}}),
		doc("Deployment", ws+"-web", sys, map[string]any{"name": "Web", "slug": "web", "job_agent_id": ws + "-runner", "resource_selector": k8s}),
		doc("Policy", ws+"-staging-after-dev", ws, map[string]any{"name": "Staging after dev", "selector": `environment.name == "staging"`, "enabled": true,
			"rules": []any{map[string]any{"id": "after-dev", "type": "environmentProgression", "depends_on_environment_selector": `environment.name == "dev"`}}}),
		doc("VariableSet", ws+"-defaults", sys, map[string]any{"name": "defaults", "priority": 1, "values": map[string]any{"region": map[string]any{"literal": "eu"}}}),
	}
}

// snapshot is every object of every kind as documents, with versions, and
// every release target, as JSON: what a refused or dry apply must leave.
func snapshot(t *testing.T, e *env) string {
	t.Helper()
	ctx := t.Context()
	out := map[string]any{}
	for _, k := range apply.KindNames() {
		docs, err := e.a.Get(ctx, k, "")
		require.NoError(t, err)
		out[k] = docs
	}
	ws, err := ports.ListAll(ctx, e.store.Workspaces(), "")
	require.NoError(t, err)
	deps, err := ports.ListAll(ctx, e.store.Deployments(), "")
	require.NoError(t, err)
	out["versions"] = []any{ws, deps}
	ts, err := e.store.TargetList(ctx, ports.TargetListParams{})
	require.NoError(t, err)
	out["targets"] = ts
	b, err := json.MarshalIndent(out, "", " ")
	require.NoError(t, err)
	return string(b)
}

// actions renders results as "Kind/name action" lines.
func actions(r apply.Response) []string {
	out := make([]string, len(r.Results))
	for i, x := range r.Results {
		out[i] = x.Kind + "/" + x.Name + " " + string(x.Action)
	}
	return out
}

func TestApplyCreatesChangesAndIsIdempotent(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		docs := shop("a")
		r, err := e.a.Apply(ctx, apply.Request{Documents: docs})
		require.NoError(t, err)
		require.Equal(t, []string{
			"Workspace/a created", "JobAgent/a-runner created", "System/a-shop created", "VariableSet/a-defaults created",
			"Resource/a-eu-1 created", "Resource/a-us-1 created",
			"Environment/a-dev created", "Environment/a-staging created",
			"Deployment/a-web created", "Policy/a-staging-after-dev created",
		}, actions(r), "kind order (parents first), then name")
		ts, err := e.store.TargetList(ctx, ports.TargetListParams{})
		require.NoError(t, err)
		require.Len(t, ts, 4, "2 environments × 2 clusters: the effects recomputed the targets")

		before := snapshot(t, e)
		r, err = e.a.Apply(ctx, apply.Request{Documents: docs})
		require.NoError(t, err)
		for _, x := range r.Results {
			require.Equal(t, apply.Unchanged, x.Action, "%s/%s", x.Kind, x.Name)
		}
		require.Equal(t, before, snapshot(t, e), "applying twice changes nothing")

		docs[7].Spec["resource_selector"] = `resource.kind == "KubernetesCluster" && resource.metadata.region == "eu-1"`
		r, err = e.a.Apply(ctx, apply.Request{Documents: docs})
		require.NoError(t, err)
		require.Contains(t, actions(r), "Deployment/a-web changed")
		ts, err = e.store.TargetList(ctx, ports.TargetListParams{Scope: ports.TargetScope{DeploymentID: "a-web"}})
		require.NoError(t, err)
		require.Len(t, ts, 2, "the changed selector recomputed the targets")
	})
}

// TestApplyDeprecatedAPIVersion: documents of the old group
// (ctrlplane.dev/v1) are applied like reconciler.dev/v1 ones, each with a
// warning naming it; the current group has none; another is refused.
func TestApplyDeprecatedAPIVersion(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, e *env) {
		docs := shop("old")
		docs[0].APIVersion = apply.DeprecatedAPIVersion
		r, err := e.a.Apply(t.Context(), apply.Request{Documents: docs})
		require.NoError(t, err)
		require.Contains(t, actions(r), "Workspace/old created")
		require.Equal(t, []string{"documents[0].apiVersion: ctrlplane.dev/v1 is deprecated; use reconciler.dev/v1"}, r.Warnings)

		r, err = e.a.Apply(t.Context(), apply.Request{Documents: shop("old")})
		require.NoError(t, err)
		require.Empty(t, r.Warnings)

		docs[0].APIVersion = "example.com/v1"
		_, err = e.a.Apply(t.Context(), apply.Request{Documents: docs})
		require.ErrorContains(t, err, "unsupported apiVersion")
	})
}

func TestApplyDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		before := snapshot(t, e)
		r, err := e.a.Apply(ctx, apply.Request{Documents: shop("a"), DryRun: true})
		require.NoError(t, err)
		require.True(t, r.DryRun)
		require.Len(t, r.Results, 10)
		require.Equal(t, before, snapshot(t, e), "a dry run of creations writes nothing")

		_, err = e.a.Apply(ctx, apply.Request{Documents: shop("a")})
		require.NoError(t, err)
		stats, err := e.queue.WorkStats(ctx)
		require.NoError(t, err)
		docs := shop("a")
		docs[7].Spec["name"] = "Web 2"
		docs = docs[:len(docs)-1]
		before = snapshot(t, e)
		r, err = e.a.Apply(ctx, apply.Request{Documents: docs, DryRun: true, Prune: true})
		require.NoError(t, err)
		var changed apply.Result
		for _, x := range r.Results {
			if x.Name == "a-web" {
				changed = x
			}
		}
		require.Equal(t, apply.Changed, changed.Action)
		require.Equal(t, []string{`spec.name: "Web" -> "Web 2"`}, changed.Changes)
		require.Equal(t, before, snapshot(t, e), "a dry run of changes writes nothing")
		after, err := e.queue.WorkStats(ctx)
		require.NoError(t, err)
		require.Equal(t, stats, after, "a dry run enqueues nothing")
	})
}

func TestApplyPruneStaysInItsWorkspace(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		_, err := e.a.Apply(ctx, apply.Request{Documents: append(shop("a"), shop("b")...)})
		require.NoError(t, err)
		otherBefore := workspaceDocs(t, e, "b")
		// Drop a's staging environment and us-1 cluster from the input.
		var docs []apply.Document
		for _, d := range shop("a") {
			if d.Metadata.Name != "a-staging" && d.Metadata.Name != "a-us-1" {
				docs = append(docs, d)
			}
		}
		r, err := e.a.Apply(ctx, apply.Request{Documents: docs, Prune: true})
		require.NoError(t, err)
		require.Contains(t, actions(r), "Environment/a-staging deleted")
		require.Contains(t, actions(r), "Resource/a-us-1 deleted")
		for _, line := range actions(r) {
			require.NotContains(t, line, " b", "prune touched workspace b: %v", actions(r))
		}
		_, err = e.store.Environments().Get(ctx, "a-staging")
		require.ErrorIs(t, err, ports.ErrNotFound)
		require.Equal(t, otherBefore, workspaceDocs(t, e, "b"), "workspace b is untouched")
		ts, err := e.store.TargetList(ctx, ports.TargetListParams{Scope: ports.TargetScope{SystemID: "b-shop"}})
		require.NoError(t, err)
		require.Len(t, ts, 4, "b's targets are untouched")

		// Prune with the input naming two workspaces needs --workspace.
		_, err = e.a.Apply(ctx, apply.Request{Documents: append(shop("a"), shop("b")...), Prune: true})
		requireField(t, err, "workspace")
	})
}

// TestApplyPrunesPolicies: policies belong to a workspace, so prune deletes
// the workspace's policies the documents no longer name (when they hold
// policies); a dry run lists the delete and deletes nothing; another
// workspace's policies are untouched.
func TestApplyPrunesPolicies(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		extra := doc("Policy", "a-hold", "a", map[string]any{"name": "Hold", "selector": "true", "enabled": true,
			"rules": []any{map[string]any{"id": "approve", "type": "anyApproval", "min_approvals": 1}}})
		_, err := e.a.Apply(ctx, apply.Request{Documents: append(append(shop("a"), extra), shop("b")...)})
		require.NoError(t, err)
		_, err = e.a.Policies.Get(ctx, "a-hold")
		require.NoError(t, err)
		otherBefore := workspaceDocs(t, e, "b")

		dry, err := e.a.Apply(ctx, apply.Request{Documents: shop("a"), Prune: true, DryRun: true})
		require.NoError(t, err)
		require.Contains(t, actions(dry), "Policy/a-hold deleted", "the dry run shows the delete")
		_, err = e.a.Policies.Get(ctx, "a-hold")
		require.NoError(t, err, "a dry run deletes nothing")

		r, err := e.a.Apply(ctx, apply.Request{Documents: shop("a"), Prune: true})
		require.NoError(t, err)
		require.Contains(t, actions(r), "Policy/a-hold deleted")
		require.Contains(t, actions(r), "Policy/a-staging-after-dev unchanged")
		_, err = e.a.Policies.Get(ctx, "a-hold")
		require.ErrorIs(t, err, ports.ErrNotFound, "the pruned policy is gone")
		require.Equal(t, otherBefore, workspaceDocs(t, e, "b"), "workspace b's policy is untouched")

		// Documents without policies prune none.
		var noPolicies []apply.Document
		for _, d := range shop("a") {
			if d.Kind != "Policy" {
				noPolicies = append(noPolicies, d)
			}
		}
		r, err = e.a.Apply(ctx, apply.Request{Documents: noPolicies, Prune: true})
		require.NoError(t, err)
		require.NotContains(t, actions(r), "Policy/a-staging-after-dev deleted")
		_, err = e.a.Policies.Get(ctx, "a-staging-after-dev")
		require.NoError(t, err)
	})
}

// TestApplyRefusesMovingASystem: a system's workspace is fixed, as the
// API's PUT keeps it: apply refuses the move naming metadata.workspace and
// writes nothing.
func TestApplyRefusesMovingASystem(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		_, err := e.a.Apply(ctx, apply.Request{Documents: append(shop("a"), doc("Workspace", "b", "", map[string]any{"name": "B"}))})
		require.NoError(t, err)
		before := snapshot(t, e)
		_, err = e.a.Apply(ctx, apply.Request{Documents: []apply.Document{doc("System", "a-shop", "b", map[string]any{"name": "Shop"})}})
		requireField(t, err, "documents[0].metadata.workspace")
		require.Equal(t, before, snapshot(t, e), "a refused move writes nothing")
	})
}

// workspaceDocs is every document of workspace ws's fixture (shop(ws)
// names them all "ws..."), as JSON.
func workspaceDocs(t *testing.T, e *env, ws string) []string {
	t.Helper()
	var out []string
	for _, k := range apply.KindNames() {
		docs, err := e.a.Get(t.Context(), k, "")
		require.NoError(t, err)
		for _, d := range docs {
			if strings.HasPrefix(d.Metadata.Name, ws) {
				b, err := json.Marshal(d)
				require.NoError(t, err)
				out = append(out, string(b))
			}
		}
	}
	return out
}

// requireField asserts err is a *release.FieldError naming field.
func requireField(t *testing.T, err error, field string) {
	t.Helper()
	require.Error(t, err)
	var fe *release.FieldError
	require.True(t, errors.As(err, &fe), "want a *release.FieldError, got %T: %v", err, err)
	require.Equal(t, field, fe.Field, "%v", err)
	require.ErrorIs(t, err, release.ErrInvalid)
}

// TestApplyRefusesBadDocuments: each rule of apply-time validation has a
// case; a refused apply changes nothing.
func TestApplyRefusesBadDocuments(t *testing.T) {
	t.Parallel()
	type edit func(docs []apply.Document) []apply.Document
	set := func(i int, f func(d *apply.Document)) edit {
		return func(docs []apply.Document) []apply.Document { f(&docs[i]); return docs }
	}
	cases := []struct {
		name  string
		edit  edit
		field string
	}{
		{"apiVersion missing", set(1, func(d *apply.Document) { d.APIVersion = "" }), "documents[1].apiVersion"},
		{"apiVersion unknown", set(1, func(d *apply.Document) { d.APIVersion = "v0" }), "documents[1].apiVersion"},
		{"kind unknown", set(1, func(d *apply.Document) { d.Kind = "Cluster" }), "documents[1].kind"},
		{"name missing", set(2, func(d *apply.Document) { d.Metadata.Name = "" }), "documents[2].metadata.name"},
		{"parent missing", set(2, func(d *apply.Document) { d.Metadata.System = "" }), "documents[2].metadata.system"},
		{"wrong parent", set(2, func(d *apply.Document) { d.Metadata.Workspace = "a" }), "documents[2].metadata.workspace"},
		{"id in spec", set(2, func(d *apply.Document) { d.Spec["id"] = "x" }), "documents[2].spec.id"},
		{"parent in spec", set(2, func(d *apply.Document) { d.Spec["system_id"] = "x" }), "documents[2].spec.system_id"},
		{"unknown field", set(2, func(d *apply.Document) { d.Spec["colour"] = "blue" }), "documents[2].spec.colour"},
		{"CEL does not compile", set(2, func(d *apply.Document) { d.Spec["resource_selector"] = "resource.kind ==" }), "documents[2].spec.resource_selector"},
		{"CEL not boolean", set(2, func(d *apply.Document) { d.Spec["resource_selector"] = "resource.name + \"x\"" }), "documents[2].spec.resource_selector"},
		{"variable set selector not boolean", set(9, func(d *apply.Document) { d.Spec["selector"] = "1 + 2" }), "documents[9].spec.selector"},
		{"RRULE does not parse", set(8, func(d *apply.Document) {
			d.Spec["rules"] = []any{map[string]any{"id": "w", "type": "deploymentWindow", "rrule": "FREQ=SOMETIMES", "duration_minutes": 60}}
		}), "documents[8].spec.rules[0].rrule"},
		{"progression cycle", func(docs []apply.Document) []apply.Document {
			return append(docs, doc("Policy", "dev-after-staging", "a", map[string]any{"name": "Dev after staging", "selector": `environment.name == "dev"`, "enabled": true,
				"rules": []any{map[string]any{"id": "after-staging", "type": "environmentProgression", "depends_on_environment_selector": `environment.name == "staging"`}}}))
		}, "documents[10].spec.rules[0].depends_on_environment_selector"},
		{"missing job agent", set(7, func(d *apply.Document) { d.Spec["job_agent_id"] = "nobody" }), "documents[7].spec.job_agent_id"},
		{"missing system", set(7, func(d *apply.Document) { d.Metadata.System = "nowhere" }), "documents[7].metadata.system"},
		{"missing workspace", set(4, func(d *apply.Document) { d.Metadata.Workspace = "nowhere" }), "documents[4].metadata.workspace"},
		{"policy without workspace", set(8, func(d *apply.Document) { d.Metadata.Workspace = "" }), "documents[8].metadata.workspace"},
		{"policy of a missing workspace", set(8, func(d *apply.Document) { d.Metadata.Workspace = "nowhere" }), "documents[8].metadata.workspace"},
		{"agent config off its schema", set(6, func(d *apply.Document) { d.Spec["config"] = map[string]any{"delay": 3} }), "documents[6].spec.config.delay"},
		{"deployment's agent config off its schema", set(7, func(d *apply.Document) { d.Spec["job_agent_config"] = map[string]any{"delay": true} }), "documents[7].spec.job_agent_config.delay"},
		{"duplicate", func(docs []apply.Document) []apply.Document { return append(docs, docs[3]) }, "documents[10].metadata.name"},
		{"bad slug (the domain's Validate)", set(7, func(d *apply.Document) { d.Spec["slug"] = "Not A Slug" }), "documents[7].spec.slug"},
	}
	for _, b := range stores {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, b)
			ctx := t.Context()
			// A stored workspace first, so a refusal has something to keep.
			_, err := e.a.Apply(ctx, apply.Request{Documents: shop("a")[:1]})
			require.NoError(t, err)
			before := snapshot(t, e)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					_, err := e.a.Apply(ctx, apply.Request{Documents: c.edit(shop("a"))})
					requireField(t, err, c.field)
					require.Equal(t, before, snapshot(t, e), "a bad document changes nothing")
				})
			}
		})
	}
}

// TestApplyConflictChangesNothing: an object that changed between the
// read and the write (a stale CAS inside the transaction), and a prune of
// an object in use, are conflicts that leave everything as it was.
func TestApplyConflictChangesNothing(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		_, err := e.a.Apply(ctx, apply.Request{Documents: shop("a")})
		require.NoError(t, err)
		require.NoError(t, e.store.VersionCreate(ctx, release.DeploymentVersion{ID: "v1", DeploymentID: "a-web", Tag: "v1", Status: release.VersionReady, CreatedAt: time.Now()}))
		before := snapshot(t, e)
		docs := shop("a")
		docs[0].Spec["name"] = "renamed"
		docs = slices.DeleteFunc(docs, func(d apply.Document) bool { return d.Kind == "Deployment" || d.Kind == "Environment" })
		docs = append(docs, doc("Deployment", "a-other", "a-shop", map[string]any{"slug": "other", "resource_selector": k8s}))
		_, err = e.a.Apply(ctx, apply.Request{Documents: docs, Prune: true})
		require.ErrorIs(t, err, ports.ErrConflict, "a-web has a version: pruning it is refused")
		require.Equal(t, before, snapshot(t, e), "the refused prune took the other writes with it")
	})
}

func TestDeleteRemovesTargetsFirst(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, e *env) {
		ctx := t.Context()
		_, err := e.a.Apply(ctx, apply.Request{Documents: shop("a")})
		require.NoError(t, err)
		require.ErrorIs(t, e.a.Delete(ctx, "systems", "a-shop"), ports.ErrConflict, "a system with deployments is in use")
		require.NoError(t, e.a.Delete(ctx, "environment", "a-staging"))
		ts, err := e.store.TargetList(ctx, ports.TargetListParams{})
		require.NoError(t, err)
		require.Len(t, ts, 2)
		require.ErrorIs(t, e.a.Delete(ctx, "environment", "a-staging"), ports.ErrNotFound)
		_, err = apply.ParseKind("clusters")
		require.ErrorIs(t, err, release.ErrInvalid)
	})
}

// TestApplyRoundTrip: whatever was applied, applying what Get prints
// changes nothing (apply(get(x)) is a no-op), on random configurations.
func TestApplyRoundTrip(t *testing.T) {
	t.Parallel()
	for _, b := range stores {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, b)
			n := 0
			rapid.Check(t, func(rt *rapid.T) {
				n++
				ctx := context.Background()
				docs := genConfig(rt, fmt.Sprintf("w%d", n))
				_, err := e.a.Apply(ctx, apply.Request{Documents: docs})
				require.NoError(rt, err)
				// get(x): what Get prints of every object applied.
				var got []apply.Document
				for _, d := range docs {
					g, err := e.a.Get(ctx, d.Kind, d.Metadata.Name)
					require.NoError(rt, err)
					got = append(got, g...)
				}
				// Through JSON, as the CLI and the API carry them.
				b, err := json.Marshal(got)
				require.NoError(rt, err)
				var again []apply.Document
				require.NoError(rt, json.Unmarshal(b, &again))
				r, err := e.a.Apply(ctx, apply.Request{Documents: again})
				require.NoError(rt, err)
				for _, x := range r.Results {
					require.Equal(rt, apply.Unchanged, x.Action, "%s/%s: %v", x.Kind, x.Name, x.Changes)
				}
			})
		})
	}
}

// genConfig draws a valid configuration of workspace ws.
func genConfig(t *rapid.T, ws string) []apply.Document {
	label := rapid.StringMatching(`[a-z][a-z0-9-]{0,6}`)
	docs := []apply.Document{doc("Workspace", ws, "", map[string]any{"name": label.Draw(t, "wsname")})}
	agent := ws + "-agent"
	cfg := map[string]any{}
	if rapid.Bool().Draw(t, "agentcfg") {
		cfg["delay"] = rapid.SampledFrom([]string{"1s", "250ms"}).Draw(t, "delay")
	}
	docs = append(docs, doc("JobAgent", agent, "", map[string]any{"name": "agent", "type": "test-runner", "config": cfg}))
	nres := rapid.IntRange(0, 3).Draw(t, "resources")
	for i := range nres {
		spec := map[string]any{"kind": rapid.SampledFrom([]string{"KubernetesCluster", "VM"}).Draw(t, "kind"), "identifier": fmt.Sprintf("id-%d", i)}
		if rapid.Bool().Draw(t, "meta") {
			spec["metadata"] = map[string]any{"region": label.Draw(t, "region")}
		}
		docs = append(docs, doc("Resource", fmt.Sprintf("%s-r%d", ws, i), ws, spec))
	}
	nsys := rapid.IntRange(1, 2).Draw(t, "systems")
	for s := range nsys {
		sys := fmt.Sprintf("%s-s%d", ws, s)
		docs = append(docs, doc("System", sys, ws, map[string]any{"name": label.Draw(t, "sysname")}))
		for i := range rapid.IntRange(0, 2).Draw(t, "varsets") {
			spec := map[string]any{"priority": rapid.IntRange(0, 5).Draw(t, "prio"),
				"values": map[string]any{"k": map[string]any{"literal": label.Draw(t, "val")}}}
			if rapid.Bool().Draw(t, "vssel") {
				spec["selector"] = `environment.name == "e0"`
			}
			docs = append(docs, doc("VariableSet", fmt.Sprintf("%s-v%d", sys, i), sys, spec))
		}
		for i := range rapid.IntRange(0, 2).Draw(t, "envs") {
			docs = append(docs, doc("Environment", fmt.Sprintf("%s-e%d", sys, i), sys, map[string]any{"resource_selector": rapid.SampledFrom([]string{"", k8s, "true"}).Draw(t, "envsel")}))
		}
		for i := range rapid.IntRange(0, 2).Draw(t, "deps") {
			spec := map[string]any{"slug": fmt.Sprintf("d%d", i), "resource_selector": rapid.SampledFrom([]string{"", k8s}).Draw(t, "depsel")}
			if rapid.Bool().Draw(t, "agent") {
				spec["job_agent_id"] = agent
			}
			docs = append(docs, doc("Deployment", fmt.Sprintf("%s-d%d", sys, i), sys, spec))
		}
	}
	if rapid.Bool().Draw(t, "policy") {
		docs = append(docs, doc("Policy", ws+"-p", ws, map[string]any{"name": "p", "enabled": rapid.Bool().Draw(t, "enabled"),
			"priority": rapid.IntRange(-3, 3).Draw(t, "ppri"),
			"rules":    []any{map[string]any{"id": "approval", "type": "anyApproval", "min_approvals": rapid.IntRange(1, 3).Draw(t, "min")}}}))
	}
	return docs
}
