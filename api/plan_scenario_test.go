package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestVersionPlanMatchesDispatch: with a gradual rollout in dev (three
// resources, ten minutes apart), and in prod an approval and a daily
// deployment window (09:00-10:00 UTC), the version plan's order and
// earliest times are the real dispatch order and times on the fake clock:
// each dev target's job is created at its planned earliest time; prod's
// plan says it waits for an approval (no earliest time) and its window
// verdict says when the window opens; no prod job comes before the
// approval, and once approved its job is created as the window opens.
func TestVersionPlanMatchesDispatch(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		ctx, s := f.ctx, f.st.releases
		for _, id := range []string{"r2", "r3"} {
			_, err := s.Resources().Put(ctx, release.Resource{ID: id, WorkspaceID: "ws", Kind: "cluster", Identifier: "k8s/" + id, Name: id}, 0)
			require.NoError(t, err)
		}
		_, err := f.chain.SyncTargets(ctx, "sys")
		require.NoError(t, err)
		// v0 everywhere first: a window does not hold a target's first
		// deployment.
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v0"}).status)
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions/web-v0/approvals", "approve", map[string]any{"environment_id": "prod"}).status)
		for _, env := range []string{"dev", "prod"} {
			for _, r := range []string{"r1", "r2", "r3"} {
				id := f.activeJob("web:" + env + ":" + r)
				res := f.do(http.MethodPost, "/api/v1/jobs/"+id+"/report", "agent", map[string]any{"status": "successful"})
				require.Equal(t, http.StatusNoContent, res.status, string(res.body))
			}
		}
		f.clock.Advance(time.Minute)
		pols := catalog.New(s, catalog.Config{}).Policies("fixture")
		_, err = pols.Put(ctx, policy.Policy{ID: "dev-rollout", WorkspaceID: "ws", Name: "dev rollout", Selector: `environment.name == "dev"`, Enabled: true,
			Rules: []policy.Rule{{ID: "rollout", Spec: policy.GradualRollout{RolloutType: policy.RolloutLinear, TimeScaleInterval: 600}}}}, 0)
		require.NoError(t, err)
		_, err = pols.Put(ctx, policy.Policy{ID: "prod-window", WorkspaceID: "ws", Name: "prod window", Selector: `environment.name == "prod"`, Enabled: true,
			Rules: []policy.Rule{{ID: "window", Spec: policy.DeploymentWindow{RRule: "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0", DurationMinutes: 60}}}}, 0)
		require.NoError(t, err)
		_, err = f.chain.SyncTargets(ctx, "sys")
		require.NoError(t, err)
		f.drain()

		body := map[string]any{"deployment_id": "web", "tag": "v1"}
		res := f.do(http.MethodPost, "/api/v1/versions?dry_run=true", "write", body)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		var dry struct {
			Plan []api.VersionPlanTarget `json:"plan"`
		}
		require.NoError(t, json.Unmarshal(res.body, &dry))
		require.Len(t, dry.Plan, 6, string(res.body))
		planned := map[string]time.Time{} // dev target → earliest
		var windowOpens time.Time
		for _, p := range dry.Plan {
			switch p.Target.EnvironmentID {
			case "dev":
				require.False(t, p.Earliest.IsZero(), "%s: a rollout position has a time", p.Target)
				planned[p.Target.Key()] = p.Earliest
			case "prod":
				require.False(t, p.Chosen)
				require.True(t, p.Earliest.IsZero(), "%s: only an approval brings it", p.Target)
				require.Contains(t, p.WaitsFor, "approval")
				i := slices.IndexFunc(p.Verdicts, func(v policy.RuleVerdict) bool { return v.RuleID == "window" })
				require.GreaterOrEqual(t, i, 0, "%s: the window's verdict", p.Target)
				windowOpens = p.Verdicts[i].Until
			}
		}
		require.Equal(t, time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), windowOpens.UTC())
		times := []time.Time{windowOpens}
		for _, at := range planned {
			times = append(times, at)
		}
		slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
		times = slices.CompactFunc(times, func(a, b time.Time) bool { return a.Equal(b) })
		require.Len(t, times, 4, "three rollout positions and the window: %v", times)

		// The version for real, at the same instant; then time passes from
		// one planned time to the next, and prod is approved before its
		// window opens.
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", body).status)
		created := map[string]time.Time{}
		var order []string
		observe := func() {
			t.Helper()
			f.drain()
			for _, env := range []string{"dev", "prod"} {
				for _, r := range []string{"r1", "r2", "r3"} {
					tg := release.ReleaseTarget{DeploymentID: "web", EnvironmentID: env, ResourceID: r}
					jobs, err := s.JobsByTarget(ctx, tg, 0)
					require.NoError(t, err)
					if _, seen := created[tg.Key()]; !seen && len(jobs) > 0 && jobs[0].VersionID == "web-v1" {
						created[tg.Key()] = jobs[0].CreatedAt
						order = append(order, tg.Key())
					}
				}
			}
		}
		observe()
		for _, at := range times {
			if at.After(f.clock.Now()) {
				if at.Equal(windowOpens) {
					f.clock.Set(at.Add(-time.Minute))
					observe()
					for k := range created {
						require.NotContains(t, k, ":prod:", "no prod job before its approval")
					}
					res := f.do(http.MethodPost, "/api/v1/versions/web-v1/approvals", "approve", map[string]any{"environment_id": "prod"})
					require.Equal(t, http.StatusCreated, res.status, string(res.body))
					observe()
					for k := range created {
						require.NotContains(t, k, ":prod:", "approved, prod still waits for its window")
					}
				}
				f.clock.Set(at)
			}
			observe()
		}
		for k, at := range planned {
			require.Contains(t, created, k)
			require.True(t, at.Equal(created[k]), "%s: planned %s, dispatched %s", k, at, created[k])
		}
		for _, r := range []string{"r1", "r2", "r3"} {
			k := "web:prod:" + r
			require.Contains(t, created, k)
			require.True(t, windowOpens.Equal(created[k]), "%s: dispatched %s as the window opens", k, created[k])
		}
		var plannedOrder []string
		for k := range planned {
			plannedOrder = append(plannedOrder, k)
		}
		slices.SortFunc(plannedOrder, func(a, b string) int { return planned[a].Compare(planned[b]) })
		require.Equal(t, plannedOrder, order[:3], "dev in the planned order")
	})
}
