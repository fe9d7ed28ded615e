package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/adapters/simulated"
	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/engine/pull"
	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/internal/tracing"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

var t0 = time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)

// agentSecret is the report secret of job agent "ext", behind the
// reference agentSecretRef.
const (
	agentSecret    = "s3cret-for-ext"
	agentSecretRef = "env:RECONCILER_SECRET_EXT"
)

// stores are the adapters a fixture runs on.
type stores struct {
	releases  ports.ReleaseStore
	queue     ports.Queue
	workflows ports.WorkflowStore
	catalog   ports.Catalog
	tokens    ports.Tokens
	runs      ports.RunStore
	tx        ports.Transactor
	audit     ports.AuditLog
}

var backends = map[string]func(t testing.TB, clock ports.Clock) stores{
	"memory": func(_ testing.TB, clock ports.Clock) stores {
		rel, q := memory.NewReleaseStore(clock), memory.NewQueue(clock)
		// The catalog is the release store's own, as serve wires it: the
		// policies the chain evaluates are the API's.
		return stores{rel, q, memory.NewWorkflowStore(), rel.Catalog, memory.NewTokens(), memory.NewRunStore(clock), memory.NewTransactor(rel, q), memory.NewAuditLog()}
	},
	"postgres": func(t testing.TB, clock ports.Clock) stores {
		dsn, _ := pgtest.Schema(t)
		ctx := context.Background()
		db, err := postgres.Open(ctx, dsn, postgres.WithMaxConns(8))
		require.NoError(t, err)
		t.Cleanup(db.Close)
		require.NoError(t, db.MigrateUp(ctx))
		q := postgres.NewQueue(db, clock)
		t.Cleanup(q.Close)
		rs := postgres.NewReleaseStore(db, clock)
		t.Cleanup(rs.Close)
		return stores{rs, q, postgres.NewWorkflowStore(db), rs.Catalog, postgres.NewTokens(db), postgres.NewRunStore(db, clock), db, postgres.NewAuditLog(db)}
	},
}

// secrets resolves the test agent's reference only.
type secrets struct{}

func (secrets) Resolve(_ context.Context, ref release.SecretRef) (string, error) {
	if ref.Ref == agentSecretRef {
		return agentSecret, nil
	}
	return "", fmt.Errorf("no secret %s: %w", ref.Ref, ports.ErrNotFound)
}

// fixture is an API server over one backend with a seeded workspace: system
// sys with dev and prod (prod needs one approval), resource r1, job agent
// ext (a pull agent under its older type name api, signing with
// agentSecret), deployment web on ext.
type fixture struct {
	t      testing.TB
	ctx    context.Context
	clock  *porttest.FakeClock
	st     stores
	chain  *chain.Chain
	eng    *engine.Engine
	server *api.Server
	http   *httptest.Server
	// tokens holds a secret per scope, and "revoked", a revoked admin one.
	tokens map[string]string
}

// agentConfig checks job agent configs as serve does for the types the
// fixture runs: the pull agents' and the workflow type; others are
// unknown.
func agentConfig(typ string, cfg map[string]any) error {
	switch {
	case release.IsPullAgentType(typ):
		return pull.ValidateConfig(cfg)
	case typ == release.WorkflowAgentType:
		return nil
	}
	return release.Invalid("type", "unknown job agent type "+strconv.Quote(typ))
}

