package chain_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver that truncates between cases
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/engine/gate"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/policy/plan"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// planWorld is one generated case: the harness and its transactor.
type planWorld struct {
	h  *harness
	tx ports.Transactor
}

// planChange is a generated configuration change: a write of objects.
type planChange struct {
	name  string
	write func(ctx context.Context, s ports.ReleaseStore) error
}

// put updates an object of objs by id with edit.
func put[T any](ctx context.Context, objs ports.Objects[T], id string, edit func(*T)) error {
	cur, err := objs.Get(ctx, id)
	if err != nil {
		return err
	}
	edit(&cur.Value)
	_, err = objs.Put(ctx, cur.Value, cur.Version)
	return err
}

// drawChange draws one change of the seeded workspace.
func drawChange(rt *rapid.T) planChange {
	changes := []planChange{
		{"add resource c3", func(ctx context.Context, s ports.ReleaseStore) error {
			_, err := s.Resources().Put(ctx, release.Resource{ID: "c3", WorkspaceID: "ws", Kind: "cluster", Identifier: "c3", Name: "c3"}, 0)
			return err
		}},
		{"c2 no longer a cluster", func(ctx context.Context, s ports.ReleaseStore) error {
			return put(ctx, s.Resources(), "c2", func(r *release.Resource) { r.Kind = "vm" })
		}},
		{"rename prod", func(ctx context.Context, s ports.ReleaseStore) error {
			return put(ctx, s.Environments(), "prod", func(e *release.Environment) { e.Name = "production" })
		}},
		{"rename staging", func(ctx context.Context, s ports.ReleaseStore) error {
			return put(ctx, s.Environments(), "staging", func(e *release.Environment) { e.Name = "stage" })
		}},
		{"deployment on c1 only", func(ctx context.Context, s ports.ReleaseStore) error {
			return put(ctx, s.Deployments(), "api", func(d *release.Deployment) { d.ResourceSelector = `resource.identifier == "c1"` })
		}},
		{"a variable the deployment reads", func(ctx context.Context, s ports.ReleaseStore) error {
			if err := put(ctx, s.Deployments(), "api", func(d *release.Deployment) {
				d.Variables = []release.DeploymentVariable{{Key: "region", Default: &release.Value{Literal: "eu"}}}
			}); err != nil {
				return err
			}
			_, err := s.VariableSets().Put(ctx, release.VariableSet{ID: "vs", SystemID: "sys", Name: "vs", Selector: `environment.name == "dev"`,
				Values: map[string]release.Value{"region": {Literal: "us"}}}, 0)
			return err
		}},
		{"a variable nobody reads", func(ctx context.Context, s ports.ReleaseStore) error {
			_, err := s.VariableSets().Put(ctx, release.VariableSet{ID: "vs", SystemID: "sys", Name: "vs", Values: map[string]release.Value{"x": {Literal: 1}}}, 0)
			return err
		}},
	}
	return rapid.SampledFrom(changes).Draw(rt, "change")
}

