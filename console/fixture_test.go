package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/console"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

var t0 = time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)

// The sensitive variable of deployment web: its reference, and the value
// the resolver gives the agents. Neither may appear on a page.
const (
	secretRef   = "env:RECONCILER_SECRET_DB_PASSWORD"
	secretValue = "hunter2-do-not-render"
)

// secrets resolves secretRef only.
type secrets struct{}

func (secrets) Resolve(_ context.Context, ref release.SecretRef) (string, error) {
	if ref.Ref == secretRef {
		return secretValue, nil
	}
	return "", fmt.Errorf("no secret %s: %w", ref.Ref, ports.ErrNotFound)
}

// agent is a job agent of type "rec" that accepts every job and records
// what it was handed; the tests report the jobs' ends.
type agent struct {
	mu   sync.Mutex
	jobs []ports.JobDispatch
}

func (*agent) Type() string { return "rec" }

func (a *agent) Dispatch(_ context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.jobs = append(a.jobs, d)
	return ports.JobDispatchResult{Status: release.JobInProgress}, nil
}

// fixture is a console over the in-memory stores, seeded with: system shop
// with dev and prod (prod needs one approval), resource r1, deployment web
// (a sensitive variable), version web-v1, a workflow "gated" waiting for
// an approval before a job fanned out over two regions, a catalog
// template with a published revision and a draft, a run of each kind and
// a dead-lettered work item.
type fixture struct {
	t       *testing.T
	ctx     context.Context
	clock   *porttest.FakeClock
	rel     ports.ReleaseStore
	queue   ports.Queue
	wfs     ports.WorkflowStore
	cat     *catalog.Service
	runs    ports.RunStore
	chain   *chain.Chain
	flows   *flow.Controller
	eng     *engine.Engine
	agent   *agent
	srv     *httptest.Server
	tokens  map[string]string // a secret per scope, "revoked", "reader+approver", "reader+writer"
	console *console.Server
	// tokenStore holds the tokens.
	tokenStore ports.Tokens
	// audit records the console's changes.
	audit ports.AuditLog
}

func setup(t *testing.T) *fixture {
	t.Helper()
	clock := porttest.NewFakeClock(t0)
	rel, queue := memory.NewReleaseStore(clock), memory.NewQueue(clock)
	f := &fixture{t: t, ctx: t.Context(), clock: clock, rel: rel, queue: queue,
		wfs: memory.NewWorkflowStore(), runs: memory.NewRunStore(clock), agent: &agent{}, tokens: map[string]string{}}
	tokens := memory.NewTokens()
	f.tokenStore = tokens
	cat := memory.NewCatalog(clock)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	agents := map[string]ports.JobAgent{"rec": f.agent}
	f.chain = &chain.Chain{Store: f.rel, Queue: f.queue, Clock: clock, Logger: log, Agents: agents}
	f.flows = &flow.Controller{Store: f.wfs, Queue: f.queue, Releases: f.rel, Catalog: cat, Jobs: f.chain, Secrets: secrets{},
		Clock: clock, Logger: log, Agents: agents}
	f.eng = engine.New(f.queue, engine.Options{Clock: clock, Logger: log, Owner: "test"})
	f.chain.Register(f.eng, 1)
	f.flows.Register(f.eng, 1)
	f.cat = catalog.New(cat, catalog.Config{})
	f.audit = memory.NewAuditLog()
	f.console = console.New(console.Options{Chain: f.chain, Flows: f.flows, Catalog: f.cat, Releases: f.rel, Workflows: f.wfs,
		Runs: f.runs, Queue: f.queue, Tokens: tokens, Clock: clock, Logger: log, Audit: f.audit,
		Tx: memory.NewTransactor(rel, queue)})
	f.srv = httptest.NewServer(f.console.Handler())
	t.Cleanup(f.srv.Close)
	for _, s := range ports.Scopes {
		var opts []api.TokenOption
		if s == ports.ScopeAgent {
			opts = append(opts, api.ForAgents("test-agent")) // agent tokens name their job agents
		}
		_, secret, err := api.IssueToken(f.ctx, tokens, clock, "user-"+string(s), []ports.Scope{s}, opts...)
		require.NoError(t, err)
		f.tokens[string(s)] = secret
	}
	_, secret, err := api.IssueToken(f.ctx, tokens, clock, "ann", []ports.Scope{ports.ScopeRead, ports.ScopeApprove})
	require.NoError(t, err)
	f.tokens["reader+approver"] = secret
	_, secret, err = api.IssueToken(f.ctx, tokens, clock, "wes", []ports.Scope{ports.ScopeRead, ports.ScopeWrite})
	require.NoError(t, err)
	f.tokens["reader+writer"] = secret
	tok, secret, err := api.IssueToken(f.ctx, tokens, clock, "gone", []ports.Scope{ports.ScopeAdmin})
	require.NoError(t, err)
	require.NoError(t, tokens.TokenRevoke(f.ctx, tok.ID, clock.Now()))
	f.tokens["revoked"] = secret
	f.seed()
	return f
}

