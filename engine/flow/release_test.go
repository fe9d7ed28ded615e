package flow_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/workflow"
)

// releaseWorld is the release chain and the workflow controller on one
// engine, over one adapter, with a job agent the test ends jobs of.
type releaseWorld struct {
	t     *testing.T
	ctx   context.Context
	clock *porttest.FakeClock
	rel   ports.ReleaseStore
	wfs   ports.WorkflowStore
	cat   ports.Catalog
	q     ports.Queue
	chain *chain.Chain
	flows *flow.Controller
	eng   *engine.Engine
	agent *recordingAgent
	logs  *lockedLog
}

// lockedLog is a log sink safe for concurrent writers.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// recordingAgent records the workflow jobs it is handed; the test ends them.
type recordingAgent struct {
	mu   sync.Mutex
	jobs []ports.JobDispatch
}

func (a *recordingAgent) Type() string { return "script" }

func (a *recordingAgent) Dispatch(_ context.Context, d ports.JobDispatch) (ports.JobDispatchResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.jobs = append(a.jobs, d)
	return ports.JobDispatchResult{ExternalID: "x/" + d.Job.ID, Status: release.JobInProgress}, nil
}

// sent returns the jobs dispatched so far.
func (a *recordingAgent) sent() []ports.JobDispatch {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]ports.JobDispatch(nil), a.jobs...)
}

func newReleaseWorld(t *testing.T, backend string) *releaseWorld {
	clock := porttest.NewFakeClock(time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC))
	w := &releaseWorld{t: t, ctx: t.Context(), clock: clock, agent: &recordingAgent{}}
	switch backend {
	case "memory":
		w.rel, w.wfs, w.cat, w.q = memory.NewReleaseStore(clock), memory.NewWorkflowStore(), memory.NewCatalog(clock), memory.NewQueue(clock)
	case "postgres":
		dsn, _ := pgtest.Schema(t)
		db, err := postgres.Open(w.ctx, dsn, postgres.WithMaxConns(4))
		require.NoError(t, err)
		t.Cleanup(db.Close)
		require.NoError(t, db.MigrateUp(w.ctx))
		q, cat := postgres.NewQueue(db, clock), postgres.NewCatalog(db, clock)
		t.Cleanup(q.Close)
		t.Cleanup(cat.Close)
		w.rel, w.wfs, w.cat, w.q = postgres.NewReleaseStore(db, clock), postgres.NewWorkflowStore(db), cat, q
	}
	w.logs = &lockedLog{}
	log := slog.New(slog.NewTextHandler(w.logs, nil))
	w.chain = &chain.Chain{Store: w.rel, Queue: w.q, Clock: clock, Logger: log, Agents: map[string]ports.JobAgent{}}
	w.flows = &flow.Controller{Store: w.wfs, Queue: w.q, Releases: w.rel, Catalog: w.cat, Jobs: w.chain,
		Agents: map[string]ports.JobAgent{"script": w.agent}, Clock: clock, Logger: log}
	w.chain.Agents[release.WorkflowAgentType] = w.flows.ReleaseAgent()
	w.eng = engine.New(w.q, engine.Options{Clock: clock, Logger: log, Owner: "test"})
	w.chain.Register(w.eng, 1)
	w.flows.Register(w.eng, 1)
	w.seed()
	return w
}

// seed stores workspace ws with system shop (staging, prod), clusters c1
// and c2, the job agent ci and the deployment api, which runs the
// workflow template "ship".
func (w *releaseWorld) seed() {
	ctx, s, r := w.ctx, w.rel, require.New(w.t)
	_, err := s.Workspaces().Put(ctx, release.Workspace{ID: "ws", Name: "acme"}, 0)
	r.NoError(err)
	_, err = s.Systems().Put(ctx, release.System{ID: "shop", WorkspaceID: "ws", Name: "shop"}, 0)
	r.NoError(err)
	for _, name := range []string{"staging", "prod"} {
		_, err = s.Environments().Put(ctx, release.Environment{ID: name, SystemID: "shop", Name: name, ResourceSelector: "true"}, 0)
		r.NoError(err)
	}
	for _, id := range []string{"c1", "c2"} {
		_, err = s.Resources().Put(ctx, release.Resource{ID: id, WorkspaceID: "ws", Kind: "cluster", Identifier: id, Name: id,
			Config: map[string]any{"namespace": "ns-" + id}}, 0)
		r.NoError(err)
	}
	_, err = s.JobAgents().Put(ctx, release.JobAgent{ID: "ci", Name: "ci", Type: "script"}, 0)
	r.NoError(err)
	_, err = s.Deployments().Put(ctx, release.Deployment{ID: "api", SystemID: "shop", Name: "api", Slug: "api",
		ResourceSelector: `resource.kind == "cluster"`, WorkflowTemplate: &release.WorkflowTemplateRef{Name: "ship"},
		Variables: []release.DeploymentVariable{{Key: "replicas", Default: &release.Value{Literal: 3.0}}}}, 0)
	r.NoError(err)
	diff, err := w.chain.SyncTargets(ctx, "shop")
	r.NoError(err)
	r.Len(diff.Added, 4)
}

