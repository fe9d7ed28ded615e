// Package argoworkflows is the "argo-workflows" job agent: it submits a
// Workflow from a WorkflowTemplate through Argo Server's REST API (POST
// /api/v1/workflows/NS/submit), follows it (GET
// /api/v1/workflows/NS/NAME with fields= naming what it reads) and stops
// it on CancelJob while it runs (PUT .../NAME/stop, which runs its exit
// handlers).
//
// Idempotency: the Workflow's name is derived from the template and the
// job's correlation key, and it carries the key as the label
// reconciler.dev/job; a submit retried after a crash answers 409
// AlreadyExists and the agent follows the Workflow that exists.
//
// Credentials come only from the SecretResolver (tokenRef), per request.
//
// Invariants: Dispatch finds the run it already started by the job's
// correlation key before starting one; their followers hold a lease on each
// job (`--lock`, renewed every third of it), and a job whose lease ran out
// (its process died) is resumed by whichever `serve` claims it
// (`JobResumer`): followed by its recorded external id, never started again,
// or by the key when none was recorded (passes `porttest.JobAgent`'s resume
// cases: a new agent, one external run, one outcome); bad config or an
// unreadable credential ends the job `invalidJobAgent` naming the field;
// credentials only through `SecretResolver`, per request; reports only along
// `JobEdges`, one terminal
package argoworkflows

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/jobagent"
	"github.com/reconcilerhq/reconciler/internal/jobfollow"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Type is the release.JobAgent.Type this agent serves.
const Type = "argo-workflows"

// Label is the label carrying the job's correlation key.
const Label = "reconciler.dev/job"

// Options configures an Agent; zero fields take defaults.
type Options = jobagent.Options

// Agent is the argo-workflows job agent; goroutine-safe. Close it when
// done.
type Agent struct {
	*jobagent.Base[config]
}

var (
	_ ports.JobAgent    = (*Agent)(nil)
	_ ports.JobCanceler = (*Agent)(nil)
	_ ports.JobResumer  = (*Agent)(nil)
)

// New returns an agent reporting through reporter and reading tokens
// through secrets.
func New(reporter ports.JobReporter, secrets ports.SecretResolver, o Options) *Agent {
	return &Agent{jobagent.New[config](Type, reporter, secrets, o)}
}

type config struct {
	server, namespace, template, tokenRef string
	parameters                            map[string]string
}

var dnsName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// ValidateConfig checks an argo-workflows job_agent_config; a refusal is a
// *release.FieldError naming job_agent_config.<key>. Keys:
//
//	server            Argo Server's URL (required)
//	namespace         the namespace to run in (required)
//	workflowTemplate  the WorkflowTemplate's name (required)
//	parameters        workflow parameters, an object of scalars
//	tokenRef          secret reference of a bearer token (required)
func ValidateConfig(cfg map[string]any) error {
	_, err := parseConfig(cfg)
	return err
}

func parseConfig(cfg map[string]any) (config, error) {
	r := &configmap.Reader{Prefix: "job_agent_config", Map: cfg}
	c := config{server: r.URL("server", ""), namespace: r.Required("namespace"), template: r.Required("workflowTemplate"),
		parameters: r.Strings("parameters"), tokenRef: r.SecretRef("tokenRef", "")}
	for key, v := range map[string]string{"namespace": c.namespace, "workflowTemplate": c.template} {
		if v != "" && !dnsName.MatchString(v) {
			r.Fail(key, fmt.Sprintf("want a Kubernetes object name, got %q", v))
		}
	}
	return c, r.Err
}

// workflowName is the job's Workflow name: the template's (cut to fit)
// and 12 hex digits of the correlation key.
func workflowName(template, key string) string {
	suffix := key[len(key)-12:]
	if len(template) > 40 {
		template = strings.TrimRight(template[:40], "-.")
	}
	return template + "-" + suffix
}

// wf is the part of a Workflow the agent reads.
type wf struct {
	Metadata struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Status struct {
		Phase    string `json:"phase"`
		Message  string `json:"message"`
		Progress string `json:"progress"`
	} `json:"status"`
}

