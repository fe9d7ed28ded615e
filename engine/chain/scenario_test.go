package chain_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// t0 is Monday 2026-03-02 08:00 UTC.
var t0 = time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)

// backends builds the store and queue of each adapter over a clock.
var backends = map[string]func(t *testing.T, clock ports.Clock) (ports.ReleaseStore, ports.Queue){
	"memory": func(_ *testing.T, clock ports.Clock) (ports.ReleaseStore, ports.Queue) {
		return memory.NewReleaseStore(clock), memory.NewQueue(clock)
	},
	"postgres": func(t *testing.T, clock ports.Clock) (ports.ReleaseStore, ports.Queue) {
		dsn, _ := pgtest.Schema(t)
		ctx := context.Background()
		db, err := postgres.Open(ctx, dsn, postgres.WithMaxConns(4))
		require.NoError(t, err)
		t.Cleanup(db.Close)
		require.NoError(t, db.MigrateUp(ctx))
		q := postgres.NewQueue(db, clock)
		t.Cleanup(q.Close)
		return postgres.NewReleaseStore(db, clock), q
	},
}

// fakeAgent accepts every job and leaves its outcome to the test, which
// reports it through the chain.
type fakeAgent struct {
	mu         sync.Mutex
	dispatched map[string]int             // job id → dispatch calls
	cancelled  map[string]ports.JobCancel // job id → cancel asked
	down       bool                       // refuse every dispatch
}

// CancelJob records the request.
func (a *fakeAgent) CancelJob(_ context.Context, c ports.JobCancel) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cancelled == nil {
		a.cancelled = map[string]ports.JobCancel{}
	}
	a.cancelled[c.JobID] = c
	return nil
}

func (a *fakeAgent) Type() string { return "fake" }

func (a *fakeAgent) Dispatch(_ context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.down {
		return ports.JobDispatchResult{}, errors.New("agent unreachable")
	}
	a.dispatched[d.Job.ID]++
	return ports.JobDispatchResult{ExternalID: "fake/" + d.Job.ID, Status: release.JobInProgress}, nil
}

// scriptedVerifier reads result[metric name] from its config's "ok" key.
type scriptedVerifier struct{}

func (scriptedVerifier) Type() string { return "test" }

func (scriptedVerifier) Measure(_ context.Context, r ports.MeasureRequest) (any, error) {
	return map[string]any{"ok": r.Metric.Provider.Config["ok"]}, nil
}

// tb is what the harness needs of *testing.T and *rapid.T.
type tb interface {
	require.TestingT
	Helper()
}

// harness is the chain on one adapter with a fake clock, stepped with
// engine.Drain.
type harness struct {
	t     tb
	ctx   context.Context
	clock *porttest.FakeClock
	store ports.ReleaseStore
	q     ports.Queue
	chain *chain.Chain
	eng   *engine.Engine
	agent *fakeAgent
	envs  map[string]release.Environment
	// batched drains with engine.DrainBatches: the target-scoped kinds'
	// items run in batches, as under Run.
	batched bool
}

func newHarness(t *testing.T, backend string) *harness {
	t.Helper()
	clock := porttest.NewFakeClock(t0)
	name, batched := strings.CutSuffix(backend, "-batched")
	store, q := backends[name](t, clock)
	h := newHarnessOn(t, t.Context(), clock, store, q)
	h.batched = batched
	return h
}

// newHarnessOn builds the harness over a store and queue.
func newHarnessOn(t tb, ctx context.Context, clock *porttest.FakeClock, store ports.ReleaseStore, q ports.Queue) *harness {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := &harness{t: t, ctx: ctx, clock: clock, store: store, q: q, agent: &fakeAgent{dispatched: map[string]int{}},
		envs: map[string]release.Environment{}}
	h.chain = &chain.Chain{Store: store, Queue: q, Clock: clock, Logger: log,
		Agents: map[string]ports.JobAgent{"fake": h.agent}, Verifiers: map[string]ports.Verifier{"test": scriptedVerifier{}}}
	h.eng = engine.New(q, engine.Options{Clock: clock, Logger: log, Owner: "test"})
	h.chain.Register(h.eng, 1)
	h.seed()
	return h
}

