package porttest

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// relFullDeployment sets every deployment field.
func relFullDeployment() release.Deployment {
	return release.Deployment{
		ID: "dfull", SystemID: relSys1, Name: "Full", Slug: "full", JobAgentID: relAgent,
		JobAgentConfig:   map[string]any{"workflow": "deploy.yml", "inputs": map[string]any{"n": 2, "list": []any{"a", 1.5}}},
		ResourceSelector: `resource.kind == "Cluster"`,
		Metadata:         map[string]string{"team": "core"},
		Variables: []release.DeploymentVariable{{
			Key: "replicas", Description: "pods",
			Values: []release.VariableValue{
				{Selector: `environment.name == "prod"`, Priority: 2, Value: release.Value{Literal: 5}},
				{Selector: "true", Priority: 1, Value: release.Value{Reference: &release.Reference{Relation: "vpc", Path: []string{"metadata", "region"}}}},
			},
			Default: &release.Value{Sensitive: &release.SecretRef{Ref: "vault://x"}},
		}},
		WorkflowTemplate: &release.WorkflowTemplateRef{Name: "deploy", Scope: "system"},
	}
}

func relCatalogRoundTrip(t *testing.T, e *relEnv) {
	relWorld(t, e)
	d := relFullDeployment()
	_, err := e.s.Deployments().Put(e.ctx, d, 0)
	require.NoError(t, err)
	got, err := e.s.Deployments().Get(e.ctx, d.ID)
	require.NoError(t, err)
	want := d
	// JSON numbers read back as float64 in free-form maps and as int64 in
	// variable literals, in every adapter.
	want.JobAgentConfig = map[string]any{"workflow": "deploy.yml", "inputs": map[string]any{"n": float64(2), "list": []any{"a", 1.5}}}
	want.Variables = []release.DeploymentVariable{d.Variables[0]}
	want.Variables[0].Values = []release.VariableValue{d.Variables[0].Values[0], d.Variables[0].Values[1]}
	want.Variables[0].Values[0].Value = release.Value{Literal: int64(5)}
	require.Equal(t, want, got.Value)

	r := release.Resource{ID: "rfull", WorkspaceID: relWS, Kind: "Cluster", Identifier: "x", Name: "X", Version: "v1",
		Config: map[string]any{"replicas": 3, "labels": map[string]any{"a": "b"}, "on": true, "nil": nil}, Metadata: map[string]string{"region": "eu"},
		Variables: map[string]release.Value{"replicas": {Literal: 9}, "token": {Sensitive: &release.SecretRef{Ciphertext: "v1:abc"}}}}
	_, err = e.s.Resources().Put(e.ctx, r, 0)
	require.NoError(t, err)
	gotR, err := e.s.Resources().Get(e.ctx, r.ID)
	require.NoError(t, err)
	r.Config = map[string]any{"replicas": float64(3), "labels": map[string]any{"a": "b"}, "on": true, "nil": nil}
	r.Variables = map[string]release.Value{"replicas": {Literal: int64(9)}, "token": r.Variables["token"]}
	require.Equal(t, r, gotR.Value)

	sys := release.System{ID: "sysfull", WorkspaceID: relWS, Name: "Full"}
	_, err = e.s.Systems().Put(e.ctx, sys, 0)
	require.NoError(t, err)
	gotS, err := e.s.Systems().Get(e.ctx, sys.ID)
	require.NoError(t, err)
	require.Equal(t, sys, gotS.Value)
	sets := []release.VariableSet{
		{ID: "vs-prod", SystemID: sys.ID, Name: "prod", Selector: `environment.name == "prod"`, Priority: 2, Values: map[string]release.Value{"replicas": {Literal: 4}}},
		{ID: "vs-all", SystemID: sys.ID, Name: "all", Values: map[string]release.Value{"region": {Literal: "eu"}}},
	}
	for _, vs := range sets {
		_, err = e.s.VariableSets().Put(e.ctx, vs, 0)
		require.NoError(t, err)
	}
	gotVS, err := e.s.VariableSets().Get(e.ctx, "vs-prod")
	require.NoError(t, err)
	sets[0].Values = map[string]release.Value{"replicas": {Literal: int64(4)}}
	require.Equal(t, sets[0], gotVS.Value)
	requireInUse(t, e.s.Systems().Delete(e.ctx, sys.ID, 1), "variable set vs-all", func() error { _, err := e.s.Systems().Get(e.ctx, sys.ID); return err })

	p := policy.Policy{ID: "pfull", WorkspaceID: "ws", Name: "P", Description: "d", Selector: `environment.name == "prod"`, Priority: 7, Enabled: true}
	rev := relPublishPolicy(t, e.ctx, e.s, p)
	gotP, err := ports.EnabledPolicies(e.ctx, e.s)
	require.NoError(t, err)
	require.Equal(t, []ports.Stored[policy.Policy]{{Value: p, Version: 1, UpdatedAt: rev.PublishedAt}}, gotP)
}

