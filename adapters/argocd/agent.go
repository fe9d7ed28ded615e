package argocd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
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
		// Source and Sources are kept whole: a patch of a multi-source
		// application rewrites the list, and a Helm parameter keeps the
		// fields we do not set (forceString).
		Source      map[string]any   `json:"source"`
		Sources     []map[string]any `json:"sources"`
		Destination struct {
			Namespace string `json:"namespace"`
		} `json:"destination"`
	} `json:"spec"`
	Operation *operation `json:"operation"`
	Status    struct {
		Sync struct {
			Status    string   `json:"status"`
			Revision  string   `json:"revision"`
			Revisions []string `json:"revisions"`
		} `json:"sync"`
		ReconciledAt string `json:"reconciledAt"`
		Health       struct {
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"health"`
		OperationState *operationState `json:"operationState"`
	} `json:"status"`
}

// operationState is the part of an Application's last operation's state
// the agent reads.
type operationState struct {
	Operation  operation `json:"operation"`
	Phase      string    `json:"phase"`
	Message    string    `json:"message"`
	StartedAt  string    `json:"startedAt"`
	FinishedAt string    `json:"finishedAt"`
	SyncResult *struct {
		Revision  string   `json:"revision"`
		Revisions []string `json:"revisions"`
	} `json:"syncResult"`
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
		if missing(err) {
			return a.Invalid(release.Invalid("job_agent_config.application", "Argo CD has no application "+quote(cfg.application)+
				" the token may read ("+strconv.Itoa(outbound.StatusOf(err))+")"))
		}
		if err != nil {
			return jobfollow.Started{}, err
		}
		ours := app.Operation.hasKey(key) || (app.Status.OperationState != nil && app.Status.OperationState.Operation.hasKey(key))
		if !ours {
			if err := a.patch(ctx, cfg, &app); err != nil {
				return jobfollow.Started{}, err
			}
			if err := a.sync(ctx, cfg, &app, key); err != nil {
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

// missing reports whether err is Argo CD's answer for an Application it
// does not have: 404, or 403 when the request names no project (Argo CD
// does not tell a missing application from a forbidden one then).
func missing(err error) bool {
	st := outbound.StatusOf(err)
	return st == http.StatusNotFound || st == http.StatusForbidden
}

// header is the request header with the token.
func (a *Agent) header(ctx context.Context, cfg config) (http.Header, error) {
	return a.Bearer(ctx, "job_agent_config.tokenRef", cfg.tokenRef, cfg.server)
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

// targets lists the 1-based positions of the sources of a multi-source
// Application the config's revision and parameters go to: the configured
// sourcePosition, or every source that is not only a values reference
// (one with "ref" and no chart or path).
func targets(cfg config, app *application) []int {
	if cfg.sourcePosition > 0 {
		if cfg.sourcePosition <= len(app.Spec.Sources) {
			return []int{cfg.sourcePosition}
		}
		return nil
	}
	var out []int
	for i, src := range app.Spec.Sources {
		_, ref := src["ref"]
		_, chart := src["chart"]
		_, path := src["path"]
		if !ref || chart || path {
			out = append(out, i+1)
		}
	}
	return out
}

// patchSource returns src with the config's revision and Helm parameters
// set, and whether anything changed. Parameters merge by name: one we set
// keeps its other fields (forceString), the others stay as they are.
func patchSource(cfg config, src map[string]any) (map[string]any, bool) {
	out := make(map[string]any, len(src)+1)
	for k, v := range src {
		out[k] = v
	}
	changed := false
	if cfg.revision != "" && src["targetRevision"] != cfg.revision {
		out["targetRevision"], changed = cfg.revision, true
	}
	if len(cfg.parameters) == 0 {
		return out, changed
	}
	helm, _ := src["helm"].(map[string]any)
	newHelm := make(map[string]any, len(helm)+1)
	for k, v := range helm {
		newHelm[k] = v
	}
	have, _ := helm["parameters"].([]any)
	params := make([]any, 0, len(have)+len(cfg.parameters))
	seen := map[string]bool{}
	for _, p := range have {
		pm, ok := p.(map[string]any)
		name, _ := pm["name"].(string)
		want, set := cfg.parameters[name]
		if !ok || !set {
			params = append(params, p)
			continue
		}
		seen[name] = true
		if pm["value"] == want {
			params = append(params, pm)
			continue
		}
		np := make(map[string]any, len(pm))
		for k, v := range pm {
			np[k] = v
		}
		np["value"], changed = want, true
		params = append(params, np)
	}
	names := make([]string, 0, len(cfg.parameters))
	for n := range cfg.parameters {
		if !seen[n] {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		params, changed = append(params, map[string]any{"name": n, "value": cfg.parameters[n]}), true
	}
	newHelm["parameters"] = params
	out["helm"] = newHelm
	return out, changed
}

// patch sets the revision, parameters and namespace the config asks for
// where the Application differs, with one JSON merge patch: the source's
// changed fields, or the whole sources list of a multi-source Application
// (a merge patch replaces a list).
func (a *Agent) patch(ctx context.Context, cfg config, app *application) error {
	spec := map[string]any{}
	if len(app.Spec.Sources) > 0 {
		sources := make([]any, len(app.Spec.Sources))
		changed := false
		for i, src := range app.Spec.Sources {
			sources[i] = src
		}
		for _, pos := range targets(cfg, app) {
			src, c := patchSource(cfg, app.Spec.Sources[pos-1])
			sources[pos-1], changed = src, changed || c
		}
		if changed {
			spec["sources"] = sources
		}
	} else if src, changed := patchSource(cfg, app.Spec.Source); changed {
		source := map[string]any{}
		if v, ok := src["targetRevision"]; ok && v != app.Spec.Source["targetRevision"] {
			source["targetRevision"] = v
		}
		if h, ok := src["helm"].(map[string]any); ok {
			source["helm"] = map[string]any{"parameters": h["parameters"]}
		}
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

// sync starts the sync operation carrying key: at the config's revision,
// per source position for a multi-source Application (Argo CD ignores
// revision there and reads revisions and sourcePositions).
func (a *Agent) sync(ctx context.Context, cfg config, app *application, key string) error {
	h, err := a.header(ctx, cfg)
	if err != nil {
		return err
	}
	body := map[string]any{"name": cfg.application, "prune": cfg.prune, "infos": []info{{Name: InfoName, Value: key}}}
	switch {
	case cfg.revision == "":
	case len(app.Spec.Sources) > 0:
		pos := targets(cfg, app)
		revs, positions := make([]string, len(pos)), make([]string, len(pos))
		for i, p := range pos {
			revs[i], positions[i] = cfg.revision, strconv.Itoa(p) // int64: a string in proto JSON
		}
		body["revisions"], body["sourcePositions"] = revs, positions
	default:
		body["revision"] = cfg.revision
	}
	if cfg.appNamespace != "" {
		body["appNamespace"] = cfg.appNamespace
	}
	if cfg.project != "" {
		body["project"] = cfg.project
	}
	_, err = a.HTTP.DoJSON(ctx, outbound.Request{Call: "sync application", Method: http.MethodPost,
		URL: cfg.server + "/api/v1/applications/" + url.PathEscape(cfg.application) + "/sync", Header: h,
		Transient: []int{http.StatusConflict}}.JSON(body), nil) // 409: another operation is in progress

	return err
}

// poll reads the Application and judges the job's sync.
func (a *Agent) poll(ctx context.Context, cfg config, key string) (jobfollow.State, error) {
	app, err := a.get(ctx, cfg)
	if missing(err) {
		return jobfollow.State{Status: release.JobExternalRunNotFound, Message: "application " + cfg.application +
			" is gone (or the token may no longer read it: " + strconv.Itoa(outbound.StatusOf(err)) + ")"}, nil
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
	if why := stale(app, op); why != "" {
		return jobfollow.State{Status: release.JobInProgress, Message: "sync of " + name + " succeeded, " + why, Outputs: out}
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

// stale says why the Application's sync and health status may predate the
// job's succeeded operation op, as argocd app wait checks it: the status
// must be at the revision(s) the operation synced, and reconciled no
// earlier than the operation finished. It is "" when the status is the
// operation's.
func stale(app *application, op *operationState) string {
	if r := op.SyncResult; r != nil {
		if len(r.Revisions) > 0 && !slices.Equal(r.Revisions, app.Status.Sync.Revisions) {
			return "status still at " + strings.Join(app.Status.Sync.Revisions, ",") + ", synced " + strings.Join(r.Revisions, ",")
		}
		if len(r.Revisions) == 0 && r.Revision != app.Status.Sync.Revision {
			return "status still at " + app.Status.Sync.Revision + ", synced " + r.Revision
		}
	}
	if op.FinishedAt != "" && app.Status.ReconciledAt != "" {
		fin, err1 := time.Parse(time.RFC3339, op.FinishedAt)
		rec, err2 := time.Parse(time.RFC3339, app.Status.ReconciledAt)
		if err1 == nil && err2 == nil && rec.Before(fin) {
			return "status not yet reconciled since"
		}
	}
	return ""
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
	if missing(err) {
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