// seed stores a workspace with dev, staging and prod, two clusters and the
// deployment "api" served by the fake agent.
func (h *harness) seed() {
	ctx, s, r := h.ctx, h.store, require.New(h.t)
	_, err := s.Workspaces().Put(ctx, release.Workspace{ID: "ws", Name: "acme"}, 0)
	r.NoError(err)
	_, err = s.Systems().Put(ctx, release.System{ID: "sys", WorkspaceID: "ws", Name: "shop"}, 0)
	r.NoError(err)
	for _, name := range []string{"dev", "staging", "prod"} {
		e := release.Environment{ID: name, SystemID: "sys", Name: name, ResourceSelector: "true"}
		_, err = s.Environments().Put(ctx, e, 0)
		r.NoError(err)
		h.envs[name] = e
	}
	for _, id := range []string{"c1", "c2"} {
		_, err = s.Resources().Put(ctx, release.Resource{ID: id, WorkspaceID: "ws", Kind: "cluster", Identifier: id, Name: id}, 0)
		r.NoError(err)
	}
	_, err = s.JobAgents().Put(ctx, release.JobAgent{ID: "fake-agent", Name: "fake", Type: "fake", Config: map[string]any{"image": "x", "opts": map[string]any{"a": 1.0}}}, 0)
	r.NoError(err)
	_, err = s.Deployments().Put(ctx, release.Deployment{ID: "api", SystemID: "sys", Name: "api", Slug: "api", JobAgentID: "fake-agent",
		JobAgentConfig: map[string]any{"opts": map[string]any{"b": 2.0}}, ResourceSelector: `resource.kind == "cluster"`}, 0)
	r.NoError(err)
	diff, err := h.chain.SyncTargets(ctx, "sys")
	r.NoError(err)
	r.Len(diff.Added, 6, "3 environments × 2 clusters")
}

func (h *harness) policy(p policy.Policy) {
	h.t.Helper()
	p.Name, p.Enabled = p.ID, true
	if p.WorkspaceID == "" {
		p.WorkspaceID = "ws"
	}
	_, err := catalog.New(h.store, catalog.Config{}).Policies("test").Put(h.ctx, p, 0)
	require.NoError(h.t, err)
}

// drain runs every due item; it returns the passes run.
func (h *harness) drain() int {
	h.t.Helper()
	drain := h.eng.Drain
	if h.batched {
		drain = h.eng.DrainBatches
	}
	n, err := drain(h.ctx)
	require.NoError(h.t, err)
	return n
}

func (h *harness) version(id string) {
	h.t.Helper()
	h.clock.Advance(time.Minute)
	require.NoError(h.t, h.chain.CreateVersion(h.ctx, release.DeploymentVersion{ID: id, DeploymentID: "api", Tag: id}))
}

func target(env, res string) release.ReleaseTarget {
	return release.ReleaseTarget{DeploymentID: "api", EnvironmentID: env, ResourceID: res}
}

// jobs returns the target's jobs newest first.
func (h *harness) jobs(env, res string) []ports.JobRow {
	h.t.Helper()
	rows, err := h.store.JobsByTarget(h.ctx, target(env, res), 0)
	require.NoError(h.t, err)
	return rows
}

// running returns the version of the target's newest job ("" when none).
func (h *harness) running(env, res string) string {
	rows := h.jobs(env, res)
	if len(rows) == 0 {
		return ""
	}
	return rows[0].VersionID
}

// finish reports the newest job of each named environment's targets.
func (h *harness) finish(status release.JobStatus, envs ...string) {
	h.t.Helper()
	h.clock.Advance(time.Minute)
	for _, env := range envs {
		for _, res := range []string{"c1", "c2"} {
			rows := h.jobs(env, res)
			require.NotEmpty(h.t, rows, "no job on %s/%s", env, res)
			require.NoError(h.t, h.chain.ReportJob(h.ctx, ports.JobReport{AgentID: "fake-agent", ExternalID: rows[0].ExternalID, Status: status}))
		}
	}
}