// setup returns a fixture over backend; each of with changes its stores
// before the server is built.
func setup(t testing.TB, backend string, with ...func(*stores)) *fixture {
	t.Helper()
	clock := porttest.NewFakeClock(t0)
	st := backends[backend](t, clock)
	for _, w := range with {
		w(&st)
	}
	st.queue = tracing.Queue(st.queue) // as serve --otlp-endpoint wires it
	f := &fixture{t: t, ctx: t.Context(), clock: clock, st: st, tokens: map[string]string{}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.chain = &chain.Chain{Store: st.releases, Queue: st.queue, Clock: clock, Logger: log,
		Agents: map[string]ports.JobAgent{release.APIAgentType: pull.NewAgent(release.APIAgentType),
			release.PullAgentType: pull.NewAgent(release.PullAgentType)}}
	flows := &flow.Controller{Store: st.workflows, Queue: st.queue, Releases: st.releases, Catalog: st.catalog, Jobs: f.chain,
		Clock: clock, Logger: log, Agents: maps.Clone(f.chain.Agents)}
	wfJobs := st.workflows.(ports.WorkflowJobs)
	for _, typ := range []string{release.APIAgentType, release.PullAgentType} {
		flows.Agents[typ] = pull.NewWorkflowAgent(typ, wfJobs, st.workflows, st.releases, clock)
	}
	report := ports.JobReporterFunc(func(ctx context.Context, r ports.JobReport) error { // as serve routes reports
		if flow.IsJobID(r.JobID) {
			return flows.ReportJob(ctx, r)
		}
		return f.chain.ReportJob(ctx, r)
	})
	f.chain.Agents[release.WorkflowAgentType] = flows.ReleaseAgent()
	f.eng = engine.New(st.queue, engine.Options{Clock: clock, Logger: log, Owner: "test"})
	f.chain.Register(f.eng, 1)
	flows.Register(f.eng, 1)
	for _, k := range reconcile.Kinds {
		f.eng.Register(string(k), &runs.Processor{Kind: k, Store: st.runs, Queue: st.queue, Agents: simulated.NewAgentRuntime(),
			Code: simulated.NewCodeHost(), Config: reconcile.DefaultConfig(), Clock: clock, Logger: log}, engine.KindOptions{Concurrency: 1})
	}
	f.server = api.New(api.Options{Chain: f.chain, Flows: flows, Catalog: catalog.New(st.catalog, catalog.Config{}),
		Releases: st.releases, Workflows: st.workflows, Queue: st.queue, Tokens: st.tokens, Secrets: secrets{}, Clock: clock, Logger: log,
		Runs:         &runs.Control{Store: st.runs, Queue: st.queue, Clock: clock},
		MaxBodyBytes: 64 << 10, Tx: st.tx, Audit: st.audit, AgentConfig: agentConfig,
		Pull: &pull.Service{Store: st.releases, Taker: st.releases.(ports.JobTaker), Tx: st.tx, Queue: st.queue,
			Reporter: report, Workflows: wfJobs, Clock: clock, Poll: 20 * time.Millisecond}})
	f.http = httptest.NewServer(f.server.Handler())
	t.Cleanup(f.http.Close)
	for _, s := range ports.Scopes {
		f.tokens[string(s)] = f.mint("user-"+string(s), []ports.Scope{s}, fixtureAgents...)
	}
	// A bound agent token of an unrelated job agent (issue 28).
	f.tokens["agent-elsewhere"] = f.mint("elsewhere", []ports.Scope{ports.ScopeAgent}, "elsewhere")
	tok, secret, err := api.IssueToken(f.ctx, st.tokens, clock, "gone", []ports.Scope{ports.ScopeAdmin})
	require.NoError(t, err)
	require.NoError(t, st.tokens.TokenRevoke(f.ctx, tok.ID, clock.Now()))
	f.tokens["revoked"] = secret
	f.seed()
	return f
}

// fixtureAgents are the job agents the fixture's "agent" token acts for.
var fixtureAgents = []string{"ext", "runner", "once", "puller", "argo", "gha", "outside"}

// mint issues a token named name with scopes and returns its secret; a
// token of scope agent (without admin) is bound to agents.
func (f *fixture) mint(name string, scopes []ports.Scope, agents ...string) string {
	var opts []api.TokenOption
	if slices.Contains(scopes, ports.ScopeAgent) && !slices.Contains(scopes, ports.ScopeAdmin) {
		opts = append(opts, api.ForAgents(agents...))
	}
	_, secret, err := api.IssueToken(f.ctx, f.st.tokens, f.clock, name, scopes, opts...)
	require.NoError(f.t, err)
	return secret
}

func (f *fixture) seed() {
	ctx, s, r := f.ctx, f.st.releases, require.New(f.t)
	_, err := s.Workspaces().Put(ctx, release.Workspace{ID: "ws", Name: "acme"}, 0)
	r.NoError(err)
	_, err = s.Systems().Put(ctx, release.System{ID: "sys", WorkspaceID: "ws", Name: "shop"}, 0)
	r.NoError(err)
	for _, e := range []string{"dev", "prod"} {
		_, err = s.Environments().Put(ctx, release.Environment{ID: e, SystemID: "sys", Name: e, ResourceSelector: "true"}, 0)
		r.NoError(err)
	}
	_, err = s.Resources().Put(ctx, release.Resource{ID: "r1", WorkspaceID: "ws", Kind: "cluster", Identifier: "k8s/r1", Name: "r1"}, 0)
	r.NoError(err)
	_, err = s.JobAgents().Put(ctx, release.JobAgent{ID: "ext", Name: "external", Type: release.APIAgentType,
		Config: map[string]any{api.ReportSecretKey: agentSecretRef}}, 0)
	r.NoError(err)
	_, err = s.Deployments().Put(ctx, release.Deployment{ID: "web", SystemID: "sys", Name: "web", Slug: "web", JobAgentID: "ext", ResourceSelector: "true"}, 0)
	r.NoError(err)
	_, err = catalog.New(s, catalog.Config{}).Policies("fixture").Put(ctx, policy.Policy{ID: "prod-gate", WorkspaceID: "ws", Name: "prod gate", Selector: `environment.name == "prod"`, Enabled: true,
		Rules: []policy.Rule{{ID: "approval", Spec: policy.AnyApproval{MinApprovals: 1}}}}, 0)
	r.NoError(err)
	_, err = f.chain.SyncTargets(ctx, "sys")
	r.NoError(err)
}

// drain runs every due pass.
func (f *fixture) drain() {
	f.t.Helper()
	_, err := f.eng.Drain(f.ctx)
	require.NoError(f.t, err)
}

// response is a decoded answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a generic value.
func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), string(r.body))
	return m
}

