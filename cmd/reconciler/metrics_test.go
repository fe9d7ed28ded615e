package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// metricsDemo is a small release workspace for the metrics test: two
// clusters in one environment; "web" runs on the test runner, "worker"
// as the rollout workflow; every job is verified once by the scripted
// provider.
const metricsDemo = `
workspace: {id: demo, name: Demo}
systems:
  - {id: shop, workspace_id: demo, name: Shop}
environments:
  - {id: dev, system_id: shop, name: dev, resource_selector: 'resource.kind == "KubernetesCluster"'}
resources:
  - {id: eu-1, workspace_id: demo, kind: KubernetesCluster, identifier: k8s/eu-1, name: eu-1}
  - {id: us-1, workspace_id: demo, kind: KubernetesCluster, identifier: k8s/us-1, name: us-1}
job_agents:
  - {id: runner, name: Test runner, type: test-runner, config: {delay: 20ms}}
deployments:
  - {id: web, system_id: shop, name: Web, slug: web, job_agent_id: runner, resource_selector: 'resource.kind == "KubernetesCluster"'}
  - {id: worker, system_id: shop, name: Worker, slug: worker, resource_selector: 'resource.kind == "KubernetesCluster"', workflow_template: {name: rollout}}
workflow_templates: [rollout.yaml]
policies:
  - id: verify
    workspace_id: demo
    name: Verify
    selector: 'environment.name == "dev"'
    enabled: true
    rules:
      - id: health
        type: verification
        metrics:
          - {name: health, provider: {type: scripted, config: {results: [{ok: true}]}}, interval_seconds: 1, count: 1, success_condition: 'result.ok == true'}
versions:
  - {id: web-v1, deployment_id: web, tag: v1}
  - {id: worker-v1, deployment_id: worker, tag: v1, config: {image: "worker:1.0", pace: 20ms}}
`

// scrape reads serve's /metrics into its families by name.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(res.Body)
	require.NoError(t, err)
	return fams
}

// series returns the value of the series of fams[name] whose labels are
// exactly labels, and whether there is one.
func series(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		for _, l := range m.GetLabel() {
			if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// sumWhere adds the values of fams[name]'s series having label = value.
func sumWhere(fams map[string]*dto.MetricFamily, name, label, value string) float64 {
	total := 0.0
	for _, m := range fams[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// TestServeMetricsAfterWork runs serve on a small demo until every job has
// succeeded and been verified, then scrapes /metrics: decisions by kind
// and action, jobs by agent and status, measurements by provider and
// outcome and API requests by route pattern and status, with the values
// the stored jobs and the test's own requests imply.
func TestServeMetricsAfterWork(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "release.yaml"), []byte(metricsDemo), 0o600))
	rollout, err := os.ReadFile("../../testdata/demo/rollout.yaml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rollout.yaml"), rollout, 0o600))
	addr, _ := serveAddrs(t, nil, parseTextLine, "--listen", "127.0.0.1:0", "--insecure-no-auth", "--demo-dir", dir)
	base := "http://" + addr

	targets := []string{"web:dev:eu-1", "web:dev:us-1", "worker:dev:eu-1", "worker:dev:us-1"}
	jobsOf := func(target string) []ports.JobRow {
		res, err := http.Get(base + "/api/v1/jobs?target=" + target)
		require.NoError(t, err)
		defer res.Body.Close()
		var page api.Page[ports.JobRow]
		if res.StatusCode != http.StatusOK {
			return nil // the target is not there yet
		}
		require.NoError(t, json.NewDecoder(res.Body).Decode(&page))
		return page.Items
	}
	var jobs []ports.JobRow
	require.Eventually(t, func() bool {
		jobs = jobs[:0]
		for _, tg := range targets {
			rows := jobsOf(tg)
			if len(rows) == 0 || rows[0].Status != release.JobSuccessful || rows[0].Verification != release.VerificationPassed {
				return false
			}
			jobs = append(jobs, rows...)
		}
		return true
	}, 60*time.Second, 50*time.Millisecond, "every target's job succeeded and passed verification")

	// The test's own requests: three reads of a missing job (one route
	// pattern, whatever the id) and one path no operation serves.
	for _, id := range []string{"missing-1", "missing-2", "missing-3"} {
		code, _ := httpGet(t, base+"/api/v1/jobs/"+id)
		require.Equal(t, http.StatusNotFound, code)
	}
	code, _ := httpGet(t, base+"/api/v1/no-such-route")
	require.Equal(t, http.StatusNotFound, code)

	fams := scrape(t, base)
	byAgent := map[string][]ports.JobRow{}
	for _, j := range jobs {
		byAgent[j.JobAgentID] = append(byAgent[j.JobAgentID], j)
	}
	require.Len(t, byAgent, 2, "the test runner's jobs and the workflow agent's: %v", byAgent)
	for agent, rows := range byAgent {
		created, _ := series(fams, "reconciler_jobs_total", map[string]string{"agent": agent, "status": "pending"})
		require.Equal(t, float64(len(rows)), created, "jobs created by %s", agent)
		ok, _ := series(fams, "reconciler_jobs_total", map[string]string{"agent": agent, "status": "successful"})
		require.Equal(t, float64(len(rows)), ok, "jobs of %s that succeeded", agent)
	}
	v, _ := series(fams, "reconciler_verification_measurements_total", map[string]string{"provider": "scripted", "outcome": "passed"})
	require.Equal(t, float64(len(jobs)), v, "one passing measurement per job")

	for _, c := range []struct {
		kind, action string
		want         float64 // 0: at least one
	}{
		{"job-dispatch", "dispatched", float64(len(jobs))}, // each job handed over once
		{"workflow", "start-workflow", 2},                  // one workflow per worker target
		{"workflow", "create-task-run", 4},                 // deploy and smoke, twice
		{"workflow", "complete-workflow", 2},
		{"desired-release", "release", 0},
		{"job-verification-metric", "verification-passed", 0},
		{"repo", "", 0}, // the demo's run kinds: any action
	} {
		if c.action == "" {
			require.Positive(t, sumWhere(fams, "reconciler_decisions_total", "kind", c.kind), "decisions of %s", c.kind)
			continue
		}
		got, ok := series(fams, "reconciler_decisions_total", map[string]string{"kind": c.kind, "action": c.action})
		require.True(t, ok, "no decision %s/%s", c.kind, c.action)
		if c.want == 0 {
			require.Positive(t, got)
		} else {
			require.Equal(t, c.want, got, "decisions %s/%s", c.kind, c.action)
		}
	}

	got, _ := series(fams, "reconciler_api_requests_total", map[string]string{"route": "GET /api/v1/jobs/{id}", "status": "404"})
	require.Equal(t, 3.0, got, "three reads of missing jobs, counted on the route pattern")
	got, _ = series(fams, "reconciler_api_requests_total", map[string]string{"route": "unmatched", "status": "404"})
	require.Equal(t, 1.0, got)
	require.Positive(t, sumWhere(fams, "reconciler_api_requests_total", "route", "GET /api/v1/jobs"), "the test's polling")
	n, ok := series(fams, "reconciler_api_request_duration_seconds", map[string]string{"route": "GET /api/v1/jobs/{id}"})
	require.True(t, ok)
	require.Equal(t, 3.0, n)
	for _, m := range fams["reconciler_api_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			require.NotContains(t, l.GetValue(), "missing-", "a raw path became a label")
			require.False(t, strings.Contains(l.GetValue(), "no-such-route"), "a raw path became a label")
		}
	}
}