func (h *harness) requireRunning(version string, envs ...string) {
	h.t.Helper()
	for _, env := range envs {
		for _, res := range []string{"c1", "c2"} {
			require.Equal(h.t, version, h.running(env, res), "%s/%s", env, res)
		}
	}
}

// progressionPolicies: staging follows dev, prod follows staging and needs
// one approval.
func progressionPolicies(h *harness, requireVerification bool) {
	h.policy(policy.Policy{ID: "staging-after-dev", Selector: `environment.name == "staging"`, Rules: []policy.Rule{
		{ID: "after-dev", Spec: policy.EnvironmentProgression{DependsOnEnvironmentSelector: `environment.name == "dev"`,
			MinimumSuccessPercentage: 100, RequireVerificationPassed: requireVerification}}}})
	h.policy(policy.Policy{ID: "prod-gate", Selector: `environment.name == "prod"`, Rules: []policy.Rule{
		{ID: "after-staging", Spec: policy.EnvironmentProgression{DependsOnEnvironmentSelector: `environment.name == "staging"`, MinimumSuccessPercentage: 100}},
		{ID: "approval", Spec: policy.AnyApproval{MinApprovals: 1}}}})
}

// forEachBackend runs f on each adapter, draining one item at a time and
// in batches ("-batched").
func forEachBackend(t *testing.T, f func(t *testing.T, h *harness)) {
	for name := range backends {
		for _, mode := range []string{"", "-batched"} {
			t.Run(name+mode, func(t *testing.T) {
				t.Parallel()
				f(t, newHarness(t, name+mode))
			})
		}
	}
}

// TestScenarioProgressionAndApproval: v1 flows dev → staging → prod as far
// as progression allows, prod waits for its approval and is released by it;
// v2 then reaches dev and staging while prod, unapproved for v2, keeps v1:
// the blocked newest version is skipped for the newest passing one.
func TestScenarioProgressionAndApproval(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		progressionPolicies(h, false)
		h.drain()
		h.version("v1")
		h.drain()
		h.requireRunning("v1", "dev")
		h.requireRunning("", "staging", "prod")

		h.finish(release.JobSuccessful, "dev")
		h.drain()
		h.requireRunning("v1", "staging")
		h.requireRunning("", "prod")

		h.finish(release.JobSuccessful, "staging")
		h.drain()
		h.requireRunning("", "prod")
		d, err := h.store.DesiredGet(h.ctx, target("prod", "c1"))
		require.NoError(t, err)
		require.Empty(t, d.ReleaseID)
		require.Contains(t, d.Reasons[0], "approval")

		ex, err := h.chain.Explain(h.ctx, target("prod", "c1"), 0)
		require.NoError(t, err)
		require.Len(t, ex.Versions, 1)
		require.Equal(t, policy.Pending, ex.Versions[0].Decision.Status)
		require.Len(t, ex.Versions[0].Verdicts, 2, "every prod rule has a verdict")

		added, err := h.chain.Approve(h.ctx, release.Approval{VersionID: "v1", EnvironmentID: "prod", User: "alice"})
		require.NoError(t, err)
		require.True(t, added)
		h.drain()
		h.requireRunning("v1", "prod")
		h.finish(release.JobSuccessful, "prod")
		h.drain()

		h.version("v2")
		h.drain()
		h.requireRunning("v2", "dev")
		h.finish(release.JobSuccessful, "dev")
		h.drain()
		h.requireRunning("v2", "staging")
		h.finish(release.JobSuccessful, "staging")
		h.drain()
		h.requireRunning("v1", "prod")
		d, err = h.store.DesiredGet(h.ctx, target("prod", "c2"))
		require.NoError(t, err)
		rel, err := h.store.ReleaseGet(h.ctx, d.ReleaseID)
		require.NoError(t, err)
		require.Equal(t, "v1", rel.VersionID, "prod keeps the newest version it allows")
		require.Contains(t, d.Reasons[0], "v2: approval pending")

		// Every job was dispatched exactly once, with the merged config.
		for id, n := range h.agent.dispatched {
			require.Equal(t, 1, n, "job %s", id)
		}
		job := h.jobs("dev", "c1")[0]
		require.Equal(t, map[string]any{"image": "x", "opts": map[string]any{"a": 1.0, "b": 2.0}}, job.JobAgentConfig)

		// The chain is idempotent: reprocessing every target with unchanged
		// state creates no new job or release.
		before := len(h.agent.dispatched)
		var all []release.ReleaseTarget
		for _, env := range []string{"dev", "staging", "prod"} {
			all = append(all, target(env, "c1"), target(env, "c2"))
		}
		require.NoError(t, h.chain.EvaluateTargets(h.ctx, all...))
		h.drain()
		require.Len(t, h.agent.dispatched, before)
	})
}