// publish stores and publishes a revision of a template under its catalog
// name.
func (w *releaseWorld) publish(obj, doc string) ports.Revision {
	w.t.Helper()
	rev := publishOn(w.t, w.cat, w.clock, obj, doc)
	w.clock.Advance(time.Second)
	return rev
}

// shipTemplate is a two-task template: deploy, then smoke over every
// environment of the system; marker tells revisions apart.
func shipTemplate(meta, marker string) string {
	return `{"apiVersion": "reconciler.dev/v1", "kind": "WorkflowTemplate", "metadata": ` + meta + `,
 "spec": {"parameters": [
   {"name": "image", "type": "string", "required": true},
   {"name": "replicas", "type": "number"},
   {"name": "envs", "type": "matrix", "source": {"kind": "environment", "selector": "environment.name != ''"}}],
  "tasks": [
   {"name": "deploy", "type": "job", "jobAgentRef": "ci", "config": {"marker": "` + marker + `",
     "image": "{{workflow.parameters.image}}", "replicas": "{{workflow.parameters.replicas}}",
     "tag": "{{release.version.tag}}", "env": "{{release.environment.name}}", "cluster": "{{release.resource.name}}",
     "namespace": "{{release.resource.config.namespace}}"}},
   {"name": "smoke", "type": "job", "jobAgentRef": "ci", "dependencies": ["deploy"], "matrix": "{{workflow.parameters.envs}}",
     "config": {"marker": "` + marker + `", "probe": "{{matrix.environment.name}}"}}]}}`
}

// drain runs every due pass.
func (w *releaseWorld) drain() {
	w.t.Helper()
	_, err := w.eng.Drain(w.ctx)
	require.NoError(w.t, err)
}

// finishJobs reports every dispatched, unreported workflow job with the
// status pick gives it, then drains; it returns how many it reported.
func (w *releaseWorld) finishJobs(reported map[string]bool, pick func(d ports.JobDispatch) release.JobStatus) int {
	w.t.Helper()
	n := 0
	for _, d := range w.agent.sent() {
		if reported[d.Job.ID] {
			continue
		}
		reported[d.Job.ID] = true
		n++
		require.NoError(w.t, w.flows.ReportJob(w.ctx, ports.JobReport{JobID: d.Job.ID, Status: pick(d)}))
	}
	w.drain()
	return n
}

// chainJobs returns the chain's jobs of the api targets by target key.
func (w *releaseWorld) chainJobs() map[string][]ports.JobRow {
	w.t.Helper()
	out := map[string][]ports.JobRow{}
	for _, env := range []string{"staging", "prod"} {
		for _, res := range []string{"c1", "c2"} {
			t := release.ReleaseTarget{DeploymentID: "api", EnvironmentID: env, ResourceID: res}
			f, err := w.rel.TargetFactsGet(w.ctx, t, 0)
			require.NoError(w.t, err)
			out[t.Key()] = f.Jobs
		}
	}
	return out
}

