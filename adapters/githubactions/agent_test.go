package githubactions

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
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

// fastOptions polls and retries in milliseconds.
func fastOptions() Options {
	return Options{Options: jobagenttest.FastOptions(), FindTimeout: 2 * time.Second}
}

func newAgent(t *testing.T, r ports.JobReporter, o Options) *Agent {
	a := New(r, testSecrets, o)
	t.Cleanup(a.Close)
	return a
}

func TestConformance(t *testing.T) {
	f := newFakeGitHub(t)
	porttest.JobAgent(t, func(t *testing.T, r ports.JobReporter) ports.JobAgent {
		return newAgent(t, r, fastOptions())
	}, porttest.JobAgentOptions{Config: f.config(), Durable: true, RunsOf: f.runsOf})
}

func TestConformanceWithoutRunDetails(t *testing.T) {
	f := newFakeGitHub(t)
	f.noDetails = true
	porttest.JobAgent(t, func(t *testing.T, r ports.JobReporter) ports.JobAgent {
		return newAgent(t, r, fastOptions())
	}, porttest.JobAgentOptions{Config: f.config(), Durable: true, RunsOf: f.runsOf})
}

func dispatchOf(id string, cfg map[string]any) ports.JobDispatch {
	return porttest.JobAgentDispatch(Type, id, cfg)
}

func TestDispatchSendsTheDocumentedRequestsAndReportsTheOutcome(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	rep := jobagenttest.NewReports()
	a := newAgent(t, rep, fastOptions())
	res, err := a.Dispatch(t.Context(), dispatchOf("job-1", f.config()))
	require.NoError(t, err)
	require.Equal(t, release.JobInProgress, res.Status)
	require.Equal(t, "1001", res.ExternalID)
	require.Contains(t, res.Message, "https://github.example/acme/app/actions/runs/1001")

	f.Mu.Lock()
	require.Equal(t, []string{"GET /repos/acme/app/actions/workflows/deploy.yml/runs", "POST /repos/acme/app/actions/workflows/deploy.yml/dispatches"}, f.Requests)
	require.Equal(t, []string{"created=%3E%3D2030-01-02T02%3A59%3A05Z&event=workflow_dispatch&page=1&per_page=100"}, f.lists)
	require.Equal(t, map[string]any{"ref": "main", "return_run_details": true, "inputs": map[string]any{
		"environment": "prod", "dry": "false", "reconciler_job": jobfollow.CorrelationKey("job-1")}}, f.dispatches[0])
	f.Mu.Unlock()

	got := rep.Next(t)
	require.Equal(t, release.JobSuccessful, got.Status)
	require.Equal(t, "job-1", got.JobID)
	require.Equal(t, "1001", got.ExternalID)
	require.Equal(t, map[string]any{"run_id": "1001", "url": "https://github.example/acme/app/actions/runs/1001"}, got.Outputs)
}

func TestConclusionsMapToJobStatuses(t *testing.T) {
	t.Parallel()
	for conclusion, want := range map[string]release.JobStatus{
		"success": release.JobSuccessful, "failure": release.JobFailure, "timed_out": release.JobFailure,
		"cancelled": release.JobCancelled, "skipped": release.JobSuccessful, "action_required": release.JobActionRequired,
	} {
		t.Run(conclusion, func(t *testing.T) {
			t.Parallel()
			f := newFakeGitHub(t)
			f.conclusion = conclusion
			rep := jobagenttest.NewReports()
			a := newAgent(t, rep, fastOptions())
			_, err := a.Dispatch(t.Context(), dispatchOf("job-1", f.config()))
			require.NoError(t, err)
			require.Equal(t, want, rep.Next(t).Status)
		})
	}
}

func TestDispatchRetriedAfterACrashFindsTheRun(t *testing.T) {
	t.Parallel()
	for _, noDetails := range []bool{false, true} {
		f := newFakeGitHub(t)
		f.noDetails = noDetails
		slow := fastOptions()
		slow.MinPoll = time.Hour // nobody polls: the run stays queued
		first := newAgent(t, jobagenttest.NewReports(), slow)
		res1, err := first.Dispatch(t.Context(), dispatchOf("job-crash", f.config()))
		require.NoError(t, err)
		first.Close() // the process died; a new one retries the work item
		second := newAgent(t, jobagenttest.NewReports(), slow)
		res2, err := second.Dispatch(t.Context(), dispatchOf("job-crash", f.config()))
		require.NoError(t, err)
		require.Equal(t, res1.ExternalID, res2.ExternalID)
		require.Equal(t, 1, f.dispatchCount(), "the retried dispatch started no second run")
	}
}

