package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/apply"
	"github.com/reconcilerhq/reconciler/policy/plan"
)

// dryPlan posts documents as a dry run with scope and returns its plan by
// target key.
func dryPlan(t *testing.T, f *fixture, scope string, docs ...any) map[string]plan.Target {
	t.Helper()
	res := f.do(http.MethodPost, "/api/v1/apply", scope, map[string]any{"documents": docs, "dry_run": true})
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var resp apply.Response
	require.NoError(t, json.Unmarshal(res.body, &resp))
	require.NotNil(t, resp.Plan, string(res.body))
	out := map[string]plan.Target{}
	for _, t := range resp.Plan.Targets {
		out[t.Key] = t
	}
	return out
}

// TestApplyDryRunDesired: a dry run's plan gives each affected target's
// desired release before and after, decided by the chain over the change:
// renaming prod out of the prod gate's selector moves web:prod:r1 from no
// release (waiting for its approval) to v1; a new resource's targets are
// created with the release they will get; nothing is written.
func TestApplyDryRunDesired(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).status)
		f.drain()

		env := map[string]any{"apiVersion": apply.APIVersion, "kind": "Environment", "metadata": map[string]any{"name": "prod", "system": "sys"},
			"spec": map[string]any{"name": "prod ", "resource_selector": "true"}}
		got := dryPlan(t, f, "admin", env)
		prod := got["web:prod:r1"]
		require.NotNil(t, prod.Desired, "%+v", got)
		require.NotNil(t, prod.Desired.Before)
		require.Empty(t, prod.Desired.Before.ReleaseID, "prod waits for its approval")
		require.NotNil(t, prod.Desired.After)
		require.Equal(t, "web-v1", prod.Desired.After.VersionID, "without the gate, prod would get v1")
		require.Equal(t, "newest-allowed", prod.Desired.After.How)
		require.NotEmpty(t, prod.Stops, "beside the rule that stops applying")
		if dev, ok := got["web:dev:r1"]; ok {
			require.False(t, dev.Desired.Changed(), "dev keeps v1")
		}

		res := map[string]any{"apiVersion": apply.APIVersion, "kind": "Resource", "metadata": map[string]any{"name": "r9", "workspace": "ws"},
			"spec": map[string]any{"kind": "cluster", "identifier": "r9", "name": "r9"}}
		got = dryPlan(t, f, "write", res)
		created := got["web:dev:r9"]
		require.True(t, created.Created, "%+v", got)
		require.NotNil(t, created.Desired)
		require.Nil(t, created.Desired.Before)
		require.Equal(t, "web-v1", created.Desired.After.VersionID)
		require.Empty(t, got["web:prod:r9"].Desired.After.ReleaseID, "prod:r9 would wait for its approval")

		// Nothing was written.
		f.do(http.MethodGet, "/api/v1/targets/web:dev:r9", "read", nil).problem(t, http.StatusNotFound)
		r := f.do(http.MethodGet, "/api/v1/environments/prod", "read", nil)
		require.Equal(t, "prod", r.json(t)["name"])
	})
}

// TestApplyDryRunPages: a dry run's plan comes a page at a time in target
// key order with the summary of the whole plan; posting the same request
// with each page's cursor reads every target once and the last page has no
// cursor; a cursor the API did not return is a 400 naming query.cursor.
func TestApplyDryRunPages(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		var docs []any
		for _, r := range []string{"r7", "r8", "r9"} {
			docs = append(docs, map[string]any{"apiVersion": apply.APIVersion, "kind": "Resource", "metadata": map[string]any{"name": r, "workspace": "ws"},
				"spec": map[string]any{"kind": "cluster", "identifier": r, "name": r}})
		}
		req := map[string]any{"documents": docs, "dry_run": true}
		whole := dryPlan(t, f, "write", docs...)
		require.GreaterOrEqual(t, len(whole), 3, "%+v", whole)
		var keys []string
		cursor, digest := "", ""
		for pages := 0; ; pages++ {
			require.Less(t, pages, len(whole), "the pages end")
			path := "/api/v1/apply?limit=2"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			res := f.do(http.MethodPost, path, "write", req)
			require.Equal(t, http.StatusOK, res.status, string(res.body))
			var resp apply.Response
			require.NoError(t, json.Unmarshal(res.body, &resp))
			require.NotNil(t, resp.PlanSummary)
			require.Equal(t, len(whole), resp.PlanSummary.Targets, "the summary counts every page")
			if digest == "" {
				digest = resp.PlanSummary.Digest
			}
			require.Equal(t, digest, resp.PlanSummary.Digest, "every page is a page of one plan")
			require.LessOrEqual(t, len(resp.Plan.Targets), 2)
			for _, tg := range resp.Plan.Targets {
				keys = append(keys, tg.Key)
			}
			if resp.PlanNextCursor == "" {
				break
			}
			cursor = resp.PlanNextCursor
		}
		require.Len(t, keys, len(whole))
		require.IsIncreasing(t, keys, "key order, each target once")
		f.do(http.MethodPost, "/api/v1/apply?cursor=%25%25", "write", req).problem(t, http.StatusBadRequest)
	})
}
