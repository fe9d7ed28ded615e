package flow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/ports/porttest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
	"github.com/reconcilerhq/reconciler/workflow"
)

// hookTemplate is a template with one long wait task (its workflows stay
// unfinished, so they are easy to count) and the given spec fields.
func hookTemplate(name, meta, spec string) string {
	if meta == "" {
		meta = `{"name": "` + name + `"}`
	}
	return `{"apiVersion": "reconciler.dev/v1", "kind": "WorkflowTemplate", "metadata": ` + meta + `,
 "spec": {"parameters": [{"name": "tag", "type": "string"}, {"name": "why", "type": "string", "default": ""}],
  "tasks": [{"name": "hold", "type": "wait", "wait": {"duration": "240h"}}]` + spec + `}}`
}

// triggered lists the workflows a template's trigger started, by id.
func triggered(t *testing.T, ctx context.Context, wfs ports.WorkflowStore, kind, template string) []ports.WorkflowRecord {
	t.Helper()
	all, err := wfs.WorkflowList(ctx, "", 0)
	require.NoError(t, err)
	var out []ports.WorkflowRecord
	for _, w := range all {
		if w.Trigger != nil && w.Trigger.Key == ports.TriggerKey(kind, template) {
			out = append(out, w)
		}
	}
	return out
}

// triggeredIDs is triggered's ids.
func triggeredIDs(t *testing.T, ctx context.Context, wfs ports.WorkflowStore, kind, template string) []string {
	t.Helper()
	out := []string{}
	for _, w := range triggered(t, ctx, wfs, kind, template) {
		out = append(out, w.ID)
	}
	return out
}

// settle lets the trigger processor poll until nothing is left to do.
func (w *releaseWorld) settle() {
	w.t.Helper()
	for range 3 {
		w.clock.Advance(3 * time.Second)
		w.drain()
	}
}

