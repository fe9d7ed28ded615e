package argocd

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/jobagent/jobagenttest"
	"github.com/reconcilerhq/reconciler/internal/jobfollow"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

func newAgent(t *testing.T, r ports.JobReporter, o Options) *Agent {
	a := New(r, testSecrets, o)
	t.Cleanup(a.Close)
	return a
}

// TestConformance gives every job of the suite its own Application (one
// sync at a time runs on an Application).
func TestConformance(t *testing.T) {
	var mu sync.Mutex
	fakes := map[*testing.T]*fakeArgoCD{}
	porttest.JobAgent(t, func(t *testing.T, r ports.JobReporter) ports.JobAgent {
		mu.Lock()
		if fakes[t] == nil { // a second agent of one subtest (a restart) sees the same Argo CD
			fakes[t] = newFakeArgoCD(t, "job-status", "job-twice", "job-race", "job-report", "job-a", "job-b", "job-cancelled", "job-crash",
				"job-resume", "job-resume-key")
		}
		mu.Unlock()
		return newAgent(t, r, jobagenttest.FastOptions())
	}, porttest.JobAgentOptions{Dispatch: func(t *testing.T, id string) ports.JobDispatch {
		mu.Lock()
		f := fakes[t]
		mu.Unlock()
		return porttest.JobAgentDispatch(Type, id, f.config(id))
	}, Durable: true, RunsOf: func(t *testing.T, id string) int {
		mu.Lock()
		f := fakes[t]
		mu.Unlock()
		return f.syncsOf(id)
	}})
}

func TestDispatchPatchesSyncsAndFollowsToHealthy(t *testing.T) {
	t.Parallel()
	f := newFakeArgoCD(t, "app-eu")
	rep := jobagenttest.NewReports()
	a := newAgent(t, rep, jobagenttest.FastOptions())
	res, err := a.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config("app-eu")))
	require.NoError(t, err)
	require.Equal(t, release.JobInProgress, res.Status)
	require.Equal(t, "app-eu/"+jobfollow.CorrelationKey("job-1"), res.ExternalID)
	f.Mu.Lock()
	require.Equal(t, []string{"GET /api/v1/applications/app-eu", "PATCH /api/v1/applications/app-eu", "POST /api/v1/applications/app-eu/sync"}, f.Requests)
	require.Equal(t, map[string]any{"spec": map[string]any{
		"source": map[string]any{"targetRevision": "v1.2.3", "helm": map[string]any{"parameters": []any{
			map[string]any{"name": "replicas", "value": "1"}, map[string]any{"name": "image.tag", "value": "v1.2.3"}}}},
		"destination": map[string]any{"namespace": "shop"}}}, f.patches[0])
	require.Equal(t, map[string]any{"name": "app-eu", "revision": "v1.2.3", "prune": false,
		"infos": []any{map[string]any{"name": InfoName, "value": jobfollow.CorrelationKey("job-1")}}}, f.syncs[0])
	f.Mu.Unlock()
	got := rep.Next(t)
	require.Equal(t, release.JobSuccessful, got.Status)
	require.Equal(t, "Healthy", got.Outputs["health"])
	require.Equal(t, "v1.2.3", got.Outputs["revision"])
}

func TestDegradedOrFailedSyncFailsTheJob(t *testing.T) {
	t.Parallel()
	for name, mutate := range map[string]func(*fakeArgoCD){
		"degraded": func(f *fakeArgoCD) { f.endHealth = "Degraded" },
		"failed":   func(f *fakeArgoCD) { f.failSync = true },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFakeArgoCD(t, "app")
			mutate(f)
			rep := jobagenttest.NewReports()
			a := newAgent(t, rep, jobagenttest.FastOptions())
			_, err := a.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config("app")))
			require.NoError(t, err)
			require.Equal(t, release.JobFailure, rep.Next(t).Status)
		})
	}
}