// relPublishPolicy publishes p as the next revision of catalog object
// policy/<p.ID> (draft, proposed, published) and returns the revision.
func relPublishPolicy(t *testing.T, ctx context.Context, cat ports.Catalog, p policy.Policy) ports.Revision {
	t.Helper()
	r := relDraftPolicy(t, ctx, cat, p)
	r, err := cat.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: r.Version, Lifecycle: revision.Proposed})
	require.NoError(t, err)
	r, err = cat.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: r.Version, Lifecycle: revision.Published, ApprovedBy: "porttest"})
	require.NoError(t, err)
	return r
}

// relDraftPolicy opens a draft of p in the catalog.
func relDraftPolicy(t *testing.T, ctx context.Context, cat ports.Catalog, p policy.Policy) ports.Revision {
	t.Helper()
	content, err := json.Marshal(p)
	require.NoError(t, err)
	r, err := cat.CatalogCreate(ctx, ports.Revision{Kind: revision.KindPolicy, Name: p.ID, ID: catalogID(), Content: content})
	require.NoError(t, err)
	return r
}

// relCatalogStoreChecks: input the domain Validate accepts but no store can
// keep is refused as invalid too, and changes nothing.
func relCatalogStoreChecks(t *testing.T, e *relEnv) {
	relWorld(t, e)
	bad := release.Resource{ID: relR1, WorkspaceID: relWS, Kind: "Cluster", Identifier: "x", Name: "nan", Config: map[string]any{"x": math.NaN()}}
	_, err := e.s.Resources().Put(e.ctx, bad, 1)
	require.ErrorIs(t, err, release.ErrInvalid, "a NaN cannot be stored")
	got, err := e.s.Resources().Get(e.ctx, relR1)
	require.NoError(t, err)
	require.Equal(t, int64(1), got.Version)
	require.Equal(t, "Resource "+relR1, got.Value.Name)
}

// relCatalogSelectorPosition: a selector that does not compile is refused
// with its field, line and column.
func relCatalogSelectorPosition(t *testing.T, e *relEnv) {
	relWorld(t, e)
	d := release.Deployment{ID: "dsel", SystemID: relSys1, Name: "n", Slug: "n", ResourceSelector: relSelectorBad}
	_, err := e.s.Deployments().Put(e.ctx, d, 0)
	requireInvalid(t, err, "resource_selector")
	var fe *release.FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, relSelectorBadLine, fe.Line, "CEL line")
	require.Positive(t, fe.Column, "CEL column")
	_, err = e.s.Deployments().Get(e.ctx, d.ID)
	require.ErrorIs(t, err, ports.ErrNotFound)
}