// jsonArray decodes the body as a JSON array.
func (r response) jsonArray(t testing.TB) []any {
	t.Helper()
	var a []any
	require.NoError(t, json.Unmarshal(r.body, &a), string(r.body))
	return a
}

// problem checks an RFC 9457 answer of status and returns it.
func (r response) problem(t testing.TB, status int) map[string]any {
	t.Helper()
	require.Equal(t, status, r.status, string(r.body))
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"), string(r.body))
	m := r.json(t)
	require.EqualValues(t, status, m["status"])
	require.NotEmpty(t, m["title"])
	return m
}

// locations lists the error locations of a problem.
func locations(p map[string]any) []string {
	var out []string
	errs, _ := p["errors"].([]any)
	for _, e := range errs {
		if m, ok := e.(map[string]any); ok {
			loc, _ := m["location"].(string)
			out = append(out, loc)
		}
	}
	return out
}

// do sends method path with token (a scope name from f.tokens, or "" for
// none) and body (marshalled unless []byte or string), with extra headers.
func (f *fixture) do(method, path, token string, body any, headers ...string) response {
	f.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		raw, err := json.Marshal(b)
		require.NoError(f.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(f.ctx, method, f.http.URL+path, rd)
	require.NoError(f.t, err)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+f.tokens[token])
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(f.t, err)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// each runs fn on both backends.
func each(t *testing.T, fn func(t *testing.T, f *fixture)) {
	for name := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, setup(t, name))
		})
	}
}

// jsonNumber renders a JSON number read into a float64.
func jsonNumber(v float64) string { return fmt.Sprintf("%d", int64(v)) }

// concurrently runs fn n times at once and returns the statuses.
func concurrently(n int, fn func() int) []int {
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = fn()
		}()
	}
	wg.Wait()
	return statuses
}

// requireOneWins checks that exactly one status is ok and every other a
// 409 conflict.
func requireOneWins(t *testing.T, statuses []int, ok int, lose ...int) {
	t.Helper()
	if len(lose) == 0 {
		lose = []int{http.StatusConflict}
	}
	wins := 0
	for _, s := range statuses {
		require.Contains(t, append([]int{ok}, lose...), s)
		if s == ok {
			wins++
		}
	}
	require.Equal(t, 1, wins, "one wins, the others lose (%v): %v", lose, statuses)
}

// mustJSON encodes v.
func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