// TestScenarioFailingVerificationStopsProgression: dev's v1 jobs succeed
// but their verification fails, so staging (requiring verification) never
// gets v1.
func TestScenarioFailingVerificationStopsProgression(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		progressionPolicies(h, true)
		h.policy(policy.Policy{ID: "verify-dev", Selector: `environment.name == "dev"`, Rules: []policy.Rule{
			{ID: "smoke", Spec: policy.Verification{Metrics: []policy.MetricSpec{{Name: "smoke", Count: 2, IntervalSeconds: 30,
				Provider: policy.Provider{Type: "test", Config: map[string]any{"ok": false}}, SuccessCondition: "result.ok"}}}}}})
		h.version("v1")
		h.drain()
		h.finish(release.JobSuccessful, "dev")
		for range 3 {
			h.drain()
			h.clock.Advance(30 * time.Second)
		}
		job := h.jobs("dev", "c1")[0]
		require.Equal(t, release.VerificationFailed, job.Verification)
		require.NotEmpty(t, job.Measurements["smoke"])
		h.drain()
		h.requireRunning("", "staging", "prod")
	})
}

// TestScenarioDeploymentWindowDefers: after a first deployment (which
// ignores windows), v2 arrives outside the allow window and waits; the
// desired-release item wakes at the window's start and releases it.
func TestScenarioDeploymentWindowDefers(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		h.policy(policy.Policy{ID: "window", Rules: []policy.Rule{
			{ID: "nine-to-ten", Spec: policy.DeploymentWindow{RRule: "FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0", DurationMinutes: 60}}}})
		h.version("v1")
		h.drain()
		h.requireRunning("v1", "dev", "staging", "prod")
		h.finish(release.JobSuccessful, "dev", "staging", "prod")
		h.drain()

		h.version("v2") // 08:03, outside the 09:00 window
		h.drain()
		h.requireRunning("v1", "dev", "staging", "prod")
		nine := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
		it, err := h.q.WorkGet(h.ctx, chain.TargetKey(chain.KindDesiredRelease, target("dev", "c1")))
		require.NoError(t, err)
		require.Equal(t, nine, it.NotBefore.UTC(), "the item wakes when the window opens")

		h.clock.Set(nine.Add(-time.Second))
		require.Zero(t, h.drain(), "nothing is due before the window")
		h.clock.Set(nine)
		h.drain()
		h.requireRunning("v2", "dev", "staging", "prod")
	})
}

// TestScenarioNoAgentIsInvalidJobAgent: a deployment whose agent type has
// no implementation gets invalidJobAgent jobs, once per release.
func TestScenarioNoAgentIsInvalidJobAgent(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		_, err := h.store.JobAgents().Put(h.ctx, release.JobAgent{ID: "gha", Name: "gha", Type: "github-actions"}, 0)
		require.NoError(t, err)
		d, err := h.store.Deployments().Get(h.ctx, "api")
		require.NoError(t, err)
		d.Value.JobAgentID = "gha"
		_, err = h.store.Deployments().Put(h.ctx, d.Value, d.Version)
		require.NoError(t, err)
		h.version("v1")
		h.drain()
		h.drain()
		rows := h.jobs("dev", "c1")
		require.Len(t, rows, 1, "each release gets exactly one job without a retry rule")
		require.Equal(t, release.JobInvalidJobAgent, rows[0].Status)
		require.Contains(t, rows[0].Message, "github-actions")
		require.Empty(t, h.agent.dispatched)
		ex, err := h.chain.Explain(h.ctx, target("dev", "c1"), 0)
		require.NoError(t, err)
		require.Contains(t, ex.Convergence.Message, `no job can run: no agent of type "github-actions" is registered`, "explain says why it waits")
	})
}