func relCatalogLists(t *testing.T, e *relEnv) {
	relWorld(t, e)
	ctx, s := e.ctx, e.s
	ids := func(n int, id func(i int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = id(i)
		}
		return out
	}
	systems, err := ports.ListAll(ctx, s.Systems(), relWS)
	require.NoError(t, err)
	require.Equal(t, []string{relSys1, relSys2}, ids(len(systems), func(i int) string { return systems[i].Value.ID }))
	systems, err = ports.ListAll(ctx, s.Systems(), "ws-none")
	require.NoError(t, err)
	require.Empty(t, systems)

	// Ids list in byte order: "D" < "d".
	_, err = s.Deployments().Put(ctx, release.Deployment{ID: "D0", SystemID: relSys1, Name: "upper", Slug: "upper"}, 0)
	require.NoError(t, err)
	deps, err := ports.ListAll(ctx, s.Deployments(), relSys1)
	require.NoError(t, err)
	require.Equal(t, []string{"D0", relD1, relD2}, ids(len(deps), func(i int) string { return deps[i].Value.ID }))
	envs, err := ports.ListAll(ctx, s.Environments(), relSys2)
	require.NoError(t, err)
	require.Equal(t, []string{relE3}, ids(len(envs), func(i int) string { return envs[i].Value.ID }))

	// A deployment moved to another system lists there only.
	_, err = s.Deployments().Put(ctx, release.Deployment{ID: relD2, SystemID: relSys2, Name: "moved", Slug: "d2"}, 1)
	require.NoError(t, err)
	deps, err = ports.ListAll(ctx, s.Deployments(), relSys1)
	require.NoError(t, err)
	require.Equal(t, []string{"D0", relD1}, ids(len(deps), func(i int) string { return deps[i].Value.ID }))
	deps, err = ports.ListAll(ctx, s.Deployments(), relSys2)
	require.NoError(t, err)
	require.Equal(t, []string{relD2, relD3}, ids(len(deps), func(i int) string { return deps[i].Value.ID }))

	res, err := ports.ListAll(ctx, s.Resources(), relWS)
	require.NoError(t, err)
	require.Equal(t, []string{relR1, relR2, relR3}, ids(len(res), func(i int) string { return res[i].Value.ID }))

	_, err = s.JobAgents().Put(ctx, release.JobAgent{ID: "a0", Name: "A0", Type: "t"}, 0)
	require.NoError(t, err)
	agents, err := ports.ListAll(ctx, s.JobAgents(), "")
	require.NoError(t, err)
	require.Equal(t, []string{"a0", relAgent}, ids(len(agents), func(i int) string { return agents[i].Value.ID }))

	for _, p := range []policy.Policy{
		{ID: "p-b", Name: "b", Priority: 5, Enabled: true},
		{ID: "p-a", Name: "a", Priority: 5, Enabled: false},
		{ID: "p-c", Name: "c", Priority: 9, Enabled: true},
		{ID: "p-d", Name: "d", Priority: -1, Enabled: true},
	} {
		relPublishPolicy(t, ctx, s, p)
	}
	enabled := func() []string {
		pols, err := ports.EnabledPolicies(ctx, s)
		require.NoError(t, err)
		return ids(len(pols), func(i int) string { return pols[i].Value.ID })
	}
	require.Equal(t, []string{"p-c", "p-b", "p-d"}, enabled(), "enabled, by priority then id")

	// Drafts and proposals never count; a newer published revision does,
	// and proposing it for deletion falls back to the one before.
	relDraftPolicy(t, ctx, s, policy.Policy{ID: "p-a", Name: "a", Priority: 5, Enabled: true})
	relDraftPolicy(t, ctx, s, policy.Policy{ID: "p-e", Name: "e", Priority: 5, Enabled: true})
	require.Equal(t, []string{"p-c", "p-b", "p-d"}, enabled(), "a draft changes nothing")
	off := relPublishPolicy(t, ctx, s, policy.Policy{ID: "p-c", Name: "c", Priority: 9, Enabled: false})
	require.Equal(t, []string{"p-b", "p-d"}, enabled(), "the latest revision disables p-c")
	_, err = s.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: off.Ref(), ExpectedVersion: off.Version, Lifecycle: revision.DeletionProposed})
	require.NoError(t, err)
	require.Equal(t, []string{"p-c", "p-b", "p-d"}, enabled(), "back to revision 1")
}

