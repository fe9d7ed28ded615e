package flow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
	"github.com/reconcilerhq/reconciler/workflow"
)

// The work kinds of workflow triggers: TriggersKind has one item
// (TriggersKey) that drains the release store's event outbox into hook
// workflows and keeps each scheduled template's ScheduleKind item
// enqueued; a ScheduleKind item (ScheduleKey) fires one template's
// schedule.
const (
	TriggersKind  = "workflow-triggers"
	ScheduleKind  = "workflow-schedule"
	scopeOutbox   = "outbox"
	scopeTemplate = "template"
)

// TriggersKey is the one work key of the event outbox's processor.
func TriggersKey() ports.WorkKey {
	return ports.WorkKey{Kind: TriggersKind, ScopeType: scopeOutbox, ScopeID: "events"}
}

// ScheduleKey is the work key of a template's schedule; name is the
// template's catalog name.
func ScheduleKey(name string) ports.WorkKey {
	return ports.WorkKey{Kind: ScheduleKind, ScopeType: scopeTemplate, ScopeID: name}
}

// HookWorkflowID is the id of the workflow a template's hook starts on an
// event: one per (template, event), whichever process handles the event.
func HookWorkflowID(template string, seq int64) string {
	return template + "-event-" + strconv.FormatInt(seq, 10)
}

// ScheduleWorkflowID is the id of the workflow a template's schedule
// starts for a fire time: one per (template, scheduled time).
func ScheduleWorkflowID(template string, at time.Time) string {
	return template + "-cron-" + strconv.FormatInt(at.Unix(), 10)
}

// TriggerReader is what the trigger processor reads of the release store:
// its event outbox and the objects an event names.
type TriggerReader interface {
	ports.Events
	ports.ObjectStore
	ports.Versions
}

// Triggers starts workflows from templates' hooks and schedules, from the
// latest published revision of each template in the catalog
// (Controller.Catalog).
//
// Hooks: each pass reads a batch of the outbox's pending events, starts
// for each event one workflow per template with a matching hook (the
// first of its hooks whose event type matches and whose filter holds),
// with id HookWorkflowID, then marks the batch done. A process that dies
// before marking leaves the batch to the next pass, which finds the
// workflows already started (their ids are taken), so an event starts at
// most one workflow per template across processes. A template reaches the
// events of its scope: a deployment template (metadata.scope deployment
// with a scopeId) those of its deployment, a system template those of the
// deployments of its system, others every event.
//
// Wake-ups: with Changes set, Listen enqueues the processor's item each
// time the event stream's publisher wakes its watchers (after a commit
// that recorded changes or hook events, in any process on the store), so
// an event is handled as soon as it is published; the outbox is then read
// again only every FallbackInterval when idle, in case a wake-up was
// missed. Without Changes the outbox is polled every PollInterval.
// Either way delivery is at least once and resumes, after a restart, from
// the oldest event not marked done (the outbox is durable), and an event
// starts at most one workflow per template (HookWorkflowID).
//
// Schedules: see schedulePass.
type Triggers struct {
	Flow   *Controller
	Events TriggerReader
	// Changes is the event stream whose wake-ups drive the processor
	// (Listen); nil: it polls.
	Changes ports.ChangeStream
	// PollInterval is how often the outbox is read when it was empty and
	// Changes is nil (default 2s); FallbackInterval how often when Changes
	// is set (default 30s); ScheduleSweep how often published templates
	// are listed to enqueue their schedules (default 30s).
	PollInterval     time.Duration
	FallbackInterval time.Duration
	ScheduleSweep    time.Duration
	// Batch is how many events a pass takes (default 100).
	Batch int

	mu        sync.Mutex
	parsed    map[string]*workflow.Template // by catalog name and revision id
	lastSweep time.Time
}

// Register registers the trigger kinds on eng.
func (tr *Triggers) Register(eng *engine.Engine) {
	eng.Register(TriggersKind, engine.ProcessorFunc(tr.pass), engine.KindOptions{Concurrency: 1})
	eng.Register(ScheduleKind, engine.ProcessorFunc(tr.schedulePass), engine.KindOptions{Concurrency: 2})
}

// Start enqueues the outbox processor's item (idempotent: items coalesce).
func (tr *Triggers) Start(ctx context.Context) error {
	if err := tr.Flow.Queue.WorkEnqueue(ctx, ports.EnqueueParams{Key: TriggersKey()}); err != nil {
		return fmt.Errorf("start workflow triggers: %w", err)
	}
	return nil
}