// TestReportJobRefusesImpossibleMoves: a report a job cannot take is
// invalid input and changes nothing; a repeated report is a no-op.
func TestReportJobRefusesImpossibleMoves(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "memory")
	h.version("v1")
	h.drain()
	job := h.jobs("dev", "c1")[0]
	rep := ports.JobReport{JobID: job.ID, Status: release.JobSuccessful}
	require.NoError(t, h.chain.ReportJob(h.ctx, rep))
	require.NoError(t, h.chain.ReportJob(h.ctx, rep), "the same report twice is a no-op")
	err := h.chain.ReportJob(h.ctx, ports.JobReport{JobID: job.ID, Status: release.JobInProgress})
	require.ErrorIs(t, err, release.ErrInvalid)
	require.Equal(t, release.JobSuccessful, h.jobs("dev", "c1")[0].Status)
	require.ErrorIs(t, h.chain.ReportJob(h.ctx, ports.JobReport{JobID: "nope", Status: release.JobFailure}), ports.ErrNotFound)
	require.Error(t, h.chain.ReportJob(h.ctx, ports.JobReport{JobID: job.ID, Status: "exploded"}))
}

// TestScenarioEnvironmentCap: a per-environment cap of 1 admits one job in
// dev at a time across its targets; when it finishes, the environment's
// next target is woken and dispatched without a resync.
func TestScenarioEnvironmentCap(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		h.policy(policy.Policy{ID: "dev-cap", Selector: `environment.name == "dev"`, Rules: []policy.Rule{
			{ID: "one-at-a-time", Spec: policy.Concurrency{MaxActivePerEnvironment: 1}}}})
		h.drain()
		h.version("v1")
		h.drain()
		first, second := h.running("dev", "c1"), h.running("dev", "c2")
		require.True(t, (first == "") != (second == ""), "exactly one dev target runs: c1=%q c2=%q", first, second)
		h.requireRunning("v1", "staging", "prod")
		waiting := "c2"
		if first == "" {
			waiting = "c1"
		}
		other := map[string]string{"c1": "c2", "c2": "c1"}[waiting]
		ex, err := h.chain.Explain(h.ctx, target("dev", waiting), 0)
		require.NoError(t, err)
		require.Contains(t, ex.Convergence.Message, "waits: one-at-a-time pending: 1 active jobs in environment dev (limit 1)", "explain says why it waits")
		ex, err = h.chain.Explain(h.ctx, target("dev", other), 0)
		require.NoError(t, err)
		require.Contains(t, ex.Convergence.Message, "job "+h.jobs("dev", other)[0].ID+" is inProgress", "explain says what the running one does")
		rows := h.jobs("dev", other)
		require.NoError(t, h.chain.ReportJob(h.ctx, ports.JobReport{AgentID: "fake-agent", ExternalID: rows[0].ExternalID, Status: release.JobSuccessful}))
		h.drain()
		require.Equal(t, "v1", h.running("dev", waiting), "the waiting target runs once the environment has room")
	})
}

