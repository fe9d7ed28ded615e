package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// statementRecorder keeps the statements run through a DB, with their
// arguments, so a test can explain each one.
type statementRecorder struct {
	mu   sync.Mutex
	on   bool
	seen []pgx.TraceQueryStartData
}

func (r *statementRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		r.seen = append(r.seen, d)
	}
	return ctx
}

func (*statementRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// record runs fn and returns the statements it ran.
func (r *statementRecorder) record(fn func()) []pgx.TraceQueryStartData {
	r.mu.Lock()
	r.on, r.seen = true, nil
	r.mu.Unlock()
	fn()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	return r.seen
}

// TestReadPlansAtScale: over 30,000 targets (10 deployments × 3
// environments × 1,000 resources), each with a job, analyzed, the reads of
// the console's deployments grid (a system's first page of targets, then
// each cell's job state and desired release), of a target page (the
// target, its job state, its deployment's targets) and of the API's target
// list (a page below a cursor) are planned on indexes: no statement they
// run reads release_targets or release_jobs with a sequential scan.
func TestReadPlansAtScale(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn, _ := pgtest.Schema(t)
	rec := &statementRecorder{}
	db, err := Open(ctx, dsn, WithTracer(rec))
	require.NoError(t, err)
	t.Cleanup(db.Close)
	require.NoError(t, db.MigrateUp(ctx))
	s := NewReleaseStore(db, ports.SystemClock)
	_, err = s.Workspaces().Put(ctx, release.Workspace{ID: "ws", Name: "ws"}, 0)
	require.NoError(t, err)
	_, err = s.Systems().Put(ctx, release.System{ID: "sys", WorkspaceID: "ws", Name: "sys"}, 0)
	require.NoError(t, err)
	for _, e := range []string{"dev", "staging", "prod"} {
		_, err = s.Environments().Put(ctx, release.Environment{ID: e, SystemID: "sys", Name: e, ResourceSelector: "true"}, 0)
		require.NoError(t, err)
	}
	_, err = s.JobAgents().Put(ctx, release.JobAgent{ID: "agent", Name: "agent", Type: "fake"}, 0)
	require.NoError(t, err)
	for d := range 10 {
		id := fmt.Sprintf("d%d", d)
		_, err = s.Deployments().Put(ctx, release.Deployment{ID: id, SystemID: "sys", Name: id, Slug: id, JobAgentID: "agent", ResourceSelector: "true"}, 0)
		require.NoError(t, err)
	}
	for _, q := range []string{
		`INSERT INTO release_resources (id, workspace_id, doc, version, updated_at)
		SELECT 'r' || i, 'ws', jsonb_build_object('id', 'r' || i, 'workspace_id', 'ws', 'kind', 'Node', 'identifier', 'r' || i, 'name', 'r' || i), 1, now()
		FROM generate_series(1, 1000) AS i`,
		`INSERT INTO release_targets (key, deployment_id, environment_id, resource_id, system_id, created_at)
		SELECT d.id || ':' || e.id || ':' || r.id, d.id, e.id, r.id, 'sys', now()
		FROM release_deployments d, release_environments e, release_resources r`,
		`INSERT INTO release_jobs (id, idempotency_key, release_id, target_key, deployment_id, environment_id, resource_id, version_id,
			job_agent_id, status, active, created_at, doc, version, updated_at)
		SELECT 'j' || t.key, 'k' || t.key, 'rel', t.key, t.deployment_id, t.environment_id, t.resource_id, 'v1', 'agent', 'successful', false,
			now(), '{}', 1, now()
		FROM release_targets t`,
		`ANALYZE`,
	} {
		_, err = db.idb(ctx).NewRaw(q).Exec(ctx)
		require.NoError(t, err)
	}
	target := release.ReleaseTarget{DeploymentID: "d3", EnvironmentID: "staging", ResourceID: "r500"}
	reads := map[string]func(){
		"deployments grid": func() {
			ts, err := s.TargetList(ctx, ports.TargetListParams{Scope: ports.TargetScope{SystemID: "sys"}, Limit: 1001})
			require.NoError(t, err)
			require.Len(t, ts, 1001)
			_, err = s.TargetJobState(ctx, ts[0])
			require.NoError(t, err)
			_, err = s.DesiredGet(ctx, ts[0])
			require.ErrorIs(t, err, ports.ErrNotFound)
		},
		"target page": func() {
			_, err := s.TargetGet(ctx, target)
			require.NoError(t, err)
			js, err := s.TargetJobState(ctx, target)
			require.NoError(t, err)
			require.NotNil(t, js.Successful)
			_, err = s.TargetList(ctx, ports.TargetListParams{Scope: ports.TargetScope{DeploymentID: "d3"}, Limit: 1000})
			require.NoError(t, err)
		},
		"API target list": func() {
			ts, err := s.TargetList(ctx, ports.TargetListParams{Scope: ports.TargetScope{DeploymentID: "d3"}, AfterKey: target.Key(), Limit: 101})
			require.NoError(t, err)
			require.Len(t, ts, 101)
			_, err = s.TargetList(ctx, ports.TargetListParams{AfterKey: target.Key(), Limit: 101})
			require.NoError(t, err)
		},
	}
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	for name, read := range reads {
		stmts := rec.record(read)
		require.NotEmpty(t, stmts, name)
		for _, st := range stmts {
			rows, err := conn.Query(ctx, "EXPLAIN "+st.SQL, st.Args...)
			require.NoError(t, err, "%s: %s", name, st.SQL)
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err, "%s: %s", name, st.SQL)
			plan := strings.Join(lines, "\n")
			for _, table := range []string{"release_targets", "release_jobs"} {
				require.NotContains(t, plan, "Seq Scan on "+table, "%s: %s\n%s", name, st.SQL, plan)
			}
		}
	}
}
