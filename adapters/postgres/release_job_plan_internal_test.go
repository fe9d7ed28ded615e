package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
)

// TestJobListPlans: over 20,000 jobs of 20 agents and 50 deployments, a
// JobList page reads the index of its filter (migration 0013) in order,
// without sorting the matching jobs: all jobs, one agent's, and the same
// below a cursor; one deployment's reads the deployment's jobs through the
// chain's per-target index and sorts them (no other index leads with the
// deployment: see migration 0013). (A status filter is applied along
// these; with a selective one the planner may rather sort the agent's
// matching jobs: no index has the status.)
func TestJobListPlans(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, _ := openSchemaDB(t)
	require.NoError(t, db.MigrateUp(ctx))
	_, err := db.idb(ctx).NewRaw(`INSERT INTO release_jobs (id, idempotency_key, release_id, target_key, deployment_id, environment_id,
		resource_id, version_id, job_agent_id, status, active, created_at, doc, version, updated_at)
	SELECT 'j' || i, 'k' || i, 'r' || i, 'd' || (i % 50) || ':e:r' || i, 'd' || (i % 50), 'e' || (i % 3), 'r' || i, 'v' || (i % 500),
		'a' || (i % 20), CASE WHEN i % 10 = 0 THEN 'pending' ELSE 'successful' END, i % 10 = 0,
		timestamptz '2026-01-01' + i * interval '1 second', '{}', 1, now()
	FROM generate_series(1, 20000) AS i`).Exec(ctx)
	require.NoError(t, err)
	_, err = db.idb(ctx).NewRaw(`ANALYZE release_jobs`).Exec(ctx)
	require.NoError(t, err)
	after := &ports.NewestKey{CreatedAt: time.Date(2026, 1, 1, 3, 0, 0, 0, time.UTC), ID: "j10800"}
	for _, c := range []struct {
		name  string
		p     ports.JobListParams
		index string
	}{
		{"all", ports.JobListParams{Limit: 101}, "release_jobs_created_idx"},
		{"all, below a cursor", ports.JobListParams{Limit: 101, After: after}, "release_jobs_created_idx"},
		{"job agent", ports.JobListParams{JobAgentID: "a7", Limit: 101}, "release_jobs_agent_created_idx"},
		{"deployment", ports.JobListParams{DeploymentID: "d7", Limit: 101}, "release_jobs_target_idx"},
		{"deployment, below a cursor", ports.JobListParams{DeploymentID: "d7", Limit: 101, After: after}, "release_jobs_target_idx"},
	} {
		q, args := jobListSQL(&c.p)
		var plan []string
		require.NoError(t, db.idb(ctx).NewRaw("EXPLAIN "+q, args...).Scan(ctx, &plan), c.name)
		text := strings.Join(plan, "\n")
		require.NotContains(t, text, "Seq Scan", "%s:\n%s", c.name, text)
		if c.p.DeploymentID != "" {
			require.Contains(t, text, "Index Scan on "+c.index, "%s:\n%s", c.name, text)
		} else {
			require.Contains(t, text, "Index Scan using "+c.index, "%s:\n%s", c.name, text)
			require.NotContains(t, text, "Sort", "%s: read in index order:\n%s", c.name, text)
		}
	}
}
