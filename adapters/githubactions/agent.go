package githubactions

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/internal/jobagent"
	"github.com/reconcilerhq/reconciler/internal/jobfollow"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Type is the release.JobAgent.Type this agent serves.
const Type = "github-actions"

// Options configures an Agent; zero fields take defaults.
type Options struct {
	jobagent.Options
	// FindTimeout bounds the wait for a dispatched run to appear in the
	// run list when the dispatch response does not name it (default 30s).
	FindTimeout time.Duration
}

// Agent is the github-actions job agent. It is goroutine-safe; Close it
// when done.
type Agent struct {
	*jobagent.Base[config]
	find    time.Duration
	minPoll time.Duration
}

var (
	_ ports.JobAgent    = (*Agent)(nil)
	_ ports.JobCanceler = (*Agent)(nil)
	_ ports.JobResumer  = (*Agent)(nil)
)

// New returns an agent reporting through reporter and reading tokens
// through secrets.
func New(reporter ports.JobReporter, secrets ports.SecretResolver, o Options) *Agent {
	if o.FindTimeout <= 0 {
		o.FindTimeout = 30 * time.Second
	}
	minPoll := o.MinPoll
	if minPoll <= 0 {
		minPoll = 2 * time.Second
	}
	return &Agent{Base: jobagent.New[config](Type, reporter, secrets, o.Options), find: o.FindTimeout, minPoll: minPoll}
}

// run is the part of a workflow run the agent reads.
type run struct {
	ID           int64  `json:"id"`
	Name         string `json:"name"`
	DisplayTitle string `json:"display_title"`
	Status       string `json:"status"`
	Conclusion   string `json:"conclusion"`
	HTMLURL      string `json:"html_url"`
	Event        string `json:"event"`
}

// Dispatch starts the job's workflow run once: it follows a run already
// carrying the job's correlation key, or dispatches the workflow and
// finds the new run. A bad config or an unreadable token ends the job
// invalidJobAgent with the field in the message.
func (a *Agent) Dispatch(ctx context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	return a.Start(ctx, d, a.begin(d))
}

// ResumeJob follows the job's run again (ports.JobResumer): by its
// external id (the run id), never dispatching again (a run that is gone
// is externalRunNotFound); without one, as Dispatch.
func (a *Agent) ResumeJob(ctx context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	return a.Resume(ctx, d, parseConfig, func(_ context.Context, cfg config) (jobfollow.Started, error) {
		id, err := strconv.ParseInt(d.Job.ExternalID, 10, 64)
		if err != nil || id <= 0 {
			return jobfollow.Started{}, release.Invalid("job.external_id", "want a workflow run id, got "+strconv.Quote(d.Job.ExternalID))
		}
		return jobfollow.Started{Poll: func(ctx context.Context) (jobfollow.State, error) { return a.poll(ctx, cfg, id) }}, nil
	}, a.begin(d))
}

// begin is the start of d's run: it follows a run carrying the job's key,
// or dispatches the workflow and finds the new run.
func (a *Agent) begin(d ports.JobDispatch) func(ctx context.Context) (jobfollow.Started, error) {
	return func(ctx context.Context) (jobfollow.Started, error) {
		cfg, err := parseConfig(d.Job.JobAgentConfig)
		if err == nil {
			_, err = a.header(ctx, cfg)
		}
		if err != nil {
			return a.Invalid(err)
		}
		key := jobfollow.CorrelationKey(d.Job.ID)
		r, found, err := a.findRun(ctx, cfg, key, d.Job.CreatedAt)
		if err != nil {
			return jobfollow.Started{}, err
		}
		if !found {
			if r, err = a.dispatch(ctx, cfg, key, d.Job.CreatedAt); err != nil {
				return jobfollow.Started{}, err
			}
		}
		a.Remember(d.Job.ID, cfg)
		return a.started(cfg, r), nil
	}
}

// started is the dispatch result and follower of run r.
func (a *Agent) started(cfg config, r run) jobfollow.Started {
	id := strconv.FormatInt(r.ID, 10)
	st := stateOf(r)
	res := ports.JobDispatchResult{ExternalID: id, Status: release.JobInProgress, Message: "workflow run " + id + " " + r.HTMLURL}
	if st.Status.IsTerminal() || st.Status == release.JobActionRequired {
		res.Status, res.Message = st.Status, st.Message
	}
	return jobfollow.Started{Result: res, Poll: func(ctx context.Context) (jobfollow.State, error) {
		return a.poll(ctx, cfg, r.ID)
	}}
}