// checkPlanProperty seeds w with generated policies, versions and job
// outcomes, drains it, plans a generated change as a dry run, then applies
// it (recomputing and re-evaluating every target, as apply's effects and a
// resync do) and drains: every target the plan lists ends with the desired
// release it said (a removed one gone), starting from the one it said, and
// every other target keeps its own.
func checkPlanProperty(rt *rapid.T, w planWorld) {
	h := w.h
	if rapid.Bool().Draw(rt, "progression") {
		progressionPolicies(h, false)
	}
	if rapid.Bool().Draw(rt, "deny-bad") {
		h.policy(policy.Policy{ID: "no-bad", Rules: []policy.Rule{{ID: "no-bad", Spec: policy.VersionSelector{Selector: `!version.tag.startsWith("bad")`}}}})
	}
	h.drain()
	for i := range rapid.IntRange(1, 3).Draw(rt, "versions") {
		tag := fmt.Sprint("v", i)
		if rapid.Bool().Draw(rt, "bad") {
			tag = fmt.Sprint("bad", i)
		}
		h.version(tag)
		h.drain()
		for _, env := range []string{"dev", "staging"} {
			if rapid.Bool().Draw(rt, "finish-"+env) && len(h.jobs(env, "c1")) > 0 && len(h.jobs(env, "c2")) > 0 {
				h.finish(release.JobSuccessful, env)
				h.drain()
			}
		}
	}
	ctx, s := h.ctx, h.store
	all, err := s.TargetList(ctx, ports.TargetListParams{})
	require.NoError(rt, err)
	before := h.desiredReleases(all)

	change := drawChange(rt)
	write := func(ctx context.Context) error { return change.write(ctx, s) }
	d, err := gate.Check(ctx, gate.Params{Tx: w.tx, Store: s, MayLift: true, DryRun: true, Decide: h.chain.DecideMany}, write)
	require.NoError(rt, err, change.name)
	after, err := s.TargetList(ctx, ports.TargetListParams{})
	require.NoError(rt, err)
	require.Equal(rt, all, after, "a dry run changes no target")

	_, err = gate.Check(ctx, gate.Params{Tx: w.tx, Store: s, MayLift: true}, write)
	require.NoError(rt, err)
	_, err = h.chain.SyncTargets(ctx, "sys")
	require.NoError(rt, err)
	now, err := s.TargetList(ctx, ports.TargetListParams{})
	require.NoError(rt, err)
	require.NoError(rt, h.chain.EvaluateTargets(ctx, now...))
	h.drain()
	got := h.desiredReleases(now)

	planned := map[string]plan.Target{}
	for _, t := range d.Targets {
		planned[t.Key] = t
		require.NotNil(rt, t.Desired, "%s: %s has its desired release", change.name, t.Key)
		if t.Desired.Before != nil {
			require.Equal(rt, before[t.Key], t.Desired.Before.ReleaseID, "%s: %s before", change.name, t.Key)
		} else {
			require.True(rt, t.Created, "%s: %s had no decision before: created", change.name, t.Key)
		}
		if t.Desired.After == nil {
			require.True(rt, t.Removed, "%s: %s", change.name, t.Key)
			require.NotContains(rt, got, t.Key, "%s: %s is gone", change.name, t.Key)
			continue
		}
		require.Equal(rt, t.Desired.After.ReleaseID, got[t.Key], "%s: %s after the change and the drain", change.name, t.Key)
	}
	for _, t := range now {
		if _, ok := planned[t.Key()]; !ok {
			require.Equal(rt, before[t.Key()], got[t.Key()], "%s: %s, not in the plan, keeps its release", change.name, t.Key())
		}
	}
}

// TestPlanEqualsDrainedChain: on the memory adapters, for generated
// workspaces and changes, the dry run's plan is what the chain decides once
// the change is applied and the queue drained.
func TestPlanEqualsDrainedChain(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		clock := porttest.NewFakeClock(t0)
		store, q := memory.NewReleaseStore(clock), memory.NewQueue(clock)
		h := newHarnessOn(rt, context.Background(), clock, store, q)
		h.batched = rapid.Bool().Draw(rt, "batched")
		checkPlanProperty(rt, planWorld{h: h, tx: memory.NewTransactor(store, q)})
	})
}

// TestPlanEqualsDrainedChainPostgres is TestPlanEqualsDrainedChain on
// PostgreSQL: one schema, emptied between cases (scripts/with-postgres.sh
// go test ./engine/chain/ -run TestPlanEqualsDrainedChainPostgres).
func TestPlanEqualsDrainedChainPostgres(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, dsn, postgres.WithMaxConns(4))
	require.NoError(t, err)
	t.Cleanup(db.Close)
	require.NoError(t, db.MigrateUp(ctx))
	raw, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	var tables string
	require.NoError(t, raw.QueryRowContext(ctx, `SELECT string_agg(quote_ident(tablename), ', ') FROM pg_tables
		WHERE schemaname = $1 AND tablename NOT LIKE '%migrat%'`, schema).Scan(&tables))
	// Each case costs a round of statements: the first pgCases of rapid's
	// cases run (-rapid.checks above it changes nothing), so the test stays
	// at about 20 s on a shared machine.
	const pgCases = 25
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		if n++; n > pgCases {
			return
		}
		_, err := raw.ExecContext(ctx, "TRUNCATE "+tables+" CASCADE")
		require.NoError(rt, err)
		clock := porttest.NewFakeClock(t0)
		q := postgres.NewQueue(db, clock)
		defer q.Close()
		store := postgres.NewReleaseStore(db, clock)
		h := newHarnessOn(rt, ctx, clock, store, q)
		checkPlanProperty(rt, planWorld{h: h, tx: store})
	})
}
