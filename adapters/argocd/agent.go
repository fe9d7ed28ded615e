package argocd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"

	"github.com/reconcilerhq/reconciler/internal/jobagent"
	"github.com/reconcilerhq/reconciler/internal/jobfollow"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Type is the release.JobAgent.Type this agent serves.
const Type = "argo-cd"

// InfoName is the name of the sync operation's info item that carries
// the job's correlation key.
const InfoName = "reconciler-job"

// Options configures an Agent; zero fields take defaults.
type Options = jobagent.Options

// Agent is the argo-cd job agent. It is goroutine-safe; Close it when
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

// info is an operation's info item.
type info struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// operation is the part of an Application's operation the agent reads.
type operation struct {
	Info []info `json:"info"`
}

// application is the part of an Application the agent reads.
type application struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Source *struct {
			TargetRevision string `json:"targetRevision"`
			Helm           *struct {
				Parameters []helmParameter `json:"parameters"`
			} `json:"helm"`
		} `json:"source"`
		Destination struct {
			Namespace string `json:"namespace"`
		} `json:"destination"`
	} `json:"spec"`
	Operation *operation `json:"operation"`
	Status    struct {
		Sync struct {
			Status   string `json:"status"`
			Revision string `json:"revision"`
		} `json:"sync"`
		Health struct {
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"health"`
		OperationState *struct {
			Operation  operation `json:"operation"`
			Phase      string    `json:"phase"`
			Message    string    `json:"message"`
			StartedAt  string    `json:"startedAt"`
			SyncResult *struct {
				Revision string `json:"revision"`
			} `json:"syncResult"`
		} `json:"operationState"`
	} `json:"status"`
}

// helmParameter is one Helm parameter of an Application's source.
type helmParameter struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// hasKey reports whether op carries the correlation key.
func (op *operation) hasKey(key string) bool {
	if op == nil {
		return false
	}
	for _, i := range op.Info {
		if i.Name == InfoName && i.Value == key {
			return true
		}
	}
	return false
}

// Dispatch syncs the job's Application once: it follows an operation
// already carrying the job's correlation key, or updates the spec and
// starts the sync. A bad config, an unreadable token or an Application
// the server does not have end the job invalidJobAgent.
func (a *Agent) Dispatch(ctx context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	return a.Start(ctx, d, a.begin(d))
}

// ResumeJob follows the job's sync again (ports.JobResumer): by its
// external id, the sync is never started again (one another operation
// replaced is externalRunNotFound); without one, as Dispatch.
func (a *Agent) ResumeJob(ctx context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	key := jobfollow.CorrelationKey(d.Job.ID)
	return a.Resume(ctx, d, parseConfig, func(_ context.Context, cfg config) (jobfollow.Started, error) {
		return jobfollow.Started{Poll: func(ctx context.Context) (jobfollow.State, error) { return a.poll(ctx, cfg, key) }}, nil
	}, a.begin(d))
}

// begin is the start of d's sync: it follows an operation carrying the
// job's key, or patches the Application and syncs it.
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
		app, err := a.get(ctx, cfg)
		if outbound.StatusOf(err) == http.StatusNotFound {
			return a.Invalid(release.Invalid("job_agent_config.application", "Argo CD has no application "+quote(cfg.application)))
		}
		if err != nil {
			return jobfollow.Started{}, err
		}
		ours := app.Operation.hasKey(key) || (app.Status.OperationState != nil && app.Status.OperationState.Operation.hasKey(key))
		if !ours {
			if err := a.patch(ctx, cfg, &app); err != nil {
				return jobfollow.Started{}, err
			}
			if err := a.sync(ctx, cfg, key); err != nil {
				return jobfollow.Started{}, err
			}
		}
		a.Remember(d.Job.ID, cfg)
		ext := cfg.application + "/" + key
		return jobfollow.Started{
			Result: ports.JobDispatchResult{ExternalID: ext, Status: release.JobInProgress,
				Message: "argo cd syncing " + cfg.application + revisionNote(cfg.revision)},
			Poll: func(ctx context.Context) (jobfollow.State, error) { return a.poll(ctx, cfg, key) },
		}, nil
	}
}

func revisionNote(rev string) string {
	if rev == "" {
		return ""
	}
	return " to " + rev
}

// header is the request header with the token.
func (a *Agent) header(ctx context.Context, cfg config) (http.Header, error) {
	return a.Bearer(ctx, "job_agent_config.tokenRef", cfg.tokenRef)
}

// appURL is the URL of the Application (or a path below it), with its
// namespace and project as query parameters when set.
func appURL(cfg config, sub string) string {
	u := cfg.server + "/api/v1/applications/" + url.PathEscape(cfg.application) + sub
	q := url.Values{}
	if cfg.appNamespace != "" {
		q.Set("appNamespace", cfg.appNamespace)
	}
	if cfg.project != "" {
		q.Set("project", cfg.project)
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// get reads the Application.
func (a *Agent) get(ctx context.Context, cfg config) (application, error) {
	h, err := a.header(ctx, cfg)
	if err != nil {
		return application{}, err
	}
	var app application
	if _, err := a.HTTP.DoJSON(ctx, outbound.Request{Call: "get application", Method: http.MethodGet, URL: appURL(cfg, ""),
		Header: h, Idempotent: true}, &app); err != nil {
		return application{}, err
	}
	if app.Metadata.Name != cfg.application {
		return application{}, a.HTTP.Errorf("get application", "%w: asked for %q, got %q", outbound.ErrMalformed, cfg.application, app.Metadata.Name)
	}
	return app, nil
}

// patch sets the revision, parameters and namespace the config asks for
// where the Application differs, with one JSON merge patch.
func (a *Agent) patch(ctx context.Context, cfg config, app *application) error {
	source := map[string]any{}
	spec := map[string]any{}
	if cfg.revision != "" && (app.Spec.Source == nil || app.Spec.Source.TargetRevision != cfg.revision) {
		source["targetRevision"] = cfg.revision
	}
	if len(cfg.parameters) > 0 {
		have := map[string]string{}
		var params []helmParameter
		if app.Spec.Source != nil && app.Spec.Source.Helm != nil {
			for _, p := range app.Spec.Source.Helm.Parameters {
				have[p.Name] = p.Value
				if _, set := cfg.parameters[p.Name]; !set {
					params = append(params, p) // kept: a merge patch replaces the whole list
				}
			}
		}
		changed := false
		names := make([]string, 0, len(cfg.parameters))
		for n := range cfg.parameters {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if v, ok := have[n]; !ok || v != cfg.parameters[n] {
				changed = true
			}
			params = append(params, helmParameter{Name: n, Value: cfg.parameters[n]})
		}
		if changed {
			source["helm"] = map[string]any{"parameters": params}
		}
	}
	if len(source) > 0 {
		spec["source"] = source
	}
	if cfg.namespace != "" && app.Spec.Destination.Namespace != cfg.namespace {
		spec["destination"] = map[string]any{"namespace": cfg.namespace}
	}
	if len(spec) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return fmt.Errorf("%s: encode patch: %w", Type, err)
	}
	h, err := a.header(ctx, cfg)
	if err != nil {
		return err
	}
	body := map[string]any{"name": cfg.application, "patch": string(patch), "patchType": "merge"}
	if cfg.appNamespace != "" {
		body["appNamespace"] = cfg.appNamespace
	}
	if cfg.project != "" {
		body["project"] = cfg.project
	}
	_, err = a.HTTP.DoJSON(ctx, outbound.Request{Call: "patch application", Method: http.MethodPatch,
		URL: cfg.server + "/api/v1/applications/" + url.PathEscape(cfg.application), Header: h, Idempotent: true}.JSON(body), nil)
	return err
}

// sync starts the sync operation carrying key.
func (a *Agent) sync(ctx context.Context, cfg config, key string) error {
	h, err := a.header(ctx, cfg)
	if err != nil {
		return err
	}
	body := map[string]any{"name": cfg.application, "prune": cfg.prune, "infos": []info{{Name: InfoName, Value: key}}}
	if cfg.revision != "" {
		body["revision"] = cfg.revision
	}
	if cfg.appNamespace != "" {
		body["appNamespace"] = cfg.appNamespace
	}
	if cfg.project != "" {
		body["project"] = cfg.project
	}
	_, err = a.HTTP.DoJSON(ctx, outbound.Request{Call: "sync application", Method: http.MethodPost,
		URL: cfg.server + "/api/v1/applications/" + url.PathEscape(cfg.application) + "/sync", Header: h}.JSON(body), nil)
	return err
}

// poll reads the Application and judges the job's sync.
func (a *Agent) poll(ctx context.Context, cfg config, key string) (jobfollow.State, error) {
	app, err := a.get(ctx, cfg)
	if outbound.StatusOf(err) == http.StatusNotFound {
		return jobfollow.State{Status: release.JobExternalRunNotFound, Message: "application " + cfg.application + " is gone"}, nil
	}
	if err != nil {
		return jobfollow.State{}, err
	}
	return judge(&app, cfg.application, key), nil
}

// judge maps the Application's operation, sync and health to the job's
// status.
func judge(app *application, name, key string) jobfollow.State {
	out := map[string]any{"application": name, "sync": app.Status.Sync.Status, "health": app.Status.Health.Status,
		"revision": app.Status.Sync.Revision}
	op := app.Status.OperationState
	switch {
	case app.Operation.hasKey(key):
		return jobfollow.State{Status: release.JobInProgress, Message: "sync of " + name + " requested", Outputs: out}
	case op == nil || !op.Operation.hasKey(key):
		if app.Operation != nil {
			return jobfollow.State{Status: release.JobInProgress, Message: "another operation runs on " + name, Outputs: out}
		}
		return jobfollow.State{Status: release.JobExternalRunNotFound, Message: "the sync of " + name + " was replaced by another operation", Outputs: out}
	}
	out["phase"] = op.Phase
	switch op.Phase {
	case "Failed", "Error":
		return jobfollow.State{Status: release.JobFailure, Message: "sync of " + name + " " + op.Phase + ": " + op.Message, Outputs: out}
	case "Succeeded":
	default: // Running, Terminating
		return jobfollow.State{Status: release.JobInProgress, Message: "sync of " + name + " " + op.Phase, Outputs: out}
	}
	health := app.Status.Health.Status
	switch {
	case health == "Degraded":
		return jobfollow.State{Status: release.JobFailure, Message: name + " is Degraded after the sync: " + app.Status.Health.Message, Outputs: out}
	case health == "Healthy" && app.Status.Sync.Status == "Synced":
		return jobfollow.State{Status: release.JobSuccessful, Message: name + " synced and healthy at " + app.Status.Sync.Revision, Outputs: out}
	}
	return jobfollow.State{Status: release.JobInProgress, Message: name + " synced, " + health, Outputs: out}
}

// CancelJob terminates the Application's running operation when it is the
// job's; an operation that ended, another's, or an unknown job is left as
// it is.
func (a *Agent) CancelJob(ctx context.Context, c ports.JobCancel) error {
	key := jobfollow.CorrelationKey(c.JobID)
	cfg, ok := a.ConfigOf(c.JobID)
	if !ok {
		return nil // dispatched by no process of ours that we know: the chain's timeout covers it
	}
	app, err := a.get(ctx, cfg)
	if outbound.StatusOf(err) == http.StatusNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	running := app.Operation.hasKey(key) || (app.Status.OperationState != nil && app.Status.OperationState.Operation.hasKey(key) &&
		app.Status.OperationState.Phase == "Running")
	if !running {
		return nil
	}
	h, err := a.header(ctx, cfg)
	if err != nil {
		return err
	}
	resp, err := a.HTTP.Do(ctx, outbound.Request{Call: "terminate operation", Method: http.MethodDelete, URL: appURL(cfg, "/operation"),
		Header: h, Idempotent: true})
	if err != nil {
		return err
	}
	if resp.Status/100 == 2 || resp.Status == http.StatusNotFound {
		return nil
	}
	return a.HTTP.Unexpected("terminate operation", resp)
}