// TestHookTriggersStartWorkflows runs the chain with hook templates: each
// release the chain creates and each job it fails starts exactly the
// workflows whose hooks match (counted), a false filter or another scope
// starts none, and the workflows read the event in their parameters and
// as release.*.
func TestHookTriggersStartWorkflows(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			w := newReleaseWorld(t, backend)
			tr := &flow.Triggers{Flow: w.flows, Events: w.rel}
			tr.Register(w.eng)
			require.NoError(t, tr.Start(w.ctx))
			w.publish("ship", shipTemplate(`{"name": "ship"}`, "workspace"))
			w.publish("on-prod-release", hookTemplate("on-prod-release", "", `, "hooks": [
				{"event": "release.created", "filter": "event.environment.name == \"prod\"",
				 "parameters": {"tag": "{{event.version.tag}}", "why": "{{event.deployment.name}} on {{event.resource.name}}"}}]`))
			w.publish("never", hookTemplate("never", "", `, "hooks": [{"event": "release.created", "filter": "event.deployment.name == \"nope\""}]`))
			w.publish("other-system", hookTemplate("other-system", `{"name": "other-system", "scope": "system", "scopeId": "other"}`,
				`, "hooks": [{"event": "release.created"}]`))
			w.publish("shop-failures", hookTemplate("shop-failures", `{"name": "shop-failures", "scope": "system", "scopeId": "shop"}`,
				`, "hooks": [{"event": "job.failed", "filter": "event.job.status == \"failure\"", "parameters": {"why": "{{event.job.message}}"}}]`))
			w.publish("rollout-failures", hookTemplate("rollout-failures", `{"name": "rollout-failures", "scope": "system", "scopeId": "shop"}`,
				`, "hooks": [{"event": "release.failed", "parameters": {"why": "{{event.job.status}}"}}]`))
			w.publish("edge", hookTemplate("edge", "", `, "hooks": [
				{"event": "resource.created", "filter": "event.resource.name == \"edge-9\"", "parameters": {"why": "{{event.resource.kind}}"}},
				{"event": "resource.updated", "filter": "event.resource.id == \"edge-9\""},
				{"event": "resource.deleted", "filter": "event.resource.id == \"edge-9\"", "parameters": {"why": "gone {{event.resource.id}}"}}]`))

			require.NoError(t, w.chain.CreateVersion(w.ctx, release.DeploymentVersion{ID: "v1", DeploymentID: "api", Tag: "1.0",
				Config: map[string]any{"image": "api:1.0"}}))
			w.drain()
			w.settle()

			prod := triggered(t, w.ctx, w.wfs, ports.TriggerEvent, "on-prod-release")
			require.Len(t, prod, 2, "one per release created in prod (c1, c2)")
			for _, wf := range prod {
				ev := wf.Trigger.Event
				require.Equal(t, workflow.EventReleaseCreated, ev.Type)
				require.Equal(t, flow.HookWorkflowID("on-prod-release", ev.Seq), wf.ID, "the id derives from template and event")
				require.Equal(t, "1.0", wf.Parameters["tag"], "parameters read the event")
				require.Equal(t, "api on "+ev.Target().ResourceID, wf.Parameters["why"])
				require.Equal(t, "prod", wf.Release["environment"].(map[string]any)["name"], "release.* is the event's release")
				require.Equal(t, ev.ReleaseID, wf.ReleaseID)
			}
			require.Empty(t, triggered(t, w.ctx, w.wfs, ports.TriggerEvent, "never"), "a false filter starts nothing")
			require.Empty(t, triggered(t, w.ctx, w.wfs, ports.TriggerEvent, "other-system"), "another system's template hears nothing")
			require.Empty(t, triggered(t, w.ctx, w.wfs, ports.TriggerEvent, "shop-failures"), "no job failed yet")

			// Every deploy task fails: the four release workflows fail,
			// so do their chain jobs: four job.failed events.
			reported := map[string]bool{}
			require.Equal(t, 4, w.finishJobs(reported, func(ports.JobDispatch) release.JobStatus { return release.JobFailure }))
			w.settle()
			failed := triggered(t, w.ctx, w.wfs, ports.TriggerEvent, "shop-failures")
			require.Len(t, failed, 4, "one per failed job")
			jobs := map[string]bool{}
			for _, wf := range failed {
				ev := wf.Trigger.Event
				require.Equal(t, workflow.EventJobFailed, ev.Type)
				require.Equal(t, release.JobFailure, ev.JobStatus)
				require.Contains(t, wf.Parameters["why"], "Failed")
				jobs[ev.JobID] = true
			}
			require.Len(t, jobs, 4, "four different jobs")
			require.Len(t, triggeredIDs(t, w.ctx, w.wfs, ports.TriggerEvent, "on-prod-release"), 2, "nothing started twice")
			rolled := triggered(t, w.ctx, w.wfs, ports.TriggerEvent, "rollout-failures")
			require.Len(t, rolled, 4, "one release.failed per failed job")
			for _, wf := range rolled {
				require.Equal(t, workflow.EventReleaseFailed, wf.Trigger.Event.Type)
				require.Equal(t, "failure", wf.Parameters["why"])
				require.True(t, jobs[wf.Trigger.Event.JobID], "the failed job's release")
			}

			// Resource events: a resource created, updated, deleted.
			require.Empty(t, triggered(t, w.ctx, w.wfs, ports.TriggerEvent, "edge"), "the filters kept the fixture's resources out")
			// Each is handled before the next write: a hook reads the
			// resource as it is when its event is handled.
			v, err := w.rel.Resources().Put(w.ctx, release.Resource{ID: "edge-9", WorkspaceID: "ws", Kind: "edge", Identifier: "edge-9", Name: "edge-9"}, 0)
			require.NoError(t, err)
			w.settle()
			v, err = w.rel.Resources().Put(w.ctx, release.Resource{ID: "edge-9", WorkspaceID: "ws", Kind: "edge", Identifier: "edge-9", Name: "edge-nine"}, v)
			require.NoError(t, err)
			w.settle()
			require.NoError(t, w.rel.Resources().Delete(w.ctx, "edge-9", v))
			w.settle()
			edge := triggered(t, w.ctx, w.wfs, ports.TriggerEvent, "edge")
			require.Len(t, edge, 3, "created, updated, deleted")
			byType := map[workflow.EventType]ports.WorkflowRecord{}
			for _, wf := range edge {
				require.Equal(t, "edge-9", wf.Trigger.Event.ResourceID)
				byType[wf.Trigger.Event.Type] = wf
			}
			require.Equal(t, "edge", byType[workflow.EventResourceCreated].Parameters["why"], "the event reads the resource")
			require.Contains(t, byType, workflow.EventResourceUpdated)
			require.Equal(t, "gone edge-9", byType[workflow.EventResourceDeleted].Parameters["why"], "a deleted resource is known by its id")
			pending, err := w.rel.EventsPending(w.ctx, 100)
			require.NoError(t, err)
			require.Empty(t, pending, "every event was handled")
		})
	}
}

