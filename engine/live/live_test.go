package live_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/engine/live"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

var t0 = time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)

// recorder is a queue that records the keys enqueued through it.
type recorder struct {
	ports.Queue
	mu   sync.Mutex
	keys []string
}

func (r *recorder) WorkEnqueue(ctx context.Context, items ...ports.EnqueueParams) error {
	if err := r.Queue.WorkEnqueue(ctx, items...); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, it := range items {
		r.keys = append(r.keys, it.Key.Kind+" "+it.Key.ScopeID)
	}
	return nil
}

// take returns the keys recorded since the last take, sorted.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.keys
	r.keys = nil
	slices.Sort(out)
	return out
}

// env is the live store over one adapter, with the chain stepped by
// engine.Drain and no resync: only what the writes enqueue runs.
type env struct {
	t     *testing.T
	ctx   context.Context
	clock *porttest.FakeClock
	raw   ports.ReleaseStore
	live  *live.Store
	rec   *recorder
	cat   *catalog.Service
	chain *chain.Chain
	eng   *engine.Engine
}

var backends = map[string]func(t *testing.T, clock ports.Clock) (ports.ReleaseStore, ports.Queue, ports.Transactor){
	"memory": func(_ *testing.T, clock ports.Clock) (ports.ReleaseStore, ports.Queue, ports.Transactor) {
		s, q := memory.NewReleaseStore(clock), memory.NewQueue(clock)
		return s, q, memory.NewTransactor(s, q)
	},
	"postgres": func(t *testing.T, clock ports.Clock) (ports.ReleaseStore, ports.Queue, ports.Transactor) {
		dsn, _ := pgtest.Schema(t)
		db, err := postgres.Open(context.Background(), dsn, postgres.WithMaxConns(4))
		require.NoError(t, err)
		t.Cleanup(db.Close)
		require.NoError(t, db.MigrateUp(context.Background()))
		q := postgres.NewQueue(db, clock)
		t.Cleanup(q.Close)
		s := postgres.NewReleaseStore(db, clock)
		t.Cleanup(s.Close)
		return s, q, db
	},
}

func each(t *testing.T, f func(t *testing.T, e *env)) {
	for name := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, setup(t, name))
		})
	}
}

// setup stores workspace ws, system sys with environments dev and prod,
// clusters c1 and c2 and deployment api (every cluster), version v1 on all
// four targets, and runs the chain until nothing is due.
func setup(t *testing.T, backend string) *env {
	t.Helper()
	clock := porttest.NewFakeClock(t0)
	raw, q, tx := backends[backend](t, clock)
	rec := &recorder{Queue: q}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := &env{t: t, ctx: t.Context(), clock: clock, raw: raw, rec: rec}
	e.live = live.New(raw, rec, tx)
	e.cat = catalog.New(raw, catalog.Config{PolicyChanged: e.live.PolicyChanged, Tx: tx})
	e.chain = &chain.Chain{Store: raw, Queue: q, Clock: clock, Logger: log}
	e.eng = engine.New(q, engine.Options{Clock: clock, Logger: log, Owner: "test"})
	e.chain.Register(e.eng, 1)

	s, r := e.live, require.New(t)
	_, err := s.Workspaces().Put(e.ctx, release.Workspace{ID: "ws", Name: "acme"}, 0)
	r.NoError(err)
	_, err = s.Systems().Put(e.ctx, release.System{ID: "sys", WorkspaceID: "ws", Name: "shop"}, 0)
	r.NoError(err)
	for _, name := range []string{"dev", "prod"} {
		_, err = s.Environments().Put(e.ctx, release.Environment{ID: name, SystemID: "sys", Name: name, ResourceSelector: "true"}, 0)
		r.NoError(err)
	}
	for _, id := range []string{"c1", "c2"} {
		_, err = s.Resources().Put(e.ctx, release.Resource{ID: id, WorkspaceID: "ws", Kind: "cluster", Identifier: id, Name: id}, 0)
		r.NoError(err)
	}
	_, err = s.Deployments().Put(e.ctx, release.Deployment{ID: "api", SystemID: "sys", Name: "api", Slug: "api", ResourceSelector: "true",
		Variables: []release.DeploymentVariable{{Key: "region"}}}, 0)
	r.NoError(err)
	r.Equal(desired("api:dev:c1", "api:dev:c2", "api:prod:c1", "api:prod:c2"), rec.take(), "each target once, as it appears")
	r.NoError(e.chain.CreateVersion(e.ctx, release.DeploymentVersion{ID: "v1", DeploymentID: "api", Tag: "v1"}))
	e.drain()
	e.requireDesired("v1", "api:dev:c1", "api:dev:c2", "api:prod:c1", "api:prod:c2")
	rec.take()
	return e
}