func TestDispatchRetriedAfterACrashFollowsTheSameSync(t *testing.T) {
	t.Parallel()
	f := newFakeArgoCD(t, "app")
	slow := jobagenttest.FastOptions()
	slow.MinPoll = time.Hour
	first := newAgent(t, jobagenttest.NewReports(), slow)
	r1, err := first.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config("app")))
	require.NoError(t, err)
	first.Close()
	second := newAgent(t, jobagenttest.NewReports(), slow)
	r2, err := second.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config("app")))
	require.NoError(t, err)
	require.Equal(t, r1, r2)
	require.Equal(t, 1, f.syncCount())
	// Once the sync runs (the operation moved to operationState) a third
	// process still finds it.
	_, err = second.get(t.Context(), mustConfig(t, f.config("app")))
	require.NoError(t, err)
	third := newAgent(t, jobagenttest.NewReports(), slow)
	_, err = third.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config("app")))
	require.NoError(t, err)
	require.Equal(t, 1, f.syncCount())
}

func mustConfig(t *testing.T, m map[string]any) config {
	c, err := parseConfig(m)
	require.NoError(t, err)
	return c
}

func TestRetriesAndMalformedResponses(t *testing.T) {
	t.Parallel()
	f := newFakeArgoCD(t, "app")
	f.Faults = []int{http.StatusTooManyRequests, http.StatusBadGateway}
	rep := jobagenttest.NewReports()
	a := newAgent(t, rep, jobagenttest.FastOptions())
	_, err := a.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config("app")))
	require.NoError(t, err)
	f.Mu.Lock()
	f.malformed = true
	f.Mu.Unlock()
	require.Equal(t, release.JobSuccessful, rep.Next(t).Status, "a malformed poll is polled again")

	g := newFakeArgoCD(t, "app")
	g.malformed = true
	_, err = newAgent(t, jobagenttest.NewReports(), jobagenttest.FastOptions()).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-2", g.config("app")))
	require.ErrorIs(t, err, outbound.ErrMalformed)
	require.ErrorContains(t, err, "argo-cd: get application")
}

func TestBadConfigOrUnknownApplicationEndsTheJobInvalidJobAgent(t *testing.T) {
	t.Parallel()
	f := newFakeArgoCD(t, "app")
	for field, mutate := range map[string]func(map[string]any){
		"job_agent_config.server":      func(c map[string]any) { delete(c, "server") },
		"job_agent_config.application": func(c map[string]any) { c["application"] = "Not_A_Name" },
		"job_agent_config.prune":       func(c map[string]any) { c["prune"] = "yes" },
		"job_agent_config.tokenRef":    func(c map[string]any) { c["tokenRef"] = "plaintext-token" },
	} {
		cfg := f.config("app")
		mutate(cfg)
		require.ErrorContains(t, ValidateConfig(cfg), field)
		res, err := newAgent(t, jobagenttest.NewReports(), jobagenttest.FastOptions()).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-bad", cfg))
		require.NoError(t, err)
		require.Equal(t, release.JobInvalidJobAgent, res.Status)
		require.Contains(t, res.Message, field)
	}
	res, err := newAgent(t, jobagenttest.NewReports(), jobagenttest.FastOptions()).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-bad", f.config("missing")))
	require.NoError(t, err)
	require.Equal(t, release.JobInvalidJobAgent, res.Status)
	require.Contains(t, res.Message, "job_agent_config.application")
	require.Zero(t, f.syncCount())
}

func TestCancelJobTerminatesTheOperation(t *testing.T) {
	t.Parallel()
	f := newFakeArgoCD(t, "app")
	o := jobagenttest.FastOptions()
	o.MinPoll = time.Hour
	a := newAgent(t, jobagenttest.NewReports(), o)
	d := porttest.JobAgentDispatch(Type, "job-1", f.config("app"))
	res, err := a.Dispatch(t.Context(), d)
	require.NoError(t, err)
	c := ports.JobCancel{JobID: "job-1", ExternalID: res.ExternalID, Agent: d.Agent}
	require.NoError(t, a.CancelJob(t.Context(), c))
	f.Mu.Lock()
	require.Contains(t, f.Requests, "DELETE /api/v1/applications/app/operation")
	require.True(t, f.apps["app"].terminated)
	f.Mu.Unlock()
	require.NoError(t, a.CancelJob(t.Context(), ports.JobCancel{JobID: "job-unknown", Agent: d.Agent}))
}