// trigProcess is one process of the multi-process tests: its own stores
// (on Postgres, its own connection pool) over shared state.
type trigProcess struct {
	rel ports.ReleaseStore
	wfs ports.WorkflowStore
	cat ports.Catalog
	q   ports.Queue
	tr  *flow.Triggers
	// changes is the event stream of the state (the same one for every
	// process in memory, one publisher per pool on Postgres).
	changes ports.ChangeStream
}

// trigStores opens n processes over one state on a backend.
func trigStores(t *testing.T, backend string, clock ports.Clock, n int) []*trigProcess {
	t.Helper()
	out := make([]*trigProcess, n)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var dsn string
	if backend == "postgres" {
		dsn, _ = pgtest.Schema(t)
	}
	for i := range out {
		p := &trigProcess{}
		switch backend {
		case "memory":
			if i == 0 {
				rel, changes := memory.NewReleaseStore(clock), memory.NewChanges(clock, 1000, 0)
				rel.SetChanges(changes)
				p.rel, p.wfs, p.cat, p.q, p.changes = rel, memory.NewWorkflowStore(), memory.NewCatalog(clock), memory.NewQueue(clock), changes
			} else {
				p.rel, p.wfs, p.cat, p.q, p.changes = out[0].rel, out[0].wfs, out[0].cat, out[0].q, out[0].changes
			}
		case "postgres":
			db, err := postgres.Open(t.Context(), dsn, postgres.WithMaxConns(4))
			require.NoError(t, err)
			t.Cleanup(db.Close)
			require.NoError(t, db.MigrateUp(t.Context()))
			q, cat := postgres.NewQueue(db, clock), postgres.NewCatalog(db, clock)
			t.Cleanup(q.Close)
			t.Cleanup(cat.Close)
			changes := postgres.NewChanges(db, 1000, 0, 0, nil)
			t.Cleanup(changes.Close)
			p.rel, p.wfs, p.cat, p.q, p.changes = postgres.NewReleaseStore(db, clock), postgres.NewWorkflowStore(db), cat, q, changes
		}
		c := &flow.Controller{Store: p.wfs, Queue: p.q, Releases: p.rel, Catalog: p.cat, Clock: clock, Logger: log}
		p.tr = &flow.Triggers{Flow: c, Events: p.rel}
		out[i] = p
	}
	return out
}

// publishOn stores and publishes a template revision in cat.
func publishOn(t *testing.T, cat ports.Catalog, clock ports.Clock, name, doc string) ports.Revision {
	t.Helper()
	rev, err := cat.CatalogCreate(t.Context(), ports.Revision{Kind: revision.KindWorkflowTemplate, Name: name,
		ID: fmt.Sprintf("r%d", clock.Now().UnixNano()), Content: json.RawMessage(doc)})
	require.NoError(t, err)
	for _, to := range []revision.Lifecycle{revision.Proposed, revision.Published} {
		rev, err = cat.CatalogUpdate(t.Context(), ports.CatalogUpdateParams{Ref: rev.Ref(), ExpectedVersion: rev.Version, Lifecycle: to, ApprovedBy: "lead"})
		require.NoError(t, err)
	}
	return rev
}