// desired renders the desired-release keys of targets.
func desired(targets ...string) []string {
	out := make([]string, len(targets))
	for i, t := range targets {
		out[i] = chain.KindDesiredRelease + " " + t
	}
	slices.Sort(out)
	return out
}

func (e *env) drain() {
	e.t.Helper()
	_, err := e.eng.Drain(e.ctx)
	require.NoError(e.t, err)
}

// requireDesired checks the version of each target's desired release
// ("" for no release).
func (e *env) requireDesired(version string, targets ...string) {
	e.t.Helper()
	for _, key := range targets {
		t, err := release.ParseTargetKey(key)
		require.NoError(e.t, err)
		d, err := e.raw.DesiredGet(e.ctx, t)
		require.NoError(e.t, err, key)
		got := ""
		if d.ReleaseID != "" {
			rel, err := e.raw.ReleaseGet(e.ctx, d.ReleaseID)
			require.NoError(e.t, err)
			got = rel.VersionID
		}
		require.Equal(e.t, version, got, key)
	}
}

var (
	dev  = []string{"api:dev:c1", "api:dev:c2"}
	prod = []string{"api:prod:c1", "api:prod:c2"}
)

// TestPolicyWritesEnqueueTheirTargets: a policy write enqueues
// desired-release for exactly the targets its old or new selector
// matches, in the write's transaction, and the chain reaches the new
// decision with no resync: publishing, changing the selector, disabling,
// a catalog approve; a draft changes nothing.
func TestPolicyWritesEnqueueTheirTargets(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, e *env) {
		pols := e.cat.Policies("alice")
		gate := policy.Policy{ID: "gate", WorkspaceID: "ws", Name: "gate", Selector: `environment.name == "prod"`, Enabled: true,
			Rules: []policy.Rule{{ID: "approval", Spec: policy.AnyApproval{MinApprovals: 1}}}}
		_, err := pols.Put(e.ctx, gate, 0)
		require.NoError(t, err)
		require.Equal(t, desired(prod...), e.rec.take(), "the targets the new policy applies to")
		e.drain()
		e.requireDesired("", prod...)
		e.requireDesired("v1", dev...)

		// A draft (even proposed) changes nothing.
		all := gate
		all.Selector = "true"
		content, err := json.Marshal(all)
		require.NoError(t, err)
		d, err := e.cat.Create(e.ctx, catalog.CreateParams{Kind: revision.KindPolicy, Name: "gate", Content: content})
		require.NoError(t, err)
		d, err = e.cat.Propose(e.ctx, catalog.Change{Ref: d.Ref(), Version: d.Version})
		require.NoError(t, err)
		require.Empty(t, e.rec.take())
		require.NoError(t, e.cat.Delete(e.ctx, catalog.Change{Ref: d.Ref(), Version: d.Version}))

		// Moving the selector to dev: old and new targets.
		gate.Selector = `environment.name == "dev"`
		_, err = pols.Put(e.ctx, gate, 1)
		require.NoError(t, err)
		require.Equal(t, desired(append(slices.Clone(dev), prod...)...), e.rec.take())
		e.drain()
		e.requireDesired("v1", prod...)
		e.requireDesired("", dev...)

		// Disabling: the targets it applied to.
		gate.Enabled = false
		_, err = pols.Put(e.ctx, gate, 2)
		require.NoError(t, err)
		require.Equal(t, desired(dev...), e.rec.take())
		e.drain()
		e.requireDesired("v1", dev...)

		// Writing what is published again publishes nothing new that matters.
		_, err = pols.Put(e.ctx, gate, 3)
		require.NoError(t, err)
		require.Empty(t, e.rec.take(), "a disabled policy stays disabled")

		// A catalog approve is a policy write too.
		gate.Enabled, gate.Selector = true, `environment.name == "prod"`
		content, err = json.Marshal(gate)
		require.NoError(t, err)
		d, err = e.cat.Create(e.ctx, catalog.CreateParams{Kind: revision.KindPolicy, Name: "gate", Content: content})
		require.NoError(t, err)
		d, err = e.cat.Propose(e.ctx, catalog.Change{Ref: d.Ref(), Version: d.Version})
		require.NoError(t, err)
		require.Empty(t, e.rec.take())
		_, err = e.cat.Approve(e.ctx, catalog.ApproveParams{Ref: d.Ref(), Version: d.Version, Approver: "bob"})
		require.NoError(t, err)
		require.Equal(t, desired(prod...), e.rec.take())
		e.drain()
		e.requireDesired("", prod...)

		// Deleting it: the targets it applied to.
		require.NoError(t, pols.Delete(e.ctx, "gate", 5))
		require.Equal(t, desired(prod...), e.rec.take())
		e.drain()
		e.requireDesired("v1", prod...)
	})
}