// ResyncSource puts the outbox processor's item in the periodic sweep, so
// a lost item is enqueued again.
func (tr *Triggers) ResyncSource() engine.ResyncSource {
	return func(_ context.Context, yield func(ports.WorkKey) error) error { return yield(TriggersKey()) }
}

func (tr *Triggers) poll() time.Duration {
	switch {
	case tr.Changes != nil && tr.FallbackInterval > 0:
		return tr.FallbackInterval
	case tr.Changes != nil:
		return 30 * time.Second
	case tr.PollInterval > 0:
		return tr.PollInterval
	}
	return 2 * time.Second
}

// listenGap is the least time between two enqueues Listen makes, so a
// burst of publications costs one pass, not one per wake-up.
const listenGap = 50 * time.Millisecond

// Listen enqueues the processor's item on each wake-up of Changes (at
// most one enqueue per listenGap) until ctx ends; it returns at once when
// Changes is nil. A failed enqueue is logged: the next wake-up or the
// fallback read covers it.
func (tr *Triggers) Listen(ctx context.Context) {
	if tr.Changes == nil {
		return
	}
	wake := tr.Changes.ChangesNotify(ctx)
	gap := time.NewTimer(0)
	defer gap.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-gap.C:
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
		if err := tr.Flow.Queue.WorkEnqueue(ctx, ports.EnqueueParams{Key: TriggersKey()}); err != nil && ctx.Err() == nil {
			tr.Flow.Logger.LogAttrs(ctx, slog.LevelWarn, "workflow.trigger_wake_failed", slog.String("error", err.Error()))
		}
		gap.Reset(listenGap)
	}
}

// published is the latest published revision of a template, parsed.
type published struct {
	rev ports.Revision
	t   *workflow.Template
}

// templates lists the latest published revision of every template, in
// name order; a revision that does not load is logged and left out.
func (tr *Triggers) templates(ctx context.Context) ([]published, error) {
	revs, err := tr.Flow.Catalog.CatalogList(ctx, ports.CatalogListParams{Kind: revision.KindWorkflowTemplate,
		Lifecycles: []revision.Lifecycle{revision.Published}})
	if err != nil {
		return nil, fmt.Errorf("list published templates: %w", err)
	}
	latest := map[string]ports.Revision{}
	for _, r := range revs {
		if cur, ok := latest[r.Name]; !ok || r.Revision > cur.Revision {
			latest[r.Name] = r
		}
	}
	out := make([]published, 0, len(latest))
	for _, name := range slices.Sorted(maps.Keys(latest)) {
		t, err := tr.parse(latest[name])
		if err != nil {
			tr.Flow.Logger.LogAttrs(ctx, slog.LevelWarn, "workflow.trigger_template_invalid", slog.String("template", name), slog.String("error", err.Error()))
			continue
		}
		out = append(out, published{rev: latest[name], t: t})
	}
	return out, nil
}

// parse loads a revision's template once per process (published content
// never changes).
func (tr *Triggers) parse(rev ports.Revision) (*workflow.Template, error) {
	key := rev.Name + "@" + rev.ID
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if t, ok := tr.parsed[key]; ok {
		return t, nil
	}
	t, err := workflow.Load(rev.Content)
	if err != nil {
		return nil, err
	}
	if tr.parsed == nil {
		tr.parsed = map[string]*workflow.Template{}
	}
	tr.parsed[key] = t
	return t, nil
}

// pass drains a batch of the outbox, then sweeps the schedules when due.
func (tr *Triggers) pass(ctx context.Context, _ engine.Item) engine.Outcome {
	now := tr.Flow.Clock.Now()
	n, err := tr.ProcessEvents(ctx)
	if err != nil {
		return engine.Retry(err)
	}
	if n == tr.batch() {
		return engine.RequeueAt(now)
	}
	return engine.RequeueAt(now.Add(tr.poll()))
}

func (tr *Triggers) batch() int {
	if tr.Batch > 0 {
		return tr.Batch
	}
	return 100
}