// TestHookTriggersOnTwoEngines: two engines (on Postgres, two pools) run
// the trigger processor over one store while releases are created before
// and during their run; every event starts exactly one workflow per
// matching template.
func TestHookTriggersOnTwoEngines(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			procs := trigStores(t, backend, ports.SystemClock, 2)
			publishOn(t, procs[0].cat, ports.SystemClock, "a", hookTemplate("a", "", `, "hooks": [{"event": "release.created"}]`))
			publishOn(t, procs[0].cat, ports.SystemClock, "b", hookTemplate("b", "", `, "hooks": [{"event": "release.created", "filter": "event.environment.name == \"e2\""}]`))
			seedReleases(t, procs[0].rel)
			var wg sync.WaitGroup
			for i, p := range procs {
				p.tr.PollInterval, p.tr.Batch = 20*time.Millisecond, 1
				eng := engine.New(p.q, engine.Options{Owner: fmt.Sprintf("engine-%d", i), Logger: p.tr.Flow.Logger, PollInterval: 20 * time.Millisecond})
				p.tr.Register(eng)
				require.NoError(t, p.tr.Start(ctx))
				wg.Add(1)
				go func() {
					defer wg.Done()
					_ = eng.Run(ctx)
				}()
			}
			t.Cleanup(func() {
				cancel()
				wg.Wait()
			})
			// v2's releases are created while the engines run.
			s := procs[1].rel
			createReleases(t, ctx, s, "v2", 2)
			count := func(template string) int {
				all, err := procs[0].wfs.WorkflowList(ctx, "", 0)
				n := 0
				for _, w := range all {
					if err == nil && w.Trigger != nil && w.Trigger.Key == ports.TriggerKey(ports.TriggerEvent, template) {
						n++
					}
				}
				return n
			}
			require.Eventually(t, func() bool {
				pending, err := s.EventsPending(ctx, 10)
				return err == nil && len(pending) == 0 && count("a") >= 8 && count("b") >= 4
			}, 20*time.Second, 20*time.Millisecond, "the engines handle every event")
			require.Len(t, triggeredIDs(t, ctx, procs[0].wfs, ports.TriggerEvent, "a"), 8, "one per release created")
			require.Len(t, triggeredIDs(t, ctx, procs[0].wfs, ports.TriggerEvent, "b"), 4, "one per release created in e2")
		})
	}
}

// crashingEvents fails the crashAt-th EventsDone, as a process killed
// after starting a batch's workflows and before marking the batch done,
// and calls crash.
type crashingEvents struct {
	flow.TriggerReader
	crashAt int
	crash   func()
	mu      sync.Mutex
	calls   int
}

func (c *crashingEvents) EventsDone(ctx context.Context, seqs []int64) error {
	c.mu.Lock()
	c.calls++
	n := c.calls
	c.mu.Unlock()
	if n == c.crashAt {
		c.crash()
		return fmt.Errorf("killed before marking %v done", seqs)
	}
	return c.TriggerReader.EventsDone(ctx, seqs)
}

// createReleases creates version id's release on each of seedReleases'
// four targets: four release.created events.
func createReleases(t *testing.T, ctx context.Context, s ports.ReleaseStore, id string, day int) {
	t.Helper()
	require.NoError(t, s.VersionCreate(ctx, release.DeploymentVersion{ID: id, DeploymentID: "d1", Tag: id, Status: release.VersionReady,
		CreatedAt: time.Date(2026, 3, day, 0, 0, 0, 0, time.UTC)}))
	for _, e := range []string{"e1", "e2"} {
		for _, r := range []string{"r1", "r2"} {
			_, _, err := s.ReleaseUpsert(ctx, release.NewRelease(release.ReleaseTarget{DeploymentID: "d1", EnvironmentID: e, ResourceID: r}, id, nil, time.Time{}))
			require.NoError(t, err)
		}
	}
}