// Without a project, Argo CD answers 403 for an application it does not
// have (issue 31, defect 2): at dispatch the job ends invalid, and an
// application deleted while followed ends it too, not polled forever.
func TestApplicationAnsweredForbiddenIsMissing(t *testing.T) {
	t.Parallel()
	f := newFakeArgoCD(t, "app")
	res, err := newAgent(t, jobagenttest.NewReports(), jobagenttest.FastOptions()).Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config("missing")))
	require.NoError(t, err)
	require.Equal(t, release.JobInvalidJobAgent, res.Status)
	require.Contains(t, res.Message, "403")

	rep := jobagenttest.NewReports()
	o := jobagenttest.FastOptions()
	o.MinPoll = 100 * time.Millisecond
	a := newAgent(t, rep, o)
	res, err = a.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-2", f.config("app")))
	require.NoError(t, err)
	require.Equal(t, release.JobInProgress, res.Status)
	f.Mu.Lock()
	delete(f.apps, "app")
	f.Mu.Unlock()
	got := rep.Next(t)
	require.Equal(t, release.JobExternalRunNotFound, got.Status)
	require.Contains(t, got.Message, "is gone")
}

// A succeeded operation whose app status still shows the old revision is
// not yet a success (issue 31, defect 3; argocd app wait's check).
func TestSuccessWaitsForTheStatusOfTheSyncedRevision(t *testing.T) {
	t.Parallel()
	f := newFakeArgoCD(t, "app")
	f.statusLag = 3
	f.endHealth = "Healthy"
	rep := jobagenttest.NewReports()
	a := newAgent(t, rep, jobagenttest.FastOptions())
	_, err := a.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-1", f.config("app")))
	require.NoError(t, err)
	var got ports.JobReport
	for got = rep.Next(t); got.Status == release.JobInProgress; got = rep.Next(t) {
		require.NotContains(t, got.Message, "healthy at v0")
	}
	require.Equal(t, release.JobSuccessful, got.Status)
	require.Equal(t, "app synced and healthy at v1.2.3", got.Message)
}

// A multi-source application gets its non-ref sources' revision patched in
// the whole sources list, and the sync names revisions per source position
// (issue 31, defect 4); a Helm parameter keeps its forceString (defect 5).
func TestMultiSourceAndHelmParametersArePatchedWhole(t *testing.T) {
	t.Parallel()
	f := newFakeArgoCD(t, "multi", "single")
	f.apps["multi"].sources = []any{
		map[string]any{"repoURL": "https://charts.example", "chart": "shop", "targetRevision": "v0",
			"helm": map[string]any{"valueFiles": []any{"$values/shop.yaml"},
				"parameters": []any{map[string]any{"name": "image.tag", "value": "v0", "forceString": true}}}},
		map[string]any{"repoURL": "https://git.example/values.git", "targetRevision": "main", "ref": "values"},
	}
	f.apps["single"].params = []any{map[string]any{"name": "image.tag", "value": "v0", "forceString": true},
		map[string]any{"name": "replicas", "value": "1"}}
	rep := jobagenttest.NewReports()
	a := newAgent(t, rep, jobagenttest.FastOptions())
	_, err := a.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-m", f.config("multi")))
	require.NoError(t, err)
	_, err = a.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-s", f.config("single")))
	require.NoError(t, err)
	f.Mu.Lock()
	require.Equal(t, map[string]any{"spec": map[string]any{
		"sources": []any{
			map[string]any{"repoURL": "https://charts.example", "chart": "shop", "targetRevision": "v1.2.3",
				"helm": map[string]any{"valueFiles": []any{"$values/shop.yaml"},
					"parameters": []any{map[string]any{"name": "image.tag", "value": "v1.2.3", "forceString": true}}}},
			map[string]any{"repoURL": "https://git.example/values.git", "targetRevision": "main", "ref": "values"},
		},
		"destination": map[string]any{"namespace": "shop"}}}, f.patches[0])
	require.Equal(t, []any{"v1.2.3"}, f.syncs[0]["revisions"])
	require.Equal(t, []any{"1"}, f.syncs[0]["sourcePositions"])
	require.NotContains(t, f.syncs[0], "revision")
	require.Equal(t, []any{map[string]any{"name": "image.tag", "value": "v1.2.3", "forceString": true},
		map[string]any{"name": "replicas", "value": "1"}},
		f.patches[1]["spec"].(map[string]any)["source"].(map[string]any)["helm"].(map[string]any)["parameters"])
	f.Mu.Unlock()
	require.Equal(t, release.JobSuccessful, rep.Next(t).Status)
	require.Equal(t, release.JobSuccessful, rep.Next(t).Status)
}