// ProcessEvents handles one batch of pending events (starting their
// workflows, then marking them done) and, when due, enqueues the
// schedules; it returns how many events it handled. Processes may run it
// concurrently: an event still starts at most one workflow per template.
func (tr *Triggers) ProcessEvents(ctx context.Context) (int, error) {
	now := tr.Flow.Clock.Now()
	evs, err := tr.Events.EventsPending(ctx, tr.batch())
	if err != nil {
		return 0, err
	}
	var tpls []published
	if len(evs) > 0 || tr.sweepDue(now) {
		if tpls, err = tr.templates(ctx); err != nil {
			return 0, err
		}
	}
	seqs := make([]int64, 0, len(evs))
	for i := range evs {
		if err := tr.handle(ctx, &evs[i], tpls); err != nil {
			// What was started stays started; the rest is retried with
			// the batch, and the started ones are found taken.
			return 0, fmt.Errorf("event %d: %w", evs[i].Seq, err)
		}
		seqs = append(seqs, evs[i].Seq)
	}
	if err := tr.Events.EventsDone(ctx, seqs); err != nil {
		return 0, err
	}
	if tr.sweepDue(now) {
		if err := tr.sweep(ctx, tpls, now); err != nil {
			return 0, err
		}
	}
	return len(evs), nil
}