// relCatalogListsByWorkspace: ListParams.Workspace keeps the objects of a
// workspace, directly (systems, resources) or through their system
// (deployments, environments, variable sets), in id order and page by
// page; with Parent both must hold; a kind outside any workspace refuses
// it naming the field.
func relCatalogListsByWorkspace(t *testing.T, e *relEnv) {
	relWorld(t, e)
	ctx, s := e.ctx, e.s
	const ws2, sysB = "ws2", "sys-b"
	_, err := s.Workspaces().Put(ctx, release.Workspace{ID: ws2, Name: "Other"}, 0)
	require.NoError(t, err)
	_, err = s.Systems().Put(ctx, release.System{ID: sysB, WorkspaceID: ws2, Name: "B"}, 0)
	require.NoError(t, err)
	for _, id := range []string{"a-other", "z-other"} {
		_, err = s.Deployments().Put(ctx, release.Deployment{ID: id, SystemID: sysB, Name: id, Slug: id}, 0)
		require.NoError(t, err)
	}
	_, err = s.Resources().Put(ctx, release.Resource{ID: "r-other", WorkspaceID: ws2, Kind: "Cluster", Identifier: "o", Name: "O"}, 0)
	require.NoError(t, err)
	_, err = s.VariableSets().Put(ctx, release.VariableSet{ID: "vs1", SystemID: relSys2, Name: "vs"}, 0)
	require.NoError(t, err)

	listIDs := func(list func(p ports.ListParams) ([]string, string, error), p ports.ListParams) []string {
		var out []string
		for {
			ids, next, err := list(p)
			require.NoError(t, err)
			out = append(out, ids...)
			if next == "" {
				return out
			}
			p.Continue = next
		}
	}
	deps := func(p ports.ListParams) ([]string, string, error) {
		pg, err := s.Deployments().List(ctx, p)
		ids := make([]string, len(pg.Items))
		for i := range pg.Items {
			ids[i] = pg.Items[i].Value.ID
		}
		return ids, pg.Continue, err
	}
	require.Equal(t, []string{relD1, relD2, relD3}, listIDs(deps, ports.ListParams{Workspace: relWS, Limit: 1}), "through their systems, a page at a time")
	require.Equal(t, []string{"a-other", "z-other"}, listIDs(deps, ports.ListParams{Workspace: ws2}))
	require.Equal(t, []string{relD3}, listIDs(deps, ports.ListParams{Workspace: relWS, Parent: relSys2}), "both filters hold")
	require.Empty(t, listIDs(deps, ports.ListParams{Workspace: ws2, Parent: relSys2}), "a system of another workspace")
	require.Empty(t, listIDs(deps, ports.ListParams{Workspace: "ws-none"}))

	envs, err := s.Environments().List(ctx, ports.ListParams{Workspace: ws2})
	require.NoError(t, err)
	require.Empty(t, envs.Items)
	sets, err := s.VariableSets().List(ctx, ports.ListParams{Workspace: relWS})
	require.NoError(t, err)
	require.Len(t, sets.Items, 1)
	systems, err := s.Systems().List(ctx, ports.ListParams{Workspace: ws2})
	require.NoError(t, err)
	require.Len(t, systems.Items, 1)
	require.Equal(t, sysB, systems.Items[0].Value.ID)
	res, err := s.Resources().List(ctx, ports.ListParams{Workspace: relWS})
	require.NoError(t, err)
	require.Len(t, res.Items, 3)
	res, err = s.Resources().List(ctx, ports.ListParams{Workspace: relWS, Parent: ws2})
	require.NoError(t, err)
	require.Empty(t, res.Items, "a resource's parent is its workspace: both must hold")

	_, err = s.JobAgents().List(ctx, ports.ListParams{Workspace: relWS})
	requireInvalid(t, err, "workspace")
	_, err = s.Workspaces().List(ctx, ports.ListParams{Workspace: relWS})
	requireInvalid(t, err, "workspace")
}