// header is the request header with the token.
func (a *Agent) header(ctx context.Context, cfg config) (http.Header, error) {
	h, err := a.Bearer(ctx, "job_agent_config.tokenRef", cfg.tokenRef, cfg.baseURL)
	if err != nil {
		return nil, err
	}
	h.Set("Accept", "application/vnd.github+json")
	h.Set("X-Github-Api-Version", "2022-11-28")
	return h, nil
}

// repoURL is the URL of a repository path.
func repoURL(cfg config, format string, args ...any) string {
	return cfg.baseURL + "/repos/" + url.PathEscape(cfg.owner) + "/" + url.PathEscape(cfg.repo) + fmt.Sprintf(format, args...)
}

// Bounds of the run lookup.
const (
	// runsPerPage is the page size of the run list (the API's maximum).
	runsPerPage = 100
	// maxRunPages bounds the pages read: with the created filter the API
	// answers at most 1,000 runs (10 pages of 100).
	maxRunPages = 10
	// createdSlack is how long before the job's creation the lookup
	// starts, for clock skew between reconciler and GitHub.
	createdSlack = 5 * time.Minute
)

// findRun looks for the workflow's workflow_dispatch run created since
// the job (less createdSlack; every run when since is zero) whose title or
// name carries key, newest first, page by page until a page is short. A
// lookup that reads maxRunPages full pages without finding the run is an
// error: it cannot tell whether the run exists, so nothing is dispatched.
func (a *Agent) findRun(ctx context.Context, cfg config, key string, since time.Time) (run, bool, error) {
	h, err := a.header(ctx, cfg)
	if err != nil {
		return run{}, false, err
	}
	q := url.Values{"event": {"workflow_dispatch"}, "per_page": {strconv.Itoa(runsPerPage)}}
	if !since.IsZero() {
		q.Set("created", ">="+since.Add(-createdSlack).UTC().Format(time.RFC3339))
	}
	for page := 1; page <= maxRunPages; page++ {
		q.Set("page", strconv.Itoa(page))
		var list struct {
			WorkflowRuns *[]run `json:"workflow_runs"`
		}
		_, err = a.HTTP.DoJSON(ctx, outbound.Request{Call: "list workflow runs", Method: http.MethodGet, Header: h, Idempotent: true,
			URL: repoURL(cfg, "/actions/workflows/%s/runs?%s", url.PathEscape(cfg.workflow), q.Encode())}, &list)
		if err != nil {
			return run{}, false, err
		}
		if list.WorkflowRuns == nil {
			return run{}, false, a.HTTP.Errorf("list workflow runs", "%w: no workflow_runs in the response", outbound.ErrMalformed)
		}
		for _, r := range *list.WorkflowRuns {
			if strings.Contains(r.DisplayTitle, key) || strings.Contains(r.Name, key) {
				return r, true, nil
			}
		}
		if len(*list.WorkflowRuns) < runsPerPage {
			return run{}, false, nil
		}
	}
	return run{}, false, a.HTTP.Errorf("list workflow runs", "more than %d runs of %s since %s and none titled with %s: cannot tell whether the job's run started",
		maxRunPages*runsPerPage, cfg.workflow, q.Get("created"), key)
}

// dispatch creates the workflow_dispatch event and returns the new run:
// named by the response (return_run_details) or found by key.
func (a *Agent) dispatch(ctx context.Context, cfg config, key string, since time.Time) (run, error) {
	h, err := a.header(ctx, cfg)
	if err != nil {
		return run{}, err
	}
	inputs := map[string]string{cfg.correlationInput: key}
	for k, v := range cfg.inputs {
		inputs[k] = v
	}
	body := map[string]any{"ref": cfg.ref, "inputs": inputs, "return_run_details": true}
	req := outbound.Request{Call: "dispatch workflow", Method: http.MethodPost, Header: h,
		URL: repoURL(cfg, "/actions/workflows/%s/dispatches", url.PathEscape(cfg.workflow))}.JSON(body)
	resp, err := a.HTTP.Do(ctx, req)
	if err != nil {
		return run{}, err
	}
	switch {
	case resp.Status == http.StatusOK:
		var details struct {
			WorkflowRunID int64  `json:"workflow_run_id"`
			HTMLURL       string `json:"html_url"`
		}
		if err := a.HTTP.Decode("dispatch workflow", resp, &details); err != nil {
			return run{}, err
		}
		if details.WorkflowRunID <= 0 {
			return run{}, a.HTTP.Errorf("dispatch workflow", "%w: no workflow_run_id in the response", outbound.ErrMalformed)
		}
		return run{ID: details.WorkflowRunID, HTMLURL: details.HTMLURL, Status: "queued"}, nil
	case resp.Status == http.StatusNoContent:
		return a.awaitRun(ctx, cfg, key, since)
	}
	return run{}, a.HTTP.Unexpected("dispatch workflow", resp)
}