// gated is the workflow template: an approval, then a job per region.
var gated = map[string]any{
	"apiVersion": "reconciler.dev/v1", "kind": "WorkflowTemplate", "metadata": map[string]any{"name": "gated"},
	"spec": map[string]any{
		"parameters": []any{
			map[string]any{"name": "image", "type": "string", "required": true},
			map[string]any{"name": "password", "type": "string", "default": ""},
			map[string]any{"name": "regions", "type": "matrix", "source": map[string]any{"kind": "list", "items": []any{"eu", "us"}}},
		},
		"tasks": []any{
			map[string]any{"name": "gate", "type": "approval", "approval": map[string]any{"message": "ship {{workflow.parameters.image}}?"}},
			map[string]any{"name": "deploy", "type": "job", "jobAgentRef": "runner", "dependencies": []any{"gate"}, "matrix": "{{workflow.parameters.regions}}",
				"config": map[string]any{"image": "{{workflow.parameters.image}}", "region": "{{matrix.item}}",
					"password": "{{workflow.parameters.password}}", "db": "{{variables.db_password}}"}},
		},
	},
}

func (f *fixture) seed() {
	ctx, s, r := f.ctx, f.rel, require.New(f.t)
	_, err := s.Workspaces().Put(ctx, release.Workspace{ID: "ws", Name: "acme"}, 0)
	r.NoError(err)
	_, err = s.Systems().Put(ctx, release.System{ID: "shop", WorkspaceID: "ws", Name: "Shop"}, 0)
	r.NoError(err)
	for _, e := range []string{"dev", "prod"} {
		_, err = s.Environments().Put(ctx, release.Environment{ID: e, SystemID: "shop", Name: e, ResourceSelector: "true"}, 0)
		r.NoError(err)
	}
	_, err = s.Resources().Put(ctx, release.Resource{ID: "r1", WorkspaceID: "ws", Kind: "cluster", Identifier: "k8s/r1", Name: "r1"}, 0)
	r.NoError(err)
	_, err = s.JobAgents().Put(ctx, release.JobAgent{ID: "runner", Name: "recorder", Type: "rec"}, 0)
	r.NoError(err)
	_, err = s.Deployments().Put(ctx, release.Deployment{ID: "web", SystemID: "shop", Name: "Web", Slug: "web", JobAgentID: "runner",
		ResourceSelector: "true", Variables: []release.DeploymentVariable{
			{Key: "db_password", Default: &release.Value{Sensitive: &release.SecretRef{Ref: secretRef}}}}}, 0)
	r.NoError(err)
	_, err = catalog.New(s, catalog.Config{}).Policies("fixture").Put(ctx, policy.Policy{ID: "prod-gate", WorkspaceID: "ws", Name: "prod gate", Selector: `environment.name == "prod"`, Enabled: true,
		Rules: []policy.Rule{{ID: "approval", Spec: policy.AnyApproval{MinApprovals: 1}}}}, 0)
	r.NoError(err)
	_, err = f.chain.SyncTargets(ctx, "shop")
	r.NoError(err)
	r.NoError(f.chain.CreateVersion(ctx, release.DeploymentVersion{ID: "web-v1", DeploymentID: "web", Tag: "v1"}))
	f.drain()

	// The workflow: the secret reaches its job config only at dispatch.
	doc, err := json.Marshal(gated)
	r.NoError(err)
	_, err = f.flows.Start(ctx, flow.StartParams{ID: "gated-1", Template: doc, Parameters: map[string]any{"image": "web:1"},
		Variables: map[string]release.Value{"db_password": {Sensitive: &release.SecretRef{Ref: secretRef}}}})
	r.NoError(err)
	f.drain()

	// The catalog: revision 1 published, a draft changing it.
	rev, err := f.cat.Create(ctx, catalog.CreateParams{Kind: revision.KindWorkflowTemplate, Name: "gated", Content: doc})
	r.NoError(err)
	rev, err = f.cat.Propose(ctx, catalog.Change{Ref: rev.Ref(), Version: rev.Version})
	r.NoError(err)
	_, err = f.cat.Approve(ctx, catalog.ApproveParams{Ref: rev.Ref(), Version: rev.Version, Approver: "carol"})
	r.NoError(err)
	changed := strings.Replace(string(doc), `"ship {{workflow.parameters.image}}?"`, `"ship {{workflow.parameters.image}} now?"`, 1)
	_, err = f.cat.Create(ctx, catalog.CreateParams{Kind: revision.KindWorkflowTemplate, Name: "gated", Content: json.RawMessage(changed)})
	r.NoError(err)

	// A run of each kind; the repo run moved once by the kernel, then an
	// operator asked to cancel it.
	for _, k := range reconcile.Kinds {
		st := reconcile.MachineFor(k).States[0]
		_, err := f.runs.RunCreate(ctx, ports.RunRow{Ref: reconcile.RunRef{Kind: k, ID: "run-" + string(k)}, State: st, Body: json.RawMessage(`{}`)})
		r.NoError(err)
	}
	repo := reconcile.RunRef{Kind: reconcile.KindRepo, ID: "run-repo"}
	v, err := f.runs.RunUpdate(ctx, ports.RunUpdateParams{Ref: repo, ExpectedVersion: 1, State: reconcile.RepoQueued, Body: json.RawMessage(`{}`),
		Decision: &ports.RunDecision{Action: string(reconcile.TypeTransition), Reason: "no-dependencies", From: reconcile.RepoPending, To: reconcile.RepoQueued}})
	r.NoError(err)
	_, err = f.runs.RunUpdate(ctx, ports.RunUpdateParams{Ref: repo, ExpectedVersion: v, State: reconcile.RepoQueued, Body: json.RawMessage(`{}`),
		Decision: &ports.RunDecision{Action: "intent", Reason: "cancel", By: "alice"}})
	r.NoError(err)

	// A dead-lettered item.
	key := ports.WorkKey{Kind: "probe", ScopeType: "thing", ScopeID: "t1"}
	r.NoError(f.queue.WorkEnqueue(ctx, ports.EnqueueParams{Key: key}))
	leases, err := f.queue.WorkLease(ctx, ports.LeaseParams{Kinds: []string{"probe"}, Limit: 1, Duration: time.Minute, Owner: "test"})
	r.NoError(err)
	r.Len(leases, 1)
	r.NoError(f.queue.WorkRetry(ctx, ports.RetryParams{Lease: leases[0].Ref(), Err: "probe failed", Terminal: true}))
}