// relCatalogCopies: changing what a read returned changes nothing stored.
func relCatalogCopies(t *testing.T, e *relEnv) {
	relWorld(t, e)
	d := relFullDeployment()
	_, err := e.s.Deployments().Put(e.ctx, d, 0)
	require.NoError(t, err)
	first, err := e.s.Deployments().Get(e.ctx, d.ID)
	require.NoError(t, err)
	want, err := e.s.Deployments().Get(e.ctx, d.ID)
	require.NoError(t, err)
	first.Value.Metadata["team"] = "changed"
	first.Value.JobAgentConfig["inputs"].(map[string]any)["n"] = "changed"
	first.Value.Variables[0].Values[0].Value.Literal = "changed"
	first.Value.Variables[0].Values[1].Value.Reference.Path[0] = "changed"
	first.Value.Variables[0].Default.Sensitive.Ref = "changed"
	first.Value.WorkflowTemplate.Name = "changed"
	got, err := e.s.Deployments().Get(e.ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, want, got)

	// Nor does changing what a write was given.
	r := release.Resource{ID: "rc", WorkspaceID: relWS, Kind: "k", Identifier: "i", Name: "n", Config: map[string]any{"a": "b"}, Metadata: map[string]string{"m": "1"}}
	_, err = e.s.Resources().Put(e.ctx, r, 0)
	require.NoError(t, err)
	r.Config["a"], r.Metadata["m"] = "changed", "changed"
	gotR, err := e.s.Resources().Get(e.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"a": "b"}, gotR.Value.Config)
	require.Equal(t, map[string]string{"m": "1"}, gotR.Value.Metadata)
	gotR.Value.Config["a"] = "changed"
	again, err := e.s.Resources().Get(e.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"a": "b"}, again.Value.Config)
}

// relRefusesNUL: a NUL character anywhere (a name, a config key or value,
// a policy, a version, a job) is invalid input naming its field in every
// store (Postgres can keep none), and nothing is stored.
func relRefusesNUL(t *testing.T, e *relEnv) {
	f := relJobWorld(t, e)
	ctx, s := e.ctx, e.s
	_, err := s.Resources().Put(ctx, release.Resource{ID: "rn", WorkspaceID: relWS, Kind: "k", Identifier: "i", Name: "a\x00b"}, 0)
	requireInvalid(t, err, "name")
	_, err = s.Resources().Get(ctx, "rn")
	require.ErrorIs(t, err, ports.ErrNotFound)
	_, err = s.Resources().Put(ctx, release.Resource{ID: "r\x00n", WorkspaceID: relWS, Kind: "k", Identifier: "i", Name: "n"}, 0)
	requireInvalid(t, err, "id")
	_, err = s.JobAgents().Put(ctx, release.JobAgent{ID: "an", Name: "A", Type: "t", Config: map[string]any{"env": map[string]any{"K\x00": "v"}}}, 0)
	requireInvalid(t, err, `config.env."K\x00"`)
	err = s.VersionCreate(ctx, release.DeploymentVersion{ID: "vn", DeploymentID: relD1, Tag: "v", Status: release.VersionReady,
		CreatedAt: relAt(1), Config: map[string]any{"list": []any{"ok", "no\x00"}}})
	requireInvalid(t, err, "config.list[1]")
	_, err = s.VersionGet(ctx, "vn")
	require.ErrorIs(t, err, ports.ErrNotFound)
	r := f.release(tgt(relD1, relE1, relR1), "v1")
	row := relCreateJob(t, e, relJob("jn", r, release.JobPending, relAt(2)))
	next := row.Job
	next.Status, next.Message = release.JobFailure, "boom\x00"
	next.CompletedAt = relAt(3)
	_, err = s.JobUpdate(ctx, next, row.Version)
	requireInvalid(t, err, "message")
	require.Equal(t, row, relGetJob(t, e, "jn"), "the job is unchanged")
	_, err = s.ApprovalAdd(ctx, release.Approval{VersionID: "v1", EnvironmentID: relE1, User: "u\x00", ApprovedAt: relAt(4)})
	requireInvalid(t, err, "user")
}