// TestScenarioVariables: the release carries each variable from its first
// source (resource, deployment value, variable set, default); changing a
// resource's value makes a new release; a sensitive value is kept as its
// reference and never appears in the log.
func TestScenarioVariables(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		var logs lockedBuffer
		h.chain.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		ctx, s := h.ctx, h.store
		_, err := s.VariableSets().Put(ctx, release.VariableSet{ID: "prod-vars", SystemID: "sys", Name: "prod", Selector: `environment.name == "prod"`, Priority: 1,
			Values: map[string]release.Value{"region": {Literal: "eu-prod"}, "db": {Sensitive: &release.SecretRef{Ciphertext: "v1:SECRETCIPHER"}}}}, 0)
		require.NoError(t, err)
		dep, err := s.Deployments().Get(ctx, "api")
		require.NoError(t, err)
		dep.Value.Variables = []release.DeploymentVariable{
			{Key: "replicas", Default: &release.Value{Literal: 1}, Values: []release.VariableValue{{Selector: `environment.name == "staging"`, Value: release.Value{Literal: 2}}}},
			{Key: "region", Default: &release.Value{Literal: "default"}},
			{Key: "db"},
		}
		_, err = s.Deployments().Put(ctx, dep.Value, dep.Version)
		require.NoError(t, err)
		res, err := s.Resources().Get(ctx, "c1")
		require.NoError(t, err)
		res.Value.Variables = map[string]release.Value{"replicas": {Literal: 7}}
		_, err = s.Resources().Put(ctx, res.Value, res.Version)
		require.NoError(t, err)

		h.drain()
		h.version("v1")
		h.drain()
		vars := func(env, resID string) map[string]release.Value {
			d, err := s.DesiredGet(ctx, target(env, resID))
			require.NoError(t, err)
			rel, err := s.ReleaseGet(ctx, d.ReleaseID)
			require.NoError(t, err)
			return rel.Variables
		}
		require.Equal(t, map[string]release.Value{"replicas": {Literal: int64(7)}, "region": {Literal: "eu-prod"},
			"db": {Sensitive: &release.SecretRef{Ciphertext: "v1:SECRETCIPHER"}}}, vars("prod", "c1"), "resource, then set")
		require.Equal(t, map[string]release.Value{"replicas": {Literal: int64(2)}, "region": {Literal: "default"}}, vars("staging", "c2"),
			"deployment value, then default")
		before := vars("dev", "c1")

		res, err = s.Resources().Get(ctx, "c1")
		require.NoError(t, err)
		res.Value.Variables = map[string]release.Value{"replicas": {Literal: 8}}
		_, err = s.Resources().Put(ctx, res.Value, res.Version)
		require.NoError(t, err)
		require.NoError(t, h.chain.EvaluateTargets(ctx, target("dev", "c1")))
		h.drain()
		require.NotEqual(t, before, vars("dev", "c1"))
		require.Equal(t, release.Value{Literal: int64(8)}, vars("dev", "c1")["replicas"])
		require.NotContains(t, logs.String(), "SECRETCIPHER", "sensitive values are never logged")
	})
}