func (tr *Triggers) sweepDue(now time.Time) bool {
	every := tr.ScheduleSweep
	if every <= 0 {
		every = 30 * time.Second
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.lastSweep.IsZero() || !now.Before(tr.lastSweep.Add(every))
}

// sweep enqueues the schedule item of every published template with a
// schedule (a new template's, or one whose item was lost).
func (tr *Triggers) sweep(ctx context.Context, tpls []published, now time.Time) error {
	for _, p := range tpls {
		if p.t.Spec.Schedule == "" {
			continue
		}
		if err := tr.Flow.Queue.WorkEnqueue(ctx, ports.EnqueueParams{Key: ScheduleKey(p.rev.Name)}); err != nil {
			return fmt.Errorf("enqueue schedule of %s: %w", p.rev.Name, err)
		}
	}
	tr.mu.Lock()
	tr.lastSweep = now
	tr.mu.Unlock()
	return nil
}

// handle starts the workflows an event starts. Only store errors are
// returned (the batch is retried); a filter that fails to evaluate or
// parameters the template refuses are logged and start nothing.
func (tr *Triggers) handle(ctx context.Context, ev *ports.Event, tpls []published) error {
	var matching []published
	for _, p := range tpls {
		for i := range p.t.Spec.Hooks {
			if p.t.Spec.Hooks[i].Event == ev.Type {
				matching = append(matching, p)
				break
			}
		}
	}
	if len(matching) == 0 {
		return nil
	}
	ectx, err := tr.eventContext(ctx, ev)
	if err != nil {
		return err
	}
	for _, p := range matching {
		if !reaches(p.t, ectx.dep) {
			continue
		}
		for i := range p.t.Spec.Hooks {
			h := &p.t.Spec.Hooks[i]
			ok, err := workflow.HookMatches(h, ectx.event)
			if err != nil {
				tr.Flow.Logger.LogAttrs(ctx, slog.LevelWarn, "workflow.hook_filter_failed", slog.String("template", p.rev.Name),
					slog.Int64("event", ev.Seq), slog.String("error", err.Error()))
				continue
			}
			if !ok {
				continue
			}
			if err := tr.startHook(ctx, p, h, ev, ectx); err != nil {
				return err
			}
			break
		}
	}
	return nil
}

// eventCtx is an event with what it names read from the store.
type eventCtx struct {
	event   workflow.Event
	release map[string]any
	dep     *release.Deployment
	scope   InputScope
}

// eventContext reads the objects the event names; one deleted since is
// left out.
func (tr *Triggers) eventContext(ctx context.Context, ev *ports.Event) (eventCtx, error) {
	t := ev.Target()
	out := eventCtx{release: map[string]any{"id": ev.ReleaseID, "target": ev.TargetKey}}
	e := workflow.Event{"type": string(ev.Type), "id": strconv.FormatInt(ev.Seq, 10), "at": ev.At.UTC().Format(time.RFC3339Nano),
		"release": map[string]any{"id": ev.ReleaseID, "target": ev.TargetKey}}
	add := func(key string, v any, err error, drop ...string) error {
		if errors.Is(err, ports.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("event %d: read %s: %w", ev.Seq, key, err)
		}
		obj := plainObject(v, drop...)
		e[key], out.release[key] = obj, obj
		return nil
	}
	dep, err := tr.Events.Deployments().Get(ctx, t.DeploymentID)
	if err == nil {
		out.dep = &dep.Value
		out.scope.SystemID = dep.Value.SystemID
	}
	if err := add("deployment", dep.Value, err, "variables"); err != nil {
		return out, err
	}
	env, err := tr.Events.Environments().Get(ctx, t.EnvironmentID)
	if err := add("environment", env.Value, err); err != nil {
		return out, err
	}
	resID := t.ResourceID
	if ev.ResourceID != "" { // resource.created, resource.updated, resource.deleted
		resID = ev.ResourceID
		e["resource"] = map[string]any{"id": resID} // a deleted one is known by its id only
	}
	res, err := tr.Events.Resources().Get(ctx, resID)
	if err == nil {
		out.scope.WorkspaceID = res.Value.WorkspaceID
	}
	if err := add("resource", res.Value, err, "variables"); err != nil {
		return out, err
	}
	ver, err := tr.Events.VersionGet(ctx, ev.VersionID)
	if err := add("version", ver, err); err != nil {
		return out, err
	}
	if ev.JobID != "" {
		e["job"] = map[string]any{"id": ev.JobID, "status": string(ev.JobStatus), "message": ev.JobMessage,
			"agentId": ev.JobAgentID, "externalId": ev.ExternalID}
		out.release["jobId"] = ev.JobID
	}
	if ev.Type == workflow.EventVerificationFailed {
		metrics := make([]any, len(ev.Metrics))
		for i, m := range ev.Metrics {
			metrics[i] = m
		}
		e["verification"] = map[string]any{"status": string(release.VerificationFailed), "metrics": metrics}
	}
	out.event = e
	return out, nil
}

// reaches reports whether a template's scope covers the deployment.
func reaches(t *workflow.Template, dep *release.Deployment) bool {
	id := t.Metadata.ScopeID
	if id == "" {
		return true
	}
	switch t.Metadata.Scope {
	case workflow.ScopeDeployment:
		return dep != nil && dep.ID == id
	case workflow.ScopeSystem:
		return dep != nil && dep.SystemID == id
	}
	return true
}

// startHook starts the hook's workflow for the event once.
func (tr *Triggers) startHook(ctx context.Context, p published, h *workflow.Hook, ev *ports.Event, ectx eventCtx) error {
	id := HookWorkflowID(p.rev.Name, ev.Seq)
	params, ps := workflow.HookParameters(h, ectx.event)
	if len(ps) > 0 {
		tr.refused(ctx, p.rev.Name, id, &workflow.InvalidError{Problems: ps})
		return nil
	}
	evCopy := *ev
	_, err := tr.Flow.Start(ctx, StartParams{ID: id, Template: p.rev.Content, TemplateName: p.rev.Name, TemplateRevision: p.rev.Revision,
		Parameters: params, Release: ectx.release, ReleaseID: ev.ReleaseID, TargetKey: ev.TargetKey, Scope: ectx.scope,
		Trigger: &ports.WorkflowTrigger{Key: ports.TriggerKey(ports.TriggerEvent, p.rev.Name), Kind: ports.TriggerEvent, Event: &evCopy}})
	return tr.started(ctx, p.rev.Name, id, err)
}

// started sorts out a Start's error: a taken id is a workflow another
// pass started (woken again in case that pass died before waking it),
// bad input is logged and dropped, anything else is returned.
func (tr *Triggers) started(ctx context.Context, template, id string, err error) error {
	var invalid *workflow.InvalidError
	var field *release.FieldError
	switch {
	case err == nil:
		tr.Flow.Logger.LogAttrs(ctx, slog.LevelInfo, "workflow.triggered", slog.String("template", template), slog.String("id", id))
		return nil
	case errors.Is(err, ports.ErrConflict):
		return tr.Flow.wake(ctx, id)
	case errors.As(err, &invalid), errors.As(err, &field):
		tr.refused(ctx, template, id, err)
		return nil
	}
	return err
}

func (tr *Triggers) refused(ctx context.Context, template, id string, err error) {
	tr.Flow.Logger.LogAttrs(ctx, slog.LevelWarn, "workflow.trigger_refused", slog.String("template", template),
		slog.String("id", id), slog.String("error", err.Error()))
}