// TestHookTriggersFollowTheStream: the hook dispatcher is driven by the
// event stream's wake-ups, never by polling the outbox (its fallback read
// is an hour away): a dispatcher killed after starting a batch's
// workflows and before marking the batch done, then restarted in a new
// process, resumes from the oldest event not done, handles the events
// recorded while it was down and those recorded live, and each event
// starts exactly one workflow per template.
func TestHookTriggersFollowTheStream(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			procs := trigStores(t, backend, ports.SystemClock, 2)
			publishOn(t, procs[0].cat, ports.SystemClock, "a", hookTemplate("a", "", `, "hooks": [{"event": "release.created"}]`))
			seedReleases(t, procs[0].rel) // resource.created of r1, r2, then 4 release.created, before any dispatcher runs
			// run starts p's engine, trigger item and listener; stop
			// cancels them and waits.
			run := func(p *trigProcess, name string) (stop func()) {
				ctx, cancel := context.WithCancel(t.Context())
				p.tr.Changes, p.tr.FallbackInterval, p.tr.Batch = p.changes, time.Hour, 2
				eng := engine.New(p.q, engine.Options{Owner: name, Logger: p.tr.Flow.Logger, PollInterval: 20 * time.Millisecond})
				p.tr.Register(eng)
				var wg sync.WaitGroup
				wg.Add(2)
				go func() { defer wg.Done(); _ = eng.Run(ctx) }()
				go func() { defer wg.Done(); p.tr.Listen(ctx) }()
				require.NoError(t, p.tr.Start(ctx))
				return func() { cancel(); wg.Wait() }
			}
			count := func() int { return len(triggeredIDs(t, t.Context(), procs[0].wfs, ports.TriggerEvent, "a")) }

			killed := make(chan struct{})
			var once sync.Once
			procs[0].tr.Events = &crashingEvents{TriggerReader: procs[0].rel, crashAt: 2, crash: func() { once.Do(func() { close(killed) }) }}
			stop := run(procs[0], "first")
			select {
			case <-killed:
			case <-time.After(20 * time.Second):
				t.Fatal("the first dispatcher never reached its second batch")
			}
			stop()
			require.Equal(t, 2, count(), "the first batch (the resources') was marked done; the second started its workflows but was not")
			pending, err := procs[0].rel.EventsPending(t.Context(), 10)
			require.NoError(t, err)
			require.Len(t, pending, 4, "the unmarked batch and the unread one are still pending")

			createReleases(t, t.Context(), procs[1].rel, "v2", 2) // recorded while no dispatcher runs
			defer run(procs[1], "second")()
			require.Eventually(t, func() bool { return count() == 8 }, 20*time.Second, 10*time.Millisecond,
				"the restarted dispatcher handles what was pending and what came meanwhile")
			createReleases(t, t.Context(), procs[1].rel, "v3", 3) // recorded live: only a wake-up can bring them
			require.Eventually(t, func() bool {
				pending, err := procs[1].rel.EventsPending(t.Context(), 10)
				return err == nil && len(pending) == 0 && count() >= 12
			}, 20*time.Second, 10*time.Millisecond, "the live events are handled without a poll")
			ids := triggeredIDs(t, t.Context(), procs[0].wfs, ports.TriggerEvent, "a")
			require.Len(t, ids, 12, "one workflow per event, none twice: %v", ids)
		})
	}
}

// seedReleases stores deployment d1 in system s with environments e1, e2
// and resources r1, r2, a version, and the release of the version on each
// of the four targets: four release.created events.
func seedReleases(t *testing.T, s ports.ReleaseStore) {
	t.Helper()
	ctx, r := t.Context(), require.New(t)
	_, err := s.Workspaces().Put(ctx, release.Workspace{ID: "ws", Name: "ws"}, 0)
	r.NoError(err)
	_, err = s.Systems().Put(ctx, release.System{ID: "s", WorkspaceID: "ws", Name: "s"}, 0)
	r.NoError(err)
	_, err = s.Deployments().Put(ctx, release.Deployment{ID: "d1", SystemID: "s", Name: "d1", Slug: "d1", ResourceSelector: "true"}, 0)
	r.NoError(err)
	var targets []release.ReleaseTarget
	for _, e := range []string{"e1", "e2"} {
		_, err = s.Environments().Put(ctx, release.Environment{ID: e, SystemID: "s", Name: e, ResourceSelector: "true"}, 0)
		r.NoError(err)
		for _, res := range []string{"r1", "r2"} {
			targets = append(targets, release.ReleaseTarget{DeploymentID: "d1", EnvironmentID: e, ResourceID: res})
		}
	}
	for _, res := range []string{"r1", "r2"} {
		_, err = s.Resources().Put(ctx, release.Resource{ID: res, WorkspaceID: "ws", Kind: "k", Identifier: res, Name: res}, 0)
		r.NoError(err)
	}
	_, err = s.TargetsReplace(ctx, ports.TargetsReplaceParams{Scope: ports.TargetScope{SystemID: "s"}, Targets: targets})
	r.NoError(err)
	r.NoError(s.VersionCreate(ctx, release.DeploymentVersion{ID: "v1", DeploymentID: "d1", Tag: "1.0", Status: release.VersionReady, CreatedAt: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}))
	for _, tg := range targets {
		_, created, err := s.ReleaseUpsert(ctx, release.NewRelease(tg, "v1", nil, time.Time{}))
		r.NoError(err)
		r.True(created)
	}
}

// gatedEvents hands out pending events only once every process has read
// them, so all processes handle the same events at once.
type gatedEvents struct {
	flow.TriggerReader
	gate *sync.WaitGroup
	once sync.Once
}