// header is the request header with the token.
func (a *Agent) header(ctx context.Context, cfg config) (http.Header, error) {
	return a.Bearer(ctx, "job_agent_config.tokenRef", cfg.tokenRef, cfg.server)
}

// Dispatch submits the job's Workflow once (see the package doc). A bad
// config or an unreadable token ends the job invalidJobAgent; a template
// the server does not have, too.
func (a *Agent) Dispatch(ctx context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	return a.Start(ctx, d, a.begin(d))
}

// ResumeJob follows the job's Workflow again (ports.JobResumer): by its
// external id (namespace/name), never submitting again (a Workflow that
// is gone is externalRunNotFound); without one, as Dispatch.
func (a *Agent) ResumeJob(ctx context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	key := jobfollow.CorrelationKey(d.Job.ID)
	return a.Resume(ctx, d, parseConfig, func(_ context.Context, cfg config) (jobfollow.Started, error) {
		name := workflowName(cfg.template, key)
		if d.Job.ExternalID != cfg.namespace+"/"+name {
			return jobfollow.Started{}, release.Invalid("job.external_id", "want "+cfg.namespace+"/"+name+", got "+d.Job.ExternalID)
		}
		link := a.link(cfg, name)
		return jobfollow.Started{Poll: func(ctx context.Context) (jobfollow.State, error) { return a.poll(ctx, cfg, name, key, link) }}, nil
	}, a.begin(d))
}

// link is the Argo UI's page of Workflow name.
func (a *Agent) link(cfg config, name string) string {
	return cfg.server + "/workflows/" + url.PathEscape(cfg.namespace) + "/" + url.PathEscape(name)
}

// begin is the start of d's Workflow: submitted once (see the package
// doc), or found by its name.
func (a *Agent) begin(d ports.JobDispatch) func(ctx context.Context) (jobfollow.Started, error) {
	return func(ctx context.Context) (jobfollow.Started, error) {
		cfg, err := parseConfig(d.Job.JobAgentConfig)
		var h http.Header
		if err == nil {
			h, err = a.header(ctx, cfg)
		}
		if err != nil {
			return a.Invalid(err)
		}
		key := jobfollow.CorrelationKey(d.Job.ID)
		name := workflowName(cfg.template, key)
		params := make([]string, 0, len(cfg.parameters))
		for k, v := range cfg.parameters {
			params = append(params, k+"="+v)
		}
		sort.Strings(params)
		body := map[string]any{"namespace": cfg.namespace, "resourceKind": "WorkflowTemplate", "resourceName": cfg.template,
			"submitOptions": map[string]any{"name": name, "parameters": params, "labels": Label + "=" + key}}
		resp, err := a.HTTP.Do(ctx, outbound.Request{Call: "submit workflow", Method: http.MethodPost, Header: h,
			URL: cfg.server + "/api/v1/workflows/" + url.PathEscape(cfg.namespace) + "/submit"}.JSON(body))
		if err != nil {
			return jobfollow.Started{}, err
		}
		switch {
		case resp.Status/100 == 2, resp.Status == http.StatusConflict: // submitted now, or by the attempt before a crash
		case resp.Status == http.StatusNotFound:
			return a.Invalid(release.Invalid("job_agent_config.workflowTemplate", "Argo has no WorkflowTemplate "+cfg.template+" in "+cfg.namespace))
		default:
			return jobfollow.Started{}, a.HTTP.Unexpected("submit workflow", resp)
		}
		a.Remember(d.Job.ID, cfg)
		link := a.link(cfg, name)
		return jobfollow.Started{
			Result: ports.JobDispatchResult{ExternalID: cfg.namespace + "/" + name, Status: release.JobInProgress, Message: "workflow " + name + " " + link},
			Poll:   func(ctx context.Context) (jobfollow.State, error) { return a.poll(ctx, cfg, name, key, link) },
		}, nil
	}
}

// wfFields are the fields of a Workflow the agent reads: Argo Server's
// fields parameter leaves out the rest (status.nodes can be megabytes).
const wfFields = "metadata.name,metadata.labels,status.phase,status.message,status.progress"

