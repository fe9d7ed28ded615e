package main

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"time"

	"github.com/reconcilerhq/reconciler/adapters/httphook"
	"github.com/reconcilerhq/reconciler/adapters/testrunner"
	"github.com/reconcilerhq/reconciler/adapters/verifiers"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/engine/pull"
	"github.com/reconcilerhq/reconciler/internal/tracing"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// releaseRuntime is the release chain and the workflow controller wired
// together with the built-in agents: the test runner reports into the
// chain or the workflow that dispatched its job, workflow tasks use the
// chain's agents and verifiers, agents of type api report through the
// HTTP API, and deployments with a workflow template
// run each release as a workflow.
type releaseRuntime struct {
	chain    *chain.Chain
	flows    *flow.Controller
	triggers *flow.Triggers // templates' hooks and schedules
	runner   *testrunner.Agent
	ext      *integrations
	// report routes an agent's report to the chain or the workflows.
	report ports.JobReporter
}

// newReleaseRuntime wires the runtime over the stores; secrets may be nil;
// out's guard decides which addresses the job agents, verifiers and webhook
// tasks may reach (nil: public ones only) and its Kubernetes limits where
// kubernetes-job runs pods (nil: the defaults); runner configures the test
// runner.
func newReleaseRuntime(releases ports.ReleaseStore, workflows ports.WorkflowStore, catalog ports.Catalog, q ports.Queue,
	clock ports.Clock, log *slog.Logger, secrets ports.SecretResolver, out *outboundOptions, runner ...testrunner.Option) *releaseRuntime {
	guard := out.netGuard()
	rt := &releaseRuntime{}
	report := ports.JobReporterFunc(func(ctx context.Context, r ports.JobReport) error {
		if flow.IsJobID(r.JobID) {
			return rt.flows.ReportJob(ctx, r)
		}
		return rt.chain.ReportJob(ctx, r)
	})
	rt.report = report
	rt.runner = testrunner.New(report, clock, append([]testrunner.Option{testrunner.WithLogger(log)}, runner...)...)
	rt.ext = newIntegrations(report, secrets, log, rt.runner.JobLease(), guard, out.kubeLimits()) // serve: --lock, as the test runner's
	rt.chain = &chain.Chain{Store: releases, Queue: q, Clock: clock, Logger: log,
		Agents: map[string]ports.JobAgent{testrunner.Type: rt.runner,
			release.PullAgentType: pull.NewAgent(release.PullAgentType), release.APIAgentType: pull.NewAgent(release.APIAgentType)},
		Verifiers: map[string]ports.Verifier{verifiers.SleepType: verifiers.Sleep{}, verifiers.ScriptedType: verifiers.Scripted{}}}
	maps.Copy(rt.chain.Agents, rt.ext.agents)
	maps.Copy(rt.chain.Verifiers, rt.ext.verifiers)
	rt.flows = &flow.Controller{Store: workflows, Queue: q, Releases: releases, Catalog: catalog, Jobs: rt.chain,
		Clock: clock, Logger: log, Agents: maps.Clone(rt.chain.Agents), Verifiers: rt.chain.Verifiers,
		Webhooks: httphook.Client{HTTP: &http.Client{Timeout: 30 * time.Second, Transport: tracing.Transport(guard.Transport())}}, Secrets: secrets,
		JobDestination: destination}
	rt.chain.Agents[release.WorkflowAgentType] = rt.flows.ReleaseAgent()
	if jobs, ok := workflows.(ports.WorkflowJobs); ok {
		// A workflow task's job on a pull agent is stored for its takers.
		for _, typ := range []string{release.PullAgentType, release.APIAgentType} {
			rt.flows.Agents[typ] = pull.NewWorkflowAgent(typ, jobs, workflows, releases, clock)
		}
	}
	rt.triggers = &flow.Triggers{Flow: rt.flows, Events: releases}
	return rt
}

// pullService serves pull agents' takes, heartbeats and reports over be
// (nil when its release store hands out no jobs).
func (rt *releaseRuntime) pullService(be *backend, clock ports.Clock) *pull.Service {
	taker, ok := be.releases.(ports.JobTaker)
	if !ok {
		return nil
	}
	jobs, _ := be.workflows.(ports.WorkflowJobs)
	return &pull.Service{Store: be.releases, Taker: taker, Tx: be.tx, Queue: be.queue, Reporter: rt.report, Workflows: jobs, Clock: clock}
}

// register registers the chain's and the workflows' kinds on eng.
func (rt *releaseRuntime) register(eng *engine.Engine, concurrency int) {
	rt.chain.Register(eng, concurrency)
	rt.flows.Register(eng, concurrency)
	rt.triggers.Register(eng)
}

// resyncSources are the chain's, the workflows' and the triggers' parts of
// the periodic sweep (the first sweep, at start, enqueues the triggers).
func (rt *releaseRuntime) resyncSources() []engine.ResyncSource {
	return []engine.ResyncSource{rt.chain.ResyncSource(), rt.flows.ResyncSource(), rt.triggers.ResyncSource()}
}

// close stops the test runner's pending reports and the external agents'
// followers.
func (rt *releaseRuntime) close() {
	rt.runner.Close()
	rt.ext.close()
}