func (g *gatedEvents) EventsPending(ctx context.Context, limit int) ([]ports.Event, error) {
	evs, err := g.TriggerReader.EventsPending(ctx, limit)
	g.once.Do(func() {
		g.gate.Done()
		g.gate.Wait()
	})
	return evs, err
}

// TestHookEventStartsOneWorkflowAcrossProcesses: three processes read the
// same pending events before any marks them done and all start their
// workflows: each (template, event) has exactly one workflow.
func TestHookEventStartsOneWorkflowAcrossProcesses(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			clock := porttest.NewFakeClock(time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC))
			procs := trigStores(t, backend, clock, 3)
			publishOn(t, procs[0].cat, clock, "a", hookTemplate("a", "", `, "hooks": [{"event": "release.created"}]`))
			publishOn(t, procs[0].cat, clock, "b", hookTemplate("b", "", `, "hooks": [{"event": "release.created", "filter": "event.environment.name == \"e2\""}]`))
			seedReleases(t, procs[0].rel)
			gate := &sync.WaitGroup{}
			gate.Add(len(procs))
			var wg sync.WaitGroup
			errs := make([]error, len(procs))
			for i, p := range procs {
				p.tr.Events = &gatedEvents{TriggerReader: p.rel, gate: gate}
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = p.tr.ProcessEvents(t.Context())
				}()
			}
			wg.Wait()
			for _, err := range errs {
				require.NoError(t, err)
			}
			require.Len(t, triggeredIDs(t, t.Context(), procs[0].wfs, ports.TriggerEvent, "a"), 4, "one per event")
			require.Len(t, triggeredIDs(t, t.Context(), procs[0].wfs, ports.TriggerEvent, "b"), 2, "one per event in e2")
			pending, err := procs[0].rel.EventsPending(t.Context(), 10)
			require.NoError(t, err)
			require.Empty(t, pending)
		})
	}
}

// TestScheduleFires: a schedule in Paris fires once per scheduled time,
// across the daylight-saving change, from two processes at once; a fire
// missed while nothing ran starts once; a fire older than the starting
// deadline starts none; the engine requeues the schedule for its next
// fire.
func TestScheduleFires(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			// Noon UTC the day before Paris moves its clocks forward.
			clock := porttest.NewFakeClock(time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC))
			procs := trigStores(t, backend, clock, 2)
			p0 := procs[0]
			publishOn(t, p0.cat, clock, "nightly", hookTemplate("nightly", "", `, "schedule": "30 2 * * *", "timezone": "Europe/Paris"`))
			publishOn(t, p0.cat, clock, "strict", hookTemplate("strict", "", `, "schedule": "0 4 * * *", "timezone": "Europe/Paris", "startingDeadlineSeconds": 60`))

			fireAll := func(name string) time.Time {
				t.Helper()
				var wg sync.WaitGroup
				nexts := make([]time.Time, len(procs))
				errs := make([]error, len(procs))
				for i, p := range procs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						nexts[i], errs[i] = p.tr.FireSchedule(ctx, name)
					}()
				}
				wg.Wait()
				for i := range procs {
					require.NoError(t, errs[i])
					require.Equal(t, nexts[0], nexts[i])
				}
				return nexts[0]
			}
			ids := func(name string) []string {
				return triggeredIDs(t, ctx, p0.wfs, ports.TriggerSchedule, name)
			}

			next := fireAll("nightly")
			require.Empty(t, ids("nightly"), "no fire since the publication")
			// 02:30 does not exist on 29 March in Paris: the fire is at
			// the end of the gap, 03:00 CEST.
			gapEnd := time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)
			require.Equal(t, gapEnd, next.UTC())
			clock.Set(gapEnd)
			next = fireAll("nightly")
			require.Equal(t, []string{flow.ScheduleWorkflowID("nightly", gapEnd)}, ids("nightly"), "one fire, two processes")
			require.Equal(t, time.Date(2026, 3, 30, 0, 30, 0, 0, time.UTC), next.UTC(), "02:30 CEST the next day")
			clock.Set(gapEnd.Add(time.Minute))
			fireAll("nightly")
			require.Len(t, ids("nightly"), 1, "a later pass finds the fire taken")
			w, err := p0.wfs.WorkflowGet(ctx, flow.ScheduleWorkflowID("nightly", gapEnd))
			require.NoError(t, err)
			require.Equal(t, &ports.WorkflowTrigger{Key: ports.TriggerKey(ports.TriggerSchedule, "nightly"), Kind: ports.TriggerSchedule,
				Schedule: "30 2 * * *", Timezone: "Europe/Paris", ScheduledAt: gapEnd}, w.Trigger)

			// Nothing ran for three days: one fire, the latest, starts.
			clock.Set(time.Date(2026, 4, 2, 9, 0, 0, 0, time.UTC))
			fireAll("nightly")
			fireAll("strict")
			require.Equal(t, []string{flow.ScheduleWorkflowID("nightly", gapEnd),
				flow.ScheduleWorkflowID("nightly", time.Date(2026, 4, 2, 0, 30, 0, 0, time.UTC))}, ids("nightly"))
			require.Empty(t, ids("strict"), "the missed 04:00 fire is past its 60 s starting deadline")
			clock.Set(time.Date(2026, 4, 3, 2, 0, 30, 0, time.UTC)) // 04:00:30 CEST
			fireAll("strict")
			require.Len(t, ids("strict"), 1, "within the deadline")

			// On the engine: the triggers item enqueues the schedule,
			// whose pass requeues itself for the next fire.
			eng := engine.New(p0.q, engine.Options{Clock: clock, Logger: p0.tr.Flow.Logger, Owner: "test"})
			p0.tr.Register(eng)
			require.NoError(t, p0.tr.Start(ctx))
			_, err = eng.Drain(ctx)
			require.NoError(t, err)
			require.Len(t, ids("nightly"), 3, "the 3 April fire (02:30 CEST, 00:30Z) has passed")
			clock.Set(time.Date(2026, 4, 4, 0, 30, 0, 0, time.UTC))
			_, err = eng.Drain(ctx)
			require.NoError(t, err)
			require.Len(t, ids("nightly"), 4, "the requeued item fired at its time")
		})
	}
}

