package terraformcloud

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/jobagent"
	"github.com/reconcilerhq/reconciler/internal/jobfollow"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Type is the release.JobAgent.Type and policy.Provider.Type served.
const Type = "terraform-cloud"

// mediaType is JSON:API's media type, which the API wants.
const mediaType = "application/vnd.api+json"

// Options configures an Agent; zero fields take defaults.
type Options = jobagent.Options

// Agent is the terraform-cloud job agent; goroutine-safe. Close it when
// done.
type Agent struct {
	*jobagent.Base[config]
	api *api
}

var (
	_ ports.JobAgent    = (*Agent)(nil)
	_ ports.JobCanceler = (*Agent)(nil)
	_ ports.JobResumer  = (*Agent)(nil)
)

// New returns an agent reporting through reporter and reading tokens
// through secrets.
func New(reporter ports.JobReporter, secrets ports.SecretResolver, o Options) *Agent {
	b := jobagent.New[config](Type, reporter, secrets, o)
	return &Agent{Base: b, api: &api{http: b.HTTP, secrets: secrets}}
}

// api is the part of the v2 API the agent and the verifier use.
type api struct {
	http    *outbound.Client
	secrets ports.SecretResolver
}

func newAPI(secrets ports.SecretResolver, o outbound.Options) *api {
	o.Adapter = Type
	return &api{http: outbound.New(o), secrets: secrets}
}

// runData is a run resource.
type runData struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	Attributes struct {
		Status     string `json:"status"`
		Message    string `json:"message"`
		HasChanges bool   `json:"has-changes"`
		Actions    struct {
			IsConfirmable bool `json:"is-confirmable"`
			IsCancelable  bool `json:"is-cancelable"`
			IsDiscardable bool `json:"is-discardable"`
		} `json:"actions"`
	} `json:"attributes"`
}

// header is the request header with the token ref names, resolved for
// requests to address.
func (p *api) header(ctx context.Context, field, ref, address string) (http.Header, error) {
	token, err := configmap.ResolveTo(ctx, p.secrets, field, ref, address)
	if err != nil {
		return nil, err
	}
	return http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {mediaType}, "Accept": {mediaType}}, nil
}

// getRun reads a run.
func (p *api) getRun(ctx context.Context, address string, h http.Header, id string) (runData, error) {
	var doc struct {
		Data *runData `json:"data"`
	}
	if _, err := p.http.DoJSON(ctx, outbound.Request{Call: "read run", Method: http.MethodGet, Header: h, Idempotent: true,
		URL: address + "/api/v2/runs/" + url.PathEscape(id)}, &doc); err != nil {
		return runData{}, err
	}
	if doc.Data == nil || doc.Data.ID != id || doc.Data.Attributes.Status == "" {
		return runData{}, p.http.Errorf("read run", "%w: no run %s with a status in the response", outbound.ErrMalformed, id)
	}
	return *doc.Data, nil
}

// Dispatch creates the job's run once: it follows a recent run of the
// workspace whose message carries the job's correlation key, or creates
// one. A bad config or an unreadable token ends the job invalidJobAgent.
func (a *Agent) Dispatch(ctx context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	return a.Start(ctx, d, a.begin(d))
}

// ResumeJob follows the job's run again (ports.JobResumer): by its
// external id (the run id), never creating one again (a run that is gone
// is externalRunNotFound); without one, as Dispatch.
func (a *Agent) ResumeJob(ctx context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	return a.Resume(ctx, d, parseConfig, func(_ context.Context, cfg config) (jobfollow.Started, error) {
		if !runID.MatchString(d.Job.ExternalID) {
			return jobfollow.Started{}, release.Invalid("job.external_id", "want a run id, got "+d.Job.ExternalID)
		}
		return jobfollow.Started{Poll: a.follow(cfg, d.Job.ExternalID)}, nil
	}, a.begin(d))
}

// follow polls run id.
func (a *Agent) follow(cfg config, id string) jobfollow.Poll {
	return func(ctx context.Context) (jobfollow.State, error) {
		h, err := a.api.header(ctx, "job_agent_config.tokenRef", cfg.tokenRef, cfg.address)
		if err != nil {
			return jobfollow.State{}, err
		}
		r, err := a.api.getRun(ctx, cfg.address, h, id)
		if outbound.StatusOf(err) == http.StatusNotFound {
			return jobfollow.State{Status: release.JobExternalRunNotFound, Message: "run " + id + " not found"}, nil
		}
		if err != nil {
			return jobfollow.State{}, err
		}
		return stateOf(cfg, r), nil
	}
}

// begin is the start of d's run: it follows a recent run carrying the
// job's key, or creates one.
func (a *Agent) begin(d ports.JobDispatch) func(ctx context.Context) (jobfollow.Started, error) {
	return func(ctx context.Context) (jobfollow.Started, error) {
		cfg, err := parseConfig(d.Job.JobAgentConfig)
		var h http.Header
		if err == nil {
			h, err = a.api.header(ctx, "job_agent_config.tokenRef", cfg.tokenRef, cfg.address)
		}
		if err != nil {
			return a.Invalid(err)
		}
		key := jobfollow.CorrelationKey(d.Job.ID)
		run, found, err := a.find(ctx, cfg, h, key)
		if err != nil {
			return jobfollow.Started{}, err
		}
		if !found {
			if run, err = a.create(ctx, cfg, h, key); err != nil {
				return jobfollow.Started{}, err
			}
		}
		a.Remember(d.Job.ID, cfg)
		st := stateOf(cfg, run)
		res := ports.JobDispatchResult{ExternalID: run.ID, Status: release.JobInProgress, Message: st.Message}
		if st.Status.IsTerminal() || st.Status == release.JobActionRequired {
			res.Status = st.Status
		}
		return jobfollow.Started{Result: res, Poll: a.follow(cfg, run.ID)}, nil
	}
}