// TestScenarioRelations: a reference variable resolves, per target, to the
// field of the resource its relationship rule relates the target's
// resource to (each cluster to its own network), batched or not; a
// cluster with no related network has the variable unresolved.
func TestScenarioRelations(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		ctx, s := h.ctx, h.store
		for id, net := range map[string]string{"c1": "net-eu", "c2": "net-none"} {
			res, err := s.Resources().Get(ctx, id)
			require.NoError(t, err)
			res.Value.Metadata = map[string]string{"network": net}
			_, err = s.Resources().Put(ctx, res.Value, res.Version)
			require.NoError(t, err)
		}
		_, err := s.Resources().Put(ctx, release.Resource{ID: "net-eu", WorkspaceID: "ws", Kind: "network", Identifier: "net-eu", Name: "net-eu",
			Config: map[string]any{"cidr": "10.1.0.0/16"}}, 0)
		require.NoError(t, err)
		_, err = s.RelationshipRules().Put(ctx, release.RelationshipRule{ID: "cluster-network", WorkspaceID: "ws", Name: "network",
			Match: `from.metadata.network == to.id && to.kind == "network"`}, 0)
		require.NoError(t, err)
		dep, err := s.Deployments().Get(ctx, "api")
		require.NoError(t, err)
		dep.Value.Variables = []release.DeploymentVariable{{Key: "cidr",
			Default: &release.Value{Reference: &release.Reference{Relation: "network", Path: []string{"config", "cidr"}}}}}
		_, err = s.Deployments().Put(ctx, dep.Value, dep.Version)
		require.NoError(t, err)
		h.version("v1")
		h.drain()
		for _, env := range []string{"dev", "staging", "prod"} {
			d, err := s.DesiredGet(ctx, target(env, "c1"))
			require.NoError(t, err)
			rel, err := s.ReleaseGet(ctx, d.ReleaseID)
			require.NoError(t, err)
			require.Equal(t, map[string]release.Value{"cidr": {Literal: "10.1.0.0/16"}}, rel.Variables, env)
			d, err = s.DesiredGet(ctx, target(env, "c2"))
			require.NoError(t, err)
			rel, err = s.ReleaseGet(ctx, d.ReleaseID)
			require.NoError(t, err)
			require.Empty(t, rel.Variables, "%s: c2 has no related network", env)
		}
		ex, err := h.chain.Explain(ctx, target("prod", "c2"), 1)
		require.NoError(t, err)
		require.Equal(t, []release.Relation{{Variable: "cidr", Reference: "network", Path: []string{"config", "cidr"},
			Unresolved: `no resource is related to c2 as "network"`}}, ex.Relations)
	})
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestScenarioForceDeploy: forcing an older version on prod bypasses the
// approval and progression there, waits for the target's active job, is
// explained, and deleting the force lets the policies decide again.
func TestScenarioForceDeploy(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		progressionPolicies(h, false)
		h.drain()
		h.version("v1")
		h.drain()
		h.requireRunning("v1", "dev")
		h.requireRunning("", "prod")

		// dev runs v1 (active); v2 appears; force v1... on prod: no job yet
		// there, so it dispatches at once despite approval and progression.
		h.version("v2")
		sk, err := h.chain.ForceDeploy(h.ctx, release.PolicySkip{VersionID: "v1", EnvironmentID: "prod", Reason: "hotfix", CreatedBy: "alice"})
		require.NoError(t, err)
		h.drain()
		h.requireRunning("v1", "prod")
		ex, err := h.chain.Explain(h.ctx, target("prod", "c1"), 1)
		require.NoError(t, err)
		require.Equal(t, "force-deployed v1 by alice: hotfix", ex.Forced)

		// Force v2 on dev, where v1's job is still active: it waits.
		_, err = h.chain.ForceDeploy(h.ctx, release.PolicySkip{VersionID: "v2", EnvironmentID: "dev", ResourceID: "c1", CreatedBy: "bob"})
		require.NoError(t, err)
		h.drain()
		require.Equal(t, "v1", h.running("dev", "c1"), "the forced version waits for the active job")
		h.finish(release.JobSuccessful, "dev")
		h.drain()
		require.Equal(t, "v2", h.running("dev", "c1"), "then it deploys")

		// Ending the prod force hands prod back to the policies: v2 is not
		// approved and staging has nothing, so prod gets no new job.
		require.NoError(t, h.store.PolicySkipDelete(h.ctx, sk.ID))
		require.NoError(t, h.chain.EvaluateTargets(h.ctx, target("prod", "c1")))
		h.drain()
		d, err := h.store.DesiredGet(h.ctx, target("prod", "c1"))
		require.NoError(t, err)
		require.Empty(t, d.ReleaseID, "without the force the policies hold prod back")
		require.Len(t, h.jobs("prod", "c1"), 1)

		_, err = h.chain.ForceDeploy(h.ctx, release.PolicySkip{VersionID: "nope", CreatedBy: "bob"})
		require.ErrorIs(t, err, ports.ErrNotFound)

		// Names that resolve to nothing, or no user, are refused as
		// invalid input before anything is stored.
		for _, bad := range []release.PolicySkip{
			{VersionID: "v2", ResourceID: "no-such-cluster", CreatedBy: "bob"},
			{VersionID: "v2"},
		} {
			_, err = h.chain.ForceDeploy(h.ctx, bad)
			require.ErrorIs(t, err, release.ErrInvalid, "%+v", bad)
		}
		// An environment is resolved within the version's system: none there
		// is not found.
		_, err = h.chain.ForceDeploy(h.ctx, release.PolicySkip{VersionID: "v2", EnvironmentID: "nowhere", CreatedBy: "bob"})
		require.ErrorIs(t, err, ports.ErrNotFound)
		_, err = h.chain.Approve(h.ctx, release.Approval{VersionID: "v2", EnvironmentID: "nowhere", User: "bob"})
		require.ErrorIs(t, err, ports.ErrNotFound)
	})
}