// TestRunLookupPagesThroughRunsSinceTheJob: a dispatch retried after a
// crash finds its run on the second page of the runs created since the
// job (less the slack), reading page after page with the created filter,
// and starts no second run.
func TestRunLookupPagesThroughRunsSinceTheJob(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.clock = epoch.Add(-createdSlack - time.Hour)
	f.Mu.Lock()
	for range 3 { // before the job: outside the created filter
		f.addRun("deploy older")
	}
	f.clock = epoch
	f.Mu.Unlock()
	slow := fastOptions()
	slow.MinPoll = time.Hour // nobody polls: the run stays queued
	first := newAgent(t, jobagenttest.NewReports(), slow)
	r1, err := first.Dispatch(t.Context(), dispatchOf("job-paged", f.config()))
	require.NoError(t, err)
	first.Close() // the process died
	f.Mu.Lock()
	for range runsPerPage { // newer runs push the job's to page 2
		f.addRun("deploy other")
	}
	f.lists = nil
	f.Mu.Unlock()

	second := newAgent(t, jobagenttest.NewReports(), slow)
	r2, err := second.Dispatch(t.Context(), dispatchOf("job-paged", f.config()))
	require.NoError(t, err)
	require.Equal(t, r1.ExternalID, r2.ExternalID)
	require.Equal(t, 1, f.dispatchCount(), "the retried dispatch started no second run")
	created := ">=" + epoch.Add(-createdSlack).UTC().Format(time.RFC3339)
	f.Mu.Lock()
	require.Equal(t, []string{
		url.Values{"event": {"workflow_dispatch"}, "per_page": {"100"}, "page": {"1"}, "created": {created}}.Encode(),
		url.Values{"event": {"workflow_dispatch"}, "per_page": {"100"}, "page": {"2"}, "created": {created}}.Encode(),
	}, f.lists)
	f.Mu.Unlock()
}

// TestRunLookupIsBounded: past maxRunPages full pages without the run the
// lookup fails the dispatch (it cannot tell whether the run started)
// instead of starting one.
func TestRunLookupIsBounded(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.Mu.Lock()
	for range maxRunPages * runsPerPage {
		f.addRun("deploy other")
	}
	f.Mu.Unlock()
	_, err := newAgent(t, jobagenttest.NewReports(), fastOptions()).Dispatch(t.Context(), dispatchOf("job-1", f.config()))
	require.ErrorContains(t, err, "github-actions: list workflow runs: more than 1000 runs of deploy.yml")
	require.Zero(t, f.dispatchCount())
	f.Mu.Lock()
	require.Len(t, f.lists, maxRunPages)
	f.Mu.Unlock()
}

func TestRetriesRateLimitsAndServerErrors(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.Faults = []int{http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable}
	rep := jobagenttest.NewReports()
	a := newAgent(t, rep, fastOptions())
	_, err := a.Dispatch(t.Context(), dispatchOf("job-1", f.config()))
	require.NoError(t, err)
	require.Equal(t, 1, f.dispatchCount())
	require.Equal(t, release.JobSuccessful, rep.Next(t).Status)
}

func TestServerErrorsExhaustedFailTheDispatchNamingTheCall(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.Faults = []int{500, 500, 500, 500}
	a := newAgent(t, jobagenttest.NewReports(), fastOptions())
	_, err := a.Dispatch(t.Context(), dispatchOf("job-1", f.config()))
	require.ErrorContains(t, err, "github-actions: list workflow runs: status 500")
	require.Zero(t, f.dispatchCount())
	// The work item's retry succeeds.
	_, err = a.Dispatch(t.Context(), dispatchOf("job-1", f.config()))
	require.NoError(t, err)
}

func TestMalformedRunIsPolledAgain(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.malformed = true
	rep := jobagenttest.NewReports()
	a := newAgent(t, rep, fastOptions())
	_, err := a.Dispatch(t.Context(), dispatchOf("job-1", f.config()))
	require.NoError(t, err)
	require.Equal(t, release.JobSuccessful, rep.Next(t).Status)
}