// find looks for the workspace's run whose message carries key: HCP
// Terraform's search[basic] matches run messages, so the run is found
// however many runs came after it (the newest 50 alone could miss it, and
// a retry would start a second run).
func (a *Agent) find(ctx context.Context, cfg config, h http.Header, key string) (runData, bool, error) {
	var doc struct {
		Data *[]runData `json:"data"`
	}
	q := url.Values{"search[basic]": {key}, "page[size]": {"20"}}
	if _, err := a.api.http.DoJSON(ctx, outbound.Request{Call: "list runs", Method: http.MethodGet, Header: h, Idempotent: true,
		URL: cfg.address + "/api/v2/workspaces/" + url.PathEscape(cfg.workspaceID) + "/runs?" + q.Encode()}, &doc); err != nil {
		return runData{}, false, err
	}
	if doc.Data == nil {
		return runData{}, false, a.api.http.Errorf("list runs", "%w: no data in the response", outbound.ErrMalformed)
	}
	for _, r := range *doc.Data {
		if strings.Contains(r.Attributes.Message, key) {
			return r, true, nil
		}
	}
	return runData{}, false, nil
}

// create creates the run.
func (a *Agent) create(ctx context.Context, cfg config, h http.Header, key string) (runData, error) {
	attrs := map[string]any{"message": cfg.message + " [" + key + "]"}
	if len(cfg.variables) > 0 {
		attrs["variables"] = cfg.variables
	}
	if cfg.autoApply != nil {
		attrs["auto-apply"] = *cfg.autoApply
	}
	body := map[string]any{"data": map[string]any{"type": "runs", "attributes": attrs,
		"relationships": map[string]any{"workspace": map[string]any{"data": map[string]any{"type": "workspaces", "id": cfg.workspaceID}}}}}
	req := outbound.Request{Call: "create run", Method: http.MethodPost, Header: h, URL: cfg.address + "/api/v2/runs"}.JSON(body)
	req.Header.Set("Content-Type", mediaType)
	var doc struct {
		Data *runData `json:"data"`
	}
	if _, err := a.api.http.DoJSON(ctx, req, &doc); err != nil {
		return runData{}, err
	}
	if doc.Data == nil || !runID.MatchString(doc.Data.ID) {
		return runData{}, a.api.http.Errorf("create run", "%w: no run id in the response", outbound.ErrMalformed)
	}
	return *doc.Data, nil
}

// stateOf maps a run's status to the job's.
func stateOf(cfg config, r runData) jobfollow.State {
	st := jobfollow.State{Status: release.JobInProgress, Message: "run " + r.ID + " " + r.Attributes.Status,
		Outputs: map[string]any{"run_id": r.ID, "status": r.Attributes.Status, "has_changes": r.Attributes.HasChanges}}
	if cfg.organization != "" && cfg.workspaceName != "" {
		st.Outputs["url"] = cfg.address + "/app/" + url.PathEscape(cfg.organization) + "/workspaces/" + url.PathEscape(cfg.workspaceName) + "/runs/" + url.PathEscape(r.ID)
	}
	switch r.Attributes.Status {
	case "applied", "planned_and_finished", "planned_and_saved":
		st.Status = release.JobSuccessful
	case "errored", "policy_soft_failed":
		st.Status = release.JobFailure
	case "discarded", "canceled":
		st.Status = release.JobCancelled
	case "policy_override":
		st.Status, st.Message = release.JobActionRequired, st.Message+": a soft-mandatory policy failed and waits for an override or a discard"
	default:
		if strings.HasSuffix(r.Attributes.Status, "_awaiting_decision") {
			// A run task stage with a "mandatory" enforcement waits for a
			// person to override or cancel it.
			st.Status, st.Message = release.JobActionRequired, st.Message+": a run task waits for a decision (override or cancel the run)"
			break
		}
		if r.Attributes.Actions.IsConfirmable {
			st.Status, st.Message = release.JobActionRequired, st.Message+": waiting for confirmation"
		}
	}
	return st
}

// CancelJob discards a run waiting for confirmation and cancels one that
// is planning or applying; a run that ended, or a job this process did
// not dispatch, is left as it is.
func (a *Agent) CancelJob(ctx context.Context, c ports.JobCancel) error {
	cfg, ok := a.ConfigOf(c.JobID)
	if !ok || !runID.MatchString(c.ExternalID) {
		return nil
	}
	h, err := a.api.header(ctx, "job_agent_config.tokenRef", cfg.tokenRef, cfg.address)
	if err != nil {
		return err
	}
	r, err := a.api.getRun(ctx, cfg.address, h, c.ExternalID)
	if outbound.StatusOf(err) == http.StatusNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	action := ""
	switch {
	case r.Attributes.Actions.IsDiscardable:
		action = "discard"
	case r.Attributes.Actions.IsCancelable:
		action = "cancel"
	default:
		return nil
	}
	body := map[string]any{"comment": "cancelled by reconciler: " + c.Reason}
	resp, err := a.api.http.Do(ctx, outbound.Request{Call: action + " run", Method: http.MethodPost, Header: h, Idempotent: true,
		URL: cfg.address + "/api/v2/runs/" + url.PathEscape(r.ID) + "/actions/" + action}.JSON(body))
	if err != nil {
		return err
	}
	if resp.Status/100 == 2 || resp.Status == http.StatusConflict || resp.Status == http.StatusNotFound {
		return nil // done, or no longer possible: the run ended meanwhile
	}
	return a.HTTP.Unexpected(action+" run", resp)
}