// TestObjectWritesEnqueueTheirTargets: a new matching resource gets its
// targets and their releases; a deployment, environment or resource write
// enqueues the targets of that object; a variable set write the targets
// whose resolved variables it changes; a version status change its
// deployment's targets.
func TestObjectWritesEnqueueTheirTargets(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, e *env) {
		s := e.live
		_, err := s.Resources().Put(e.ctx, release.Resource{ID: "c3", WorkspaceID: "ws", Kind: "cluster", Identifier: "c3", Name: "c3"}, 0)
		require.NoError(t, err)
		require.Equal(t, desired("api:dev:c3", "api:prod:c3"), e.rec.take(), "the new resource's targets")
		e.drain()
		e.requireDesired("v1", "api:dev:c3", "api:prod:c3")

		// The deployment stops selecting c3: its targets are recomputed,
		// the survivors enqueued (they read the deployment).
		d, err := s.Deployments().Get(e.ctx, "api")
		require.NoError(t, err)
		d.Value.ResourceSelector = `resource.name != "c3"`
		_, err = s.Deployments().Put(e.ctx, d.Value, d.Version)
		require.NoError(t, err)
		require.Equal(t, desired(append(slices.Clone(dev), prod...)...), e.rec.take())
		targets, err := e.raw.TargetList(e.ctx, ports.TargetListParams{Scope: ports.TargetScope{ResourceID: "c3"}})
		require.NoError(t, err)
		require.Empty(t, targets)

		// An environment: its own targets.
		en, err := s.Environments().Get(e.ctx, "dev")
		require.NoError(t, err)
		en.Value.Metadata = map[string]string{"tier": "low"}
		_, err = s.Environments().Put(e.ctx, en.Value, en.Version)
		require.NoError(t, err)
		require.Equal(t, desired(dev...), e.rec.take())

		// A variable set: the targets whose resolved value changes.
		vs := release.VariableSet{ID: "vs-prod", SystemID: "sys", Name: "prod", Selector: `environment.name == "prod"`,
			Values: map[string]release.Value{"region": {Literal: "eu"}}}
		_, err = s.VariableSets().Put(e.ctx, vs, 0)
		require.NoError(t, err)
		require.Equal(t, desired(prod...), e.rec.take())
		e.drain()
		e.requireDesired("v1", prod...)
		rel := e.desiredRelease("api:prod:c1")
		require.Equal(t, "eu", rel.Variables["region"].Literal)
		vs.Values = map[string]release.Value{"other": {Literal: 1}}
		cur, err := s.VariableSets().Get(e.ctx, "vs-prod")
		require.NoError(t, err)
		_, err = s.VariableSets().Put(e.ctx, vs, cur.Version)
		require.NoError(t, err)
		require.Equal(t, desired(prod...), e.rec.take(), "region no longer comes from the set")
		vs.Values["unused"] = release.Value{Literal: 2}
		_, err = s.VariableSets().Put(e.ctx, vs, cur.Version+1)
		require.NoError(t, err)
		require.Empty(t, e.rec.take(), "no deployment reads the changed value")

		// A version status change: the deployment's targets.
		require.NoError(t, s.SetVersionStatus(e.ctx, "v1", release.VersionRejected))
		require.Equal(t, desired(append(slices.Clone(dev), prod...)...), e.rec.take())
		e.drain()
		e.requireDesired("", append(slices.Clone(dev), prod...)...)
	})
}