func TestMalformedRunListFailsTheDispatch(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"total_count": 1}`))
	}))
	defer srv.Close()
	cfg := newFakeGitHub(t).config()
	cfg["baseURL"] = srv.URL
	a := newAgent(t, jobagenttest.NewReports(), fastOptions())
	_, err := a.Dispatch(t.Context(), dispatchOf("job-1", cfg))
	require.ErrorIs(t, err, outbound.ErrMalformed)
}

func TestBadConfigEndsTheJobInvalidJobAgentNamingTheField(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	for field, mutate := range map[string]func(map[string]any){
		"job_agent_config.owner":        func(c map[string]any) { delete(c, "owner") },
		"job_agent_config.workflowFile": func(c map[string]any) { c["workflowFile"] = 7.0 },
		"job_agent_config.baseURL":      func(c map[string]any) { c["baseURL"] = "ftp://x" },
		"job_agent_config.tokenRef":     func(c map[string]any) { c["tokenRef"] = "env:RECONCILER_SECRET_MISSING" },
		"job_agent_config.inputs.x":     func(c map[string]any) { c["inputs"] = map[string]any{"x": []any{}} },
	} {
		cfg := f.config()
		mutate(cfg)
		if field != "job_agent_config.tokenRef" { // a reference is checked, not resolved, by ValidateConfig
			require.ErrorContains(t, ValidateConfig(cfg), field)
		}
		a := newAgent(t, jobagenttest.NewReports(), fastOptions())
		res, err := a.Dispatch(t.Context(), dispatchOf("job-bad", cfg))
		require.NoError(t, err)
		require.Equal(t, release.JobInvalidJobAgent, res.Status, field)
		require.Contains(t, res.Message, field)
		require.NotContains(t, res.Message, token)
	}
	require.Zero(t, f.dispatchCount())
	require.NoError(t, ValidateConfig(f.config()))
}

func TestCancelJobCancelsTheRun(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	rep := jobagenttest.NewReports()
	o := fastOptions()
	o.MinPoll = 200 * time.Millisecond
	a := newAgent(t, rep, o)
	d := dispatchOf("job-1", f.config())
	res, err := a.Dispatch(t.Context(), d)
	require.NoError(t, err)
	c := ports.JobCancel{JobID: "job-1", ExternalID: res.ExternalID, Agent: d.Agent, Reason: "workflow cancelled"}
	require.NoError(t, a.CancelJob(t.Context(), c))
	f.Mu.Lock()
	require.Equal(t, []int64{1001}, f.cancels)
	require.Contains(t, f.Requests, "POST /repos/acme/app/actions/runs/1001/cancel")
	f.Mu.Unlock()
	require.Equal(t, release.JobCancelled, rep.Next(t).Status)
	require.NoError(t, a.CancelJob(t.Context(), c), "cancelling an ended run is not an error")
	record := d.Agent
	record.Config = f.config() // a job of an earlier process: the agent record names the repository
	require.NoError(t, a.CancelJob(t.Context(), ports.JobCancel{JobID: "job-x", ExternalID: "99", Agent: record}), "unknown run")
	require.NoError(t, a.CancelJob(t.Context(), ports.JobCancel{JobID: "job-y", Agent: d.Agent}), "no run started")
}

func TestWebhookVerifiesTheSignatureAndReports(t *testing.T) {
	t.Parallel()
	rep := jobagenttest.NewReports()
	h := WebhookHandler{AgentID: "gha", SecretRef: "env:RECONCILER_SECRET_HOOK", Secrets: testSecrets, Reporter: rep}
	body := []byte(`{"action":"completed","workflow_run":{"id":42,"status":"completed","conclusion":"failure","html_url":"https://github.example/r/42"}}`)
	send := func(event, sig string, body []byte) int {
		req := httptest.NewRequest(http.MethodPost, "/hooks/github", bytes.NewReader(body))
		req.Header.Set("X-GitHub-Event", event)
		req.Header.Set("X-Hub-Signature-256", sig)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	require.Equal(t, http.StatusUnauthorized, send("workflow_run", Sign([]byte("wrong"), body), body))
	require.Equal(t, http.StatusUnauthorized, send("workflow_run", "", body))
	require.Equal(t, http.StatusUnauthorized, send("workflow_run", "sha256=zz", body))
	require.Equal(t, http.StatusNoContent, send("ping", Sign([]byte("hook-secret"), []byte(`{}`)), []byte(`{}`)))
	bad := []byte(`{"workflow_run":{}}`)
	require.Equal(t, http.StatusBadRequest, send("workflow_run", Sign([]byte("hook-secret"), bad), bad))
	require.Empty(t, rep.All())
	require.Equal(t, http.StatusAccepted, send("workflow_run", Sign([]byte("hook-secret"), body), body))
	got := rep.Next(t)
	require.Equal(t, ports.JobReport{AgentID: "gha", ExternalID: "42", Status: release.JobFailure,
		Message: "workflow run 42 completed (failure) https://github.example/r/42",
		Outputs: map[string]any{"run_id": "42", "url": "https://github.example/r/42"}}, got)

	req := httptest.NewRequest(http.MethodGet, "/hooks/github", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	require.Equal(t, http.StatusMethodNotAllowed, w.Code)
	big := bytes.Repeat([]byte("x"), MaxWebhookBody+1)
	require.Equal(t, http.StatusRequestEntityTooLarge, send("workflow_run", Sign([]byte("hook-secret"), big), big))
}

func TestVerifySignature(t *testing.T) {
	t.Parallel()
	// The example of GitHub's "Validating webhook deliveries" page.
	require.True(t, VerifySignature([]byte("It's a Secret to Everybody"), []byte("Hello, World!"),
		"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"))
	require.False(t, VerifySignature([]byte("It's a Secret to Everybody"), []byte("Hello, World?"),
		"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"))
	require.False(t, VerifySignature(nil, []byte("x"), Sign(nil, []byte("x"))), "an empty secret verifies nothing")
}

// GitHub's default content type is a form whose payload field holds the
// JSON, signed over the raw form body (issue 31, defect 1).
func TestWebhookTakesAFormDeliveryLikeAJSONOne(t *testing.T) {
	t.Parallel()
	rep := jobagenttest.NewReports()
	h := WebhookHandler{AgentID: "gha", SecretRef: "env:RECONCILER_SECRET_HOOK", Secrets: testSecrets, Reporter: rep}
	event := `{"action":"completed","workflow_run":{"id":42,"status":"completed","conclusion":"success","html_url":"https://github.example/r/42"}}`
	send := func(contentType string, body []byte, sig string) int {
		req := httptest.NewRequest(http.MethodPost, "/hooks/github", bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("X-GitHub-Event", "workflow_run")
		req.Header.Set("X-Hub-Signature-256", sig)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	form := []byte("payload=" + url.QueryEscape(event))
	secret := []byte("hook-secret")
	require.Equal(t, http.StatusUnauthorized, send("application/x-www-form-urlencoded", form, Sign(secret, []byte(event))),
		"the signature is over the raw form body, not the payload")
	require.Equal(t, http.StatusBadRequest, send("text/plain", []byte(event), Sign(secret, []byte(event))))
	require.Empty(t, rep.All())
	require.Equal(t, http.StatusAccepted, send("application/x-www-form-urlencoded", form, Sign(secret, form)))
	require.Equal(t, release.JobSuccessful, rep.Next(t).Status)
	require.Equal(t, http.StatusAccepted, send("application/json", []byte(event), Sign(secret, []byte(event))))
	require.Equal(t, release.JobSuccessful, rep.Next(t).Status)
}

// One classification of GitHub's answers (issue 31): a rate-limited 403
// backs off and is retried; a refusal that will not change (404, 422) ends
// the job invalid with GitHub's message instead of being retried every
// pass.
func TestRateLimitedIsRetriedAndRefusalEndsTheJob(t *testing.T) {
	t.Parallel()
	f := newFakeGitHub(t)
	f.Faults = []int{http.StatusForbidden} // with Retry-After: GitHub's secondary rate limit
	rep := jobagenttest.NewReports()
	a := newAgent(t, rep, fastOptions())
	_, err := a.Dispatch(t.Context(), dispatchOf("job-1", f.config()))
	require.NoError(t, err)
	require.Equal(t, release.JobSuccessful, rep.Next(t).Status)

	for _, status := range []int{http.StatusNotFound, http.StatusUnprocessableEntity} {
		f.Mu.Lock()
		f.Faults = []int{status}
		f.Mu.Unlock()
		id := "job-" + strconv.Itoa(status)
		res, err := a.Dispatch(t.Context(), dispatchOf(id, f.config()))
		require.NoError(t, err, status)
		require.Equal(t, release.JobInvalidJobAgent, res.Status, status)
		require.Contains(t, res.Message, strconv.Itoa(status)+" "+http.StatusText(status))
		require.Contains(t, res.Message, "try later", "the vendor's message")
	}
}

// TestDefaultGuardKeepsTheTokenOffLoopback: with serve's default outbound
// guard (no --outbound-allow), an agent whose baseURL a write token pointed
// at an address on the daemon's own machine sends nothing there: the
// listener never sees the token, and the job ends invalid saying which
// address was refused and which flag would allow it. (Issue 28, finding 1:
// a listener on 127.0.0.1 received Authorization: Bearer <the secret>.)
func TestDefaultGuardKeepsTheTokenOffLoopback(t *testing.T) {
	t.Parallel()
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	o := fastOptions()
	o.HTTP.Guard = nil // serve's default
	rep := jobagenttest.NewReports()
	a := newAgent(t, rep, o)
	cfg := map[string]any{"owner": "o", "repo": "r", "workflowFile": "deploy.yml", "tokenRef": "env:RECONCILER_SECRET_GH", "baseURL": srv.URL}
	res, err := a.Dispatch(t.Context(), porttest.JobAgentDispatch(Type, "job-canary", cfg))
	require.NoError(t, err, "the guard's refusal ends the job, it is not retried")
	require.Equal(t, release.JobInvalidJobAgent, res.Status)
	require.Contains(t, res.Message, "refused by the outbound guard")
	require.Contains(t, res.Message, "--outbound-allow")
	require.Zero(t, got.Load(), "the token never reached the listener")
}