// awaitRun waits for the dispatched run to appear in the run list. If it
// does not within the find timeout the error says so; the retried
// dispatch lists again first, so it dispatches nothing twice once the run
// shows.
func (a *Agent) awaitRun(ctx context.Context, cfg config, key string, since time.Time) (run, error) {
	ctx, cancel := context.WithTimeout(ctx, a.find)
	defer cancel()
	wait := min(a.minPoll, time.Second)
	for {
		r, found, err := a.findRun(ctx, cfg, key, since)
		if found {
			return r, nil
		}
		if err == nil {
			err = a.HTTP.Errorf("find dispatched run", "no run titled with %s yet (does the workflow's run-name use inputs.%s?)", key, cfg.correlationInput)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return run{}, err
		case <-t.C:
		}
		wait = min(wait*2, 5*time.Second)
	}
}

// poll reads the run's state.
func (a *Agent) poll(ctx context.Context, cfg config, id int64) (jobfollow.State, error) {
	h, err := a.header(ctx, cfg)
	if err != nil {
		return jobfollow.State{}, err
	}
	var r run
	_, err = a.HTTP.DoJSON(ctx, outbound.Request{Call: "get workflow run", Method: http.MethodGet, Header: h, Idempotent: true,
		URL: repoURL(cfg, "/actions/runs/%d", id)}, &r)
	if outbound.StatusOf(err) == http.StatusNotFound {
		return jobfollow.State{Status: release.JobExternalRunNotFound, Message: fmt.Sprintf("workflow run %d not found", id)}, nil
	}
	if err != nil {
		return jobfollow.State{}, err
	}
	if r.ID != id || r.Status == "" {
		return jobfollow.State{}, a.HTTP.Errorf("get workflow run", "%w: run %d answered with id %d, status %q", outbound.ErrMalformed, id, r.ID, r.Status)
	}
	return stateOf(r), nil
}

// stateOf maps a run's status and conclusion to a job status.
func stateOf(r run) jobfollow.State {
	st := jobfollow.State{Outputs: map[string]any{"run_id": strconv.FormatInt(r.ID, 10), "url": r.HTMLURL}}
	what := fmt.Sprintf("workflow run %d %s", r.ID, r.Status)
	switch r.Status {
	case "completed":
		what += " (" + r.Conclusion + ")"
		switch r.Conclusion {
		case "success", "neutral", "skipped":
			st.Status = release.JobSuccessful
		case "cancelled":
			st.Status = release.JobCancelled
		case "action_required":
			st.Status = release.JobActionRequired
		default: // failure, timed_out, startup_failure, stale
			st.Status = release.JobFailure
		}
	case "waiting", "action_required":
		st.Status = release.JobActionRequired
	default: // queued, requested, pending, in_progress
		st.Status = release.JobInProgress
	}
	st.Message = strings.TrimSpace(what + " " + r.HTMLURL)
	return st
}

// CancelJob cancels the job's run; a run that already ended or is
// unknown is left as it is.
func (a *Agent) CancelJob(ctx context.Context, c ports.JobCancel) error {
	id, err := strconv.ParseInt(c.ExternalID, 10, 64)
	if err != nil || id <= 0 {
		return nil // never started a run: nothing to cancel
	}
	cfg, ok := a.ConfigOf(c.JobID)
	if !ok { // dispatched by an earlier process: the agent's own config names the repository
		if cfg, err = parseConfig(c.Agent.Config); err != nil {
			return fmt.Errorf("%s: cancel run %d: %w", Type, id, err)
		}
	}
	h, err := a.header(ctx, cfg)
	if err != nil {
		return fmt.Errorf("%s: cancel run %d: %w", Type, id, err)
	}
	resp, err := a.HTTP.Do(ctx, outbound.Request{Call: "cancel workflow run", Method: http.MethodPost, Header: h, Idempotent: true,
		URL: repoURL(cfg, "/actions/runs/%d/cancel", id)})
	if err != nil {
		return err
	}
	switch resp.Status {
	case http.StatusAccepted, http.StatusNotFound, http.StatusConflict: // cancelling, gone, already ended
		return nil
	}
	return a.HTTP.Unexpected("cancel workflow run", resp)
}