func TestReleaseTriggeredWorkflows(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			w := newReleaseWorld(t, backend)
			// The system's template wins over the workspace's.
			w.publish("ship", shipTemplate(`{"name": "ship"}`, "workspace"))
			sysRev := w.publish("ship.system.shop", shipTemplate(`{"name": "ship", "scope": "system"}`, "system-r1"))
			require.NoError(t, w.chain.CreateVersion(w.ctx, release.DeploymentVersion{ID: "v1", DeploymentID: "api", Tag: "1.0",
				Config: map[string]any{"image": "api:1.0"}}))
			w.drain()

			jobs := w.chainJobs()
			for key, js := range jobs {
				require.Len(t, js, 1, key)
				require.Equal(t, release.JobInProgress, js[0].Status, key)
				require.Equal(t, release.WorkflowAgentType, js[0].JobAgentID, key)
				require.Equal(t, flow.ReleaseWorkflowID(js[0].ID), js[0].ExternalID, "the job's external id is its workflow")
			}
			sent := w.agent.sent()
			require.Len(t, sent, 4, "one deploy job per target")
			for _, d := range sent {
				cfg := d.Job.JobAgentConfig
				require.Equal(t, "system-r1", cfg["marker"], "the system template is the most specific")
				require.Equal(t, "api:1.0", cfg["image"], "parameters come from the version's config")
				require.EqualValues(t, 3, cfg["replicas"], "and from the deployment's variables")
				require.Equal(t, "1.0", cfg["tag"])
				require.Equal(t, "ns-"+cfg["cluster"].(string), cfg["namespace"])
				require.Contains(t, []any{"staging", "prod"}, cfg["env"])
			}

			// A newer revision does not change the running workflows.
			w.publish("ship.system.shop", shipTemplate(`{"name": "ship", "scope": "system"}`, "system-r2"))
			reported := map[string]bool{}
			w.finishJobs(reported, func(ports.JobDispatch) release.JobStatus { return release.JobSuccessful })
			sent = w.agent.sent()
			require.Len(t, sent, 4+4*2, "each workflow's smoke fans out over both environments")
			for _, d := range sent[4:] {
				require.Equal(t, "system-r1", d.Job.JobAgentConfig["marker"], "a workflow keeps the revision it started with")
			}
			// The decision log names the task runs each pass wrote: the
			// task and its matrix item.
			require.Regexp(t, `msg=workflow.decision kind=workflow id=\S+ template=ship.system.shop phase=Running created=2 dispatched=0 finished=0 reason=\S+ duration=\S+ tasks=smoke.0,smoke.1 target=api:`, w.logs.String())
			w.finishJobs(reported, func(ports.JobDispatch) release.JobStatus { return release.JobSuccessful })

			for key, js := range w.chainJobs() {
				require.Len(t, js, 1, key)
				require.Equal(t, release.JobSuccessful, js[0].Status, "%s: %s", key, js[0].Message)
				wf, err := w.wfs.WorkflowGet(w.ctx, js[0].ExternalID)
				require.NoError(t, err)
				require.Equal(t, workflow.WorkflowSucceeded, wf.Phase)
				require.Equal(t, "ship.system.shop", wf.TemplateName)
				require.Equal(t, sysRev.Revision, wf.TemplateRevision)
				require.Equal(t, js[0].ID, wf.JobID)
				require.Equal(t, key, wf.TargetKey)
			}

			// v2 starts from the newest revision; a failed task fails the
			// release's job.
			require.NoError(t, w.chain.CreateVersion(w.ctx, release.DeploymentVersion{ID: "v2", DeploymentID: "api", Tag: "2.0",
				Config: map[string]any{"image": "api:2.0"}}))
			w.drain()
			for w.finishJobs(reported, func(d ports.JobDispatch) release.JobStatus {
				require.Equal(t, "system-r2", d.Job.JobAgentConfig["marker"])
				if d.Job.JobAgentConfig["probe"] == "prod" {
					return release.JobFailure
				}
				return release.JobSuccessful
			}) > 0 {
			}
			for key, js := range w.chainJobs() {
				require.Len(t, js, 2, key)
				latest := js[0]
				if latest.ReleaseID == js[1].ReleaseID || js[1].CreatedAt.After(latest.CreatedAt) {
					latest = js[1]
				}
				require.Equal(t, release.JobFailure, latest.Status, key)
				require.Contains(t, latest.Message, "Failed", key)
			}
		})
	}
}

func TestReleaseWorkflowWithoutTemplateEndsTheJob(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, "memory")
	// Only a template scoped to another system exists.
	w.publish("ship.system.other", shipTemplate(`{"name": "ship", "scope": "system"}`, "elsewhere"))
	require.NoError(t, w.chain.CreateVersion(w.ctx, release.DeploymentVersion{ID: "v1", DeploymentID: "api", Tag: "1.0",
		Config: map[string]any{"image": "api:1.0"}}))
	w.drain()
	for key, js := range w.chainJobs() {
		require.Len(t, js, 1, key)
		require.Equal(t, release.JobInvalidIntegration, js[0].Status, key)
		require.Contains(t, js[0].Message, `template "ship"`, key)
	}
	require.Empty(t, w.agent.sent())

	// Parameters the template refuses end the job too, naming the problem.
	w.publish("ship", shipTemplate(`{"name": "ship"}`, "workspace"))
	require.NoError(t, w.chain.CreateVersion(w.ctx, release.DeploymentVersion{ID: "v2", DeploymentID: "api", Tag: "2.0"}))
	w.drain()
	for key, js := range w.chainJobs() {
		var msgs []string
		for _, j := range js {
			msgs = append(msgs, string(j.Status)+": "+j.Message)
		}
		require.Contains(t, strings.Join(msgs, "\n"), "invalidIntegration: workflow_template: ship revision 1:", key)
		require.Contains(t, strings.Join(msgs, "\n"), "image", key)
	}
	require.Empty(t, w.agent.sent())
}

// flakyReporter fails its first calls, as a chain whose store is briefly
// unreachable would.
type flakyReporter struct {
	mu    sync.Mutex
	fails int
	next  ports.JobReporter
}