// TestScheduleConcurrencyPolicies: with a workflow of the previous fire
// unfinished, forbid skips the fire (recorded, never started later),
// replace cancels the running one and starts, allow starts another.
func TestScheduleConcurrencyPolicies(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			day := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
			clock := porttest.NewFakeClock(day.Add(-time.Hour))
			p := trigStores(t, backend, clock, 1)[0]
			for _, policy := range []string{"allow", "forbid", "replace"} {
				publishOn(t, p.cat, clock, policy, hookTemplate(policy, "", `, "schedule": "@daily", "concurrencyPolicy": "`+policy+`"`))
			}
			fire := func(at time.Time) {
				t.Helper()
				clock.Set(at)
				for _, policy := range []string{"allow", "forbid", "replace"} {
					_, err := p.tr.FireSchedule(ctx, policy)
					require.NoError(t, err)
				}
			}
			fire(day)
			fire(day.Add(24 * time.Hour))
			fire(day.Add(24*time.Hour + time.Minute)) // a later pass of the same day
			phases := func(name string) map[string]string {
				out := map[string]string{}
				for _, w := range triggered(t, ctx, p.wfs, ports.TriggerSchedule, name) {
					s := string(w.Phase)
					if w.CancelRequested {
						s += "+cancel"
					}
					out[w.ID] = s
				}
				return out
			}
			first, second := day, day.Add(24*time.Hour)
			require.Equal(t, map[string]string{flow.ScheduleWorkflowID("allow", first): "Pending", flow.ScheduleWorkflowID("allow", second): "Pending"}, phases("allow"))
			require.Equal(t, map[string]string{flow.ScheduleWorkflowID("forbid", first): "Pending", flow.ScheduleWorkflowID("forbid", second): "Cancelled"}, phases("forbid"))
			skipped, err := p.wfs.WorkflowGet(ctx, flow.ScheduleWorkflowID("forbid", second))
			require.NoError(t, err)
			require.Contains(t, skipped.Message, "skipped: concurrencyPolicy forbid and workflow "+flow.ScheduleWorkflowID("forbid", first)+" still runs")
			require.Equal(t, map[string]string{flow.ScheduleWorkflowID("replace", first): "Pending+cancel", flow.ScheduleWorkflowID("replace", second): "Pending"}, phases("replace"))
			running, err := p.wfs.WorkflowsUnfinished(ctx, ports.TriggerKey(ports.TriggerSchedule, "forbid"))
			require.NoError(t, err)
			require.Len(t, running, 1, "forbid: still one running")
		})
	}
}