func (e *env) desiredRelease(key string) release.Release {
	e.t.Helper()
	t, err := release.ParseTargetKey(key)
	require.NoError(e.t, err)
	d, err := e.raw.DesiredGet(e.ctx, t)
	require.NoError(e.t, err)
	rel, err := e.raw.ReleaseGet(e.ctx, d.ReleaseID)
	require.NoError(e.t, err)
	return rel
}

// TestFailedWriteEnqueuesNothing: when the work a policy write affects
// cannot be enqueued, the write is undone and nothing is enqueued (one
// transaction), on both stores.
func TestFailedWriteEnqueuesNothing(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, e *env) {
		boom := errors.New("boom")
		var tx ports.Transactor = e.live.Tx
		cat := catalog.New(e.raw, catalog.Config{Tx: tx, PolicyChanged: func(ctx context.Context, before, after *policy.Policy) error {
			require.NoError(t, e.live.PolicyChanged(ctx, before, after))
			return boom
		}})
		before := e.pending()
		_, err := cat.Policies("alice").Put(e.ctx, policy.Policy{ID: "gate", WorkspaceID: "ws", Name: "gate", Enabled: true}, 0)
		require.ErrorIs(t, err, boom)
		_, err = cat.Policies("alice").Get(e.ctx, "gate")
		require.ErrorIs(t, err, ports.ErrNotFound, "the publication is undone")
		revs, err := e.raw.CatalogList(e.ctx, ports.CatalogListParams{Kind: revision.KindPolicy})
		require.NoError(t, err)
		require.Empty(t, revs, "no draft left behind")
		require.Equal(t, before, e.pending(), "nothing enqueued")
	})
}

// pending counts the queue's pending items.
func (e *env) pending() int {
	e.t.Helper()
	st, err := e.rec.Queue.WorkKindStats(e.ctx)
	require.NoError(e.t, err)
	n := 0
	for _, s := range st {
		if s.State == ports.WorkPending {
			n += s.Count
		}
	}
	return n
}

// TestRelationshipWritesEnqueueTheWorkspace: a relationship rule's write
// enqueues every target of its workspace's resources, and so does then a
// resource's (what another resource's references resolve to may change);
// the targets' releases carry the related resource's field.
func TestRelationshipWritesEnqueueTheWorkspace(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, e *env) {
		s := e.live
		d, err := s.Deployments().Get(e.ctx, "api")
		require.NoError(t, err)
		d.Value.ResourceSelector = `resource.kind == "cluster"`
		d.Value.Variables = []release.DeploymentVariable{{Key: "region",
			Default: &release.Value{Reference: &release.Reference{Relation: "net", Path: []string{"metadata", "region"}}}}}
		_, err = s.Deployments().Put(e.ctx, d.Value, d.Version)
		require.NoError(t, err)
		_, err = s.Resources().Put(e.ctx, release.Resource{ID: "net-1", WorkspaceID: "ws", Kind: "network", Identifier: "net-1", Name: "net-1",
			Metadata: map[string]string{"region": "eu"}}, 0)
		require.NoError(t, err)
		e.drain()
		e.rec.take()
		require.NotContains(t, e.desiredRelease("api:dev:c1").Variables, "region", "no rule yet: unresolved")

		_, err = s.RelationshipRules().Put(e.ctx, release.RelationshipRule{ID: "net", WorkspaceID: "ws", Name: "net", Match: `to.kind == "network"`}, 0)
		require.NoError(t, err)
		all := append(slices.Clone(dev), prod...)
		require.Equal(t, desired(all...), e.rec.take(), "the rule: every target of the workspace")
		e.drain()
		require.Equal(t, release.Value{Literal: "eu"}, e.desiredRelease("api:prod:c2").Variables["region"])

		n, err := s.Resources().Get(e.ctx, "net-1")
		require.NoError(t, err)
		n.Value.Metadata["region"] = "us"
		_, err = s.Resources().Put(e.ctx, n.Value, n.Version)
		require.NoError(t, err)
		require.Equal(t, desired(all...), e.rec.take(), "a resource of a workspace with rules: every target of the workspace")
		e.drain()
		require.Equal(t, release.Value{Literal: "us"}, e.desiredRelease("api:dev:c1").Variables["region"])
	})
}