// get reads the fields wfFields names of Workflow ns/name.
func (a *Agent) get(ctx context.Context, cfg config, ns, name string) (wf, error) {
	h, err := a.header(ctx, cfg)
	if err != nil {
		return wf{}, err
	}
	var w wf
	_, err = a.HTTP.DoJSON(ctx, outbound.Request{Call: "get workflow", Method: http.MethodGet, Header: h, Idempotent: true,
		URL: cfg.server + "/api/v1/workflows/" + url.PathEscape(ns) + "/" + url.PathEscape(name) + "?fields=" + url.QueryEscape(wfFields)}, &w)
	return w, err
}

// ended reports whether a Workflow phase is final.
func ended(phase string) bool { return phase == "Succeeded" || phase == "Failed" || phase == "Error" }

// poll reads the Workflow and maps its phase.
func (a *Agent) poll(ctx context.Context, cfg config, name, key, link string) (jobfollow.State, error) {
	w, err := a.get(ctx, cfg, cfg.namespace, name)
	if outbound.StatusOf(err) == http.StatusNotFound {
		return jobfollow.State{Status: release.JobExternalRunNotFound, Message: "workflow " + name + " not found"}, nil
	}
	if err != nil {
		return jobfollow.State{}, err
	}
	if w.Metadata.Name != name {
		return jobfollow.State{}, a.HTTP.Errorf("get workflow", "%w: asked for %s, got %q", outbound.ErrMalformed, name, w.Metadata.Name)
	}
	if w.Metadata.Labels[Label] != key {
		return jobfollow.State{Status: release.JobExternalRunNotFound, Message: "workflow " + name + " belongs to another job"}, nil
	}
	st := jobfollow.State{Status: release.JobInProgress, Message: strings.TrimSpace("workflow " + name + " " + w.Status.Phase + " " + w.Status.Message),
		Outputs: map[string]any{"workflow": name, "phase": w.Status.Phase, "progress": w.Status.Progress, "url": link}}
	switch w.Status.Phase {
	case "Succeeded":
		st.Status = release.JobSuccessful
	case "Failed", "Error":
		st.Status = release.JobFailure
	}
	return st, nil
}

// CancelJob stops the job's Workflow; one that ended or is unknown is
// left as it is: its phase is read first, and a stop Argo Server refuses
// because the Workflow completed meanwhile (500 "cannot shutdown a
// completed workflow") is no error either.
func (a *Agent) CancelJob(ctx context.Context, c ports.JobCancel) error {
	ns, name, ok := strings.Cut(c.ExternalID, "/")
	if !ok || name == "" {
		return nil
	}
	cfg, ok := a.ConfigOf(c.JobID)
	if !ok {
		return nil // not dispatched by this process: its config is unknown here
	}
	w, err := a.get(ctx, cfg, ns, name)
	switch {
	case outbound.StatusOf(err) == http.StatusNotFound:
		return nil
	case err != nil:
		return err
	case ended(w.Status.Phase):
		return nil
	}
	h, err := a.header(ctx, cfg)
	if err != nil {
		return err
	}
	// Not idempotent for the client: a 500 is read here (it may say the
	// Workflow completed), not retried.
	resp, err := a.HTTP.Do(ctx, outbound.Request{Call: "stop workflow", Method: http.MethodPut, Header: h,
		URL: cfg.server + "/api/v1/workflows/" + url.PathEscape(ns) + "/" + url.PathEscape(name) + "/stop"}.JSON(
		map[string]any{"name": name, "namespace": ns, "message": "stopped by reconciler: " + c.Reason}))
	if err != nil {
		return err
	}
	if resp.Status/100 == 2 || resp.Status == http.StatusNotFound || resp.Status == http.StatusConflict ||
		(resp.Status == http.StatusInternalServerError && strings.Contains(string(resp.Body), "cannot shutdown a completed workflow")) {
		return nil
	}
	return a.HTTP.Unexpected("stop workflow", resp)
}