// drain runs every due pass.
func (f *fixture) drain() {
	f.t.Helper()
	_, err := f.eng.Drain(f.ctx)
	require.NoError(f.t, err)
}

// client is a browser-like session: a cookie jar that does not follow
// redirects (tests look at them).
type client struct {
	f    *fixture
	http *http.Client
}

// anonymous is a client with no session.
func (f *fixture) anonymous() *client {
	jar, err := cookiejar.New(nil)
	require.NoError(f.t, err)
	return &client{f: f, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// login is a client logged in with the token of scope.
func (f *fixture) login(scope string) *client {
	f.t.Helper()
	c := f.anonymous()
	res := c.post("/login", url.Values{"token": {f.tokens[scope]}, "next": {"/"}})
	require.Equal(f.t, http.StatusSeeOther, res.status, res.body)
	require.Equal(f.t, "/", res.header.Get("Location"))
	return c
}

// response is an answer.
type response struct {
	status int
	header http.Header
	body   string
}

func (c *client) do(req *http.Request) response {
	c.f.t.Helper()
	res, err := c.http.Do(req)
	require.NoError(c.f.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(c.f.t, err)
	return response{status: res.StatusCode, header: res.Header, body: string(b)}
}

// get reads path.
func (c *client) get(path string) response {
	c.f.t.Helper()
	req, err := http.NewRequestWithContext(c.f.ctx, http.MethodGet, c.f.srv.URL+path, nil)
	require.NoError(c.f.t, err)
	return c.do(req)
}

// page reads path and requires a 200 HTML page.
func (c *client) page(path string) string {
	c.f.t.Helper()
	res := c.get(path)
	require.Equal(c.f.t, http.StatusOK, res.status, "GET %s: %s", path, res.body)
	require.Equal(c.f.t, "text/html; charset=utf-8", res.header.Get("Content-Type"))
	return res.body
}

// post sends a form with headers (name, value pairs).
func (c *client) post(path string, form url.Values, headers ...string) response {
	c.f.t.Helper()
	req, err := http.NewRequestWithContext(c.f.ctx, http.MethodPost, c.f.srv.URL+path, strings.NewReader(form.Encode()))
	require.NoError(c.f.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return c.do(req)
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrf is the CSRF token the session's pages carry.
func (c *client) csrf() string {
	c.f.t.Helper()
	m := csrfRe.FindStringSubmatch(c.page("/"))
	require.NotNil(c.f.t, m, "the page carries a CSRF token")
	return m[1]
}

// submit posts a form as the session's pages do: with its CSRF token.
func (c *client) submit(path string, form url.Values) response {
	c.f.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", c.csrf())
	return c.post(path, form)
}

// approvalsOf lists who approved version in env.
func (f *fixture) approvalsOf(version, env string) []string {
	f.t.Helper()
	list, err := f.rel.ApprovalList(f.ctx, version, env)
	require.NoError(f.t, err)
	var out []string
	for _, a := range list {
		out = append(out, a.User)
	}
	return out
}

// itoa formats a version.
func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// jsonOf encodes v.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// newInsecure is a console over the fixture's services without a login.
func newInsecure(f *fixture) *console.Server {
	return console.New(console.Options{Chain: f.chain, Flows: f.flows, Catalog: f.cat, Releases: f.rel, Workflows: f.wfs,
		Runs: f.runs, Queue: f.queue, Tokens: memory.NewTokens(), Clock: f.clock, Insecure: true})
}