func (f *flakyReporter) ReportJob(ctx context.Context, r ports.JobReport) error {
	f.mu.Lock()
	fail := f.fails > 0
	f.fails--
	f.mu.Unlock()
	if fail {
		return fmt.Errorf("report %s: connection reset", r.JobID)
	}
	return f.next.ReportJob(ctx, r)
}

// TestReleaseReportSurvivesFailure: a workflow that ended while its report
// failed is reported by a later pass; nothing is left in progress.
func TestReleaseReportSurvivesFailure(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, "memory")
	w.flows.Jobs = &flakyReporter{fails: 4, next: w.chain}
	w.publish("ship", shipTemplate(`{"name": "ship"}`, "workspace"))
	require.NoError(t, w.chain.CreateVersion(w.ctx, release.DeploymentVersion{ID: "v1", DeploymentID: "api", Tag: "1.0",
		Config: map[string]any{"image": "api:1.0"}}))
	w.drain()
	reported := map[string]bool{}
	for w.finishJobs(reported, func(ports.JobDispatch) release.JobStatus { return release.JobSuccessful }) > 0 {
	}
	inProgress := 0
	for _, js := range w.chainJobs() {
		if js[0].Status == release.JobInProgress {
			inProgress++
		}
	}
	require.Equal(t, 4, inProgress, "every first report failed")
	w.clock.Advance(10 * time.Minute) // past the retry backoff
	w.drain()
	for key, js := range w.chainJobs() {
		require.Equal(t, release.JobSuccessful, js[0].Status, key)
	}
}

// TestReleaseJobTimeoutCancelsItsWorkflow: when the chain times out a
// release's job, the job's workflow is cancelled, and the workflow's end
// does not overwrite the job's failure.
func TestReleaseJobTimeoutCancelsItsWorkflow(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, "memory")
	dep, err := w.rel.Deployments().Get(w.ctx, "api")
	require.NoError(t, err)
	dep.Value.JobTimeoutSeconds = 300
	_, err = w.rel.Deployments().Put(w.ctx, dep.Value, dep.Version)
	require.NoError(t, err)
	w.publish("ship", shipTemplate(`{"name": "ship"}`, "workspace"))
	require.NoError(t, w.chain.CreateVersion(w.ctx, release.DeploymentVersion{ID: "v1", DeploymentID: "api", Tag: "1.0",
		Config: map[string]any{"image": "api:1.0"}}))
	w.drain()
	require.Len(t, w.agent.sent(), 4, "deploy runs on every target; nobody reports")
	w.clock.Advance(5 * time.Minute)
	w.drain()
	for key, js := range w.chainJobs() {
		require.Len(t, js, 1, key)
		require.Equal(t, release.JobFailure, js[0].Status, key)
		require.Equal(t, "timed out after 5m0s", js[0].Message, key)
		wf, err := w.wfs.WorkflowGet(w.ctx, js[0].ExternalID)
		require.NoError(t, err)
		require.Equal(t, workflow.WorkflowCancelled, wf.Phase, key)
	}
}

// TestReleaseApprovalSaysWhatItApproves: an approval task of a
// release-triggered workflow shows, while it waits, the version and the
// environment it releases to and the task's message, and after, who
// approved what (issue 29: approvers could not see what they approve).
func TestReleaseApprovalSaysWhatItApproves(t *testing.T) {
	t.Parallel()
	w := newReleaseWorld(t, "memory")
	w.publish("ship", `{"apiVersion": "reconciler.dev/v1", "kind": "WorkflowTemplate", "metadata": {"name": "ship"},
 "spec": {"tasks": [{"name": "gate", "type": "approval", "approval": {"message": "ship {{release.version.tag}}?"}}]}}`)
	require.NoError(t, w.chain.CreateVersion(w.ctx, release.DeploymentVersion{ID: "v1", DeploymentID: "api", Tag: "1.0"}))
	w.drain()
	js := w.chainJobs()["api:prod:c1"]
	require.Len(t, js, 1)
	id := js[0].ExternalID
	r, err := w.wfs.TaskRunGet(w.ctx, id, "gate")
	require.NoError(t, err)
	require.Equal(t, "waiting for approval (0 of 1) of version 1.0 (v1) to environment prod (prod), target api:prod:c1: ship 1.0?", r.Message)
	require.NoError(t, w.flows.Approve(w.ctx, id, "gate", "alice"))
	w.drain()
	r, err = w.wfs.TaskRunGet(w.ctx, id, "gate")
	require.NoError(t, err)
	require.Equal(t, workflow.TaskSucceeded, r.Phase)
	require.Equal(t, "approved by [alice]: ship 1.0?", r.Message)
}