// TestScenarioJobTimeout: a job still active past the deployment's job
// timeout ends as a failure and its agent is asked to stop it; a job that
// ended in time is left alone, and the target takes the next version.
func TestScenarioJobTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h *harness) {
		dep, err := h.store.Deployments().Get(h.ctx, "api")
		require.NoError(t, err)
		dep.Value.JobTimeoutSeconds = 600
		_, err = h.store.Deployments().Put(h.ctx, dep.Value, dep.Version)
		require.NoError(t, err)
		h.version("v1")
		h.drain()
		h.requireRunning("v1", "dev", "staging", "prod")
		h.finish(release.JobSuccessful, "dev")
		h.drain()

		h.clock.Advance(9 * time.Minute) // 10 minutes after the dispatch
		h.drain()
		for _, env := range []string{"dev", "staging", "prod"} {
			for _, res := range []string{"c1", "c2"} {
				rows := h.jobs(env, res)
				require.Len(t, rows, 1, "%s/%s: no job is dispatched again", env, res)
				h.agent.mu.Lock()
				c, told := h.agent.cancelled[rows[0].ID]
				h.agent.mu.Unlock()
				if env == "dev" {
					require.Equal(t, release.JobSuccessful, rows[0].Status, "a job that ended in time is left alone")
					require.False(t, told)
					continue
				}
				require.Equal(t, release.JobFailure, rows[0].Status, "%s/%s", env, res)
				require.Equal(t, "timed out after 10m0s", rows[0].Message)
				require.True(t, told, "%s/%s: the agent is asked to stop the job", env, res)
				require.Equal(t, "fake/"+rows[0].ID, c.ExternalID)
			}
		}
		h.version("v2")
		h.drain()
		h.requireRunning("v2", "dev", "staging", "prod")
	})
}

// leasingFake is the fake agent holding a 30 s lease on its jobs, as an
// in-process agent does (ports.JobLeaser).
type leasingFake struct{ *fakeAgent }

func (leasingFake) JobLease() time.Duration { return 30 * time.Second }

// TestScenarioLeasedJobLostWhenItsLeaseRunsOut: the job of an in-process
// agent holds a lease from its dispatch; renewals (non-terminal reports
// with a lease) extend it; a job whose lease ran out unrenewed (its
// process died) is ended as a failure and its agent asked to stop it,
// without any job timeout configured, and the target takes the next
// version.
func TestScenarioLeasedJobLostWhenItsLeaseRunsOut(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, h *harness) {
		h.chain.Agents["fake"] = leasingFake{h.agent}
		h.version("v1")
		dispatched := h.clock.Now()
		h.drain()
		h.requireRunning("v1", "dev", "staging", "prod")
		kept := h.jobs("dev", "c1")[0]
		require.Equal(t, dispatched.Add(30*time.Second), kept.LeaseUntil, "the lease runs from the dispatch")

		h.clock.Advance(20 * time.Second)
		require.NoError(t, h.chain.ReportJob(h.ctx, ports.JobReport{JobID: kept.ID, Status: release.JobInProgress, Lease: 30 * time.Second}))
		require.Equal(t, h.clock.Now().Add(30*time.Second), h.jobs("dev", "c1")[0].LeaseUntil, "a renewal extends it")

		h.clock.Advance(11 * time.Second) // 31 s after the dispatch
		h.drain()
		for _, env := range []string{"dev", "staging", "prod"} {
			for _, res := range []string{"c1", "c2"} {
				rows := h.jobs(env, res)
				require.Len(t, rows, 1, "%s/%s", env, res)
				if env == "dev" && res == "c1" {
					require.Equal(t, release.JobInProgress, rows[0].Status, "a renewed lease keeps the job")
					continue
				}
				require.Equal(t, release.JobFailure, rows[0].Status, "%s/%s", env, res)
				require.Contains(t, rows[0].Message, "lost: its agent's lease ran out")
				h.agent.mu.Lock()
				_, told := h.agent.cancelled[rows[0].ID]
				h.agent.mu.Unlock()
				require.True(t, told, "%s/%s: the agent is asked to stop the job", env, res)
			}
		}

		h.clock.Advance(20 * time.Second) // past the renewed lease
		h.drain()
		require.Equal(t, release.JobFailure, h.jobs("dev", "c1")[0].Status)

		h.version("v2")
		h.drain()
		h.requireRunning("v2", "dev", "staging", "prod")
	})
}
