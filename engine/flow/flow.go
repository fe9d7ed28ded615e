// Package flow runs workflows on the engine: one stateless controller per
// workflow instance (work kind "workflow"), which on every pass reads the
// stored workflow and its TaskRuns, asks the pure scheduler
// (workflow.Schedule) what to do, writes the result under compare-and-swap
// and executes what was dispatched through the ports: jobs through
// ports.JobAgent, measurements through ports.Verifier, requests through
// ports.Webhook; approval tasks wait for Approve, wait tasks for time.
//
// Invariants: A workflow id given to `Start` is at most 128 bytes of
// letters, digits, `.`, `_`, `-` (`ValidateID`: never a `/`, which job ids
// use as separator); every write is a CAS batch checked against
// `TaskRunEdges`/`WorkflowEdges`; a lost CAS recomputes; a TaskRun is
// created once per (task, matrix index) id; a job or webhook request is
// recorded in its TaskRun's `Delivery` (outbox: key = job id =
// `Idempotency-Key`, from workflow, TaskRun and attempt) in the pass's CAS
// write before it is sent, and only the pass whose write stored it sends it,
// so a fast report can no longer make a pass send again; a pass reads the
// workflow, its report inbox and its TaskRuns in one transaction (the
// TaskRuns from the controller's copy while the store's `TaskRunWrites`
// count is the copy's), applies the inbox, schedules, and writes the
// TaskRuns, the workflow and the removal of the reports it applied in one
// transaction; what the agents answered is written for all of a pass's sends
// in one CAS batch in one transaction (over the pass's copy first, read
// again after a lost batch, one by one after two more); agents' reports
// (terminal ones and `JobLeaser` lease renewals) only go into the workflow's
// inbox (`ReportsAdd`, an insert that locks no TaskRun), concurrent ones in
// one batch (`engine.Coalescer`) with one wake-up enqueue per workflow with
// a terminal report, in one transaction, so only passes and approvals write
// TaskRuns and no two multi-row TaskRun writes can wait on each other; a
// report applies only to a running run of its attempt (a renewal only to a
// leased job, beyond its lease), and a pass applies the inbox before judging
// any lease; the store's transaction is used when it is a `ports.Transactor`
// (the PostgreSQL one; the queue joins it); a send interrupted by a crash is
// sent again under the same key, except a `JobLeaser`'s job, whose lease
// decides (it runs from the agent's acceptance of the send; it runs out: the
// attempt fails as lost, unless the agent is a `JobResumer`: the pass renews
// the lease in its CAS write and hands the job, with its external id and
// first record time, to `ResumeJob`); a sent job whose lease is held
// outside the process (a `JobLossChecker`'s: a pull agent's taker) fails
// as lost when its agent says so; a report of another attempt is
// ignored; stored state holds secrets only as `${secret:NAME}`, revealed
// through `SecretResolver` at the moment of sending; a job the workflow no
// longer wants (cancelled, timed out) is handed to its agent's
// `JobCanceler`; `ResyncSource` puts every unfinished workflow in the
// periodic sweep; an event starts at most one workflow per template and a
// scheduled time one, across processes (the id derives from them; a taken id
// is a no-op), from the template's latest published revision; events are
// marked done only after their workflows started (at least once); a fire
// missed while nothing ran starts at most once, within
// `startingDeadlineSeconds`; `forbid` records a skipped fire as a Cancelled
// workflow, so no later pass starts it; every pass that finds a workflow
// finished re-reports its release job (and re-cancels a cancelled one's
// jobs), so a crash only delays them
package flow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/workflow"
)

// Kind is the work kind of workflow passes; Scope the scope type of their
// items, whose scope id is the workflow id.
const (
	Kind  = "workflow"
	Scope = "workflow"
)

// Key is the work key of a workflow's passes.
func Key(workflowID string) ports.WorkKey {
	return ports.WorkKey{Kind: Kind, ScopeType: Scope, ScopeID: workflowID}
}

// ReleaseReader is what workflows use of the release store: its objects
// and its release targets.
type ReleaseReader interface {
	ports.ObjectStore
	ports.Targets
}

// Controller runs workflows. Every pass recomputes from the store, so a
// repeated or retried pass changes nothing already done: TaskRuns are
// created once per (task, matrix index) id, writes are compare-and-swap,
// agents dispatch once per job id.
type Controller struct {
	Store ports.WorkflowStore
	Queue ports.Queue
	// Releases holds the job agents that job tasks name (jobAgentRef) and
	// the objects and targets matrices read (InputScope).
	Releases ReleaseReader
	// Agents serve job tasks by release.JobAgent.Type.
	Agents map[string]ports.JobAgent
	// Verifiers take verification tasks' measurements by provider type.
	Verifiers map[string]ports.Verifier
	// Webhooks sends webhook tasks' requests; nil fails them.
	Webhooks ports.Webhook
	// Secrets resolves sensitive variables at the moment a job or request
	// is sent (nil: their references are sent as they are). Stored state
	// only ever holds the placeholder ${secret:NAME}.
	Secrets ports.SecretResolver
	// JobDestination is the URL a job of the agent type with the (merged,
	// unrevealed) config sends its secrets to; the sensitive variables a
	// job task reveals into its config are resolved for that destination
	// (ports.WithSecretDestination), a webhook task's for its URL. Nil or
	// empty: they are resolved with no destination, which a resolver that
	// binds secrets to destinations refuses.
	JobDestination func(agentType string, config map[string]any) string
	// Catalog holds the templates of release-triggered workflows
	// (ReleaseAgent); Jobs takes the report of their end (the chain).
	Catalog ports.Catalog
	Jobs    ports.JobReporter
	Clock   ports.Clock
	Logger  *slog.Logger
	// Metrics counts the actions passes apply and the measurements they
	// take (nil: none); Register takes the engine's when unset.
	Metrics *engine.Metrics
	// ScheduleTimed, when set, hears of every scheduling pass: how many
	// TaskRuns workflow.Schedule read and how long it took (bench
	// workflow reports them).
	ScheduleTimed func(taskRuns int, took time.Duration)

	mu        sync.Mutex
	templates map[string]*workflow.Template // by workflow id; pinned, so never stale
	matrices  map[string]cachedMatrix       // by workflow id; never changes after creation
	matrixN   int                           // matrix items in matrices
	runs      map[string]cachedRuns         // by workflow id: the TaskRuns as this process last read or wrote them
	cachedN   int                           // TaskRuns in runs

	reportsOnce sync.Once
	reports     *engine.Coalescer[ports.TaskRunReport]
}

// maxCachedRuns bounds the TaskRuns a controller keeps between passes.
const maxCachedRuns = 200_000

// maxCachedMatrixItems bounds the matrix items a controller keeps between
// passes.
const maxCachedMatrixItems = 1_000_000

// cachedMatrix is a workflow's matrix, normalized for the scheduler
// (workflow.Normalize), with its number of items.
type cachedMatrix struct {
	items  map[string][]any // never modified
	length int
}

// cachedRuns is a workflow's TaskRuns as of a TaskRunWrites count.
type cachedRuns struct {
	writes int64
	runs   []ports.TaskRunRecord // never modified: passes copy what they change
	byID   map[string]int
}

// cached returns the workflow's kept TaskRuns.
func (c *Controller) cached(id string) (cachedRuns, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.runs[id]
	return e, ok
}

// keep keeps a workflow's TaskRuns for its next pass, dropping the others'
// when more than maxCachedRuns would be kept.
func (c *Controller) keep(id string, e cachedRuns) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = map[string]cachedRuns{}
	}
	c.cachedN -= len(c.runs[id].runs)
	if c.cachedN+len(e.runs) > maxCachedRuns {
		clear(c.runs)
		c.cachedN = 0
	}
	if len(e.runs) > maxCachedRuns {
		return
	}
	c.runs[id] = e
	c.cachedN += len(e.runs)
}

// uncache drops a workflow's kept TaskRuns.
func (c *Controller) uncache(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cachedN -= len(c.runs[id].runs)
	delete(c.runs, id)
}

// Register registers the controller on eng with concurrency passes at once.
func (c *Controller) Register(eng *engine.Engine, concurrency int) {
	if c.Metrics == nil {
		c.Metrics = eng.Metrics()
	}
	eng.Register(Kind, engine.ProcessorFunc(c.pass), engine.KindOptions{Concurrency: concurrency})
}

// wake enqueues a pass of the workflow now.
func (c *Controller) wake(ctx context.Context, id string) error {
	if err := c.Queue.WorkEnqueue(ctx, ports.EnqueueParams{Key: Key(id)}); err != nil {
		return fmt.Errorf("wake workflow %s: %w", id, err)
	}
	return nil
}

// badTemplateError is a pinned template that does not load: the
// workflow cannot run.
type badTemplateError struct{ err error }

func (e *badTemplateError) Error() string { return e.err.Error() }
func (e *badTemplateError) Unwrap() error { return e.err }

// template returns the workflow's parsed template, read from the store
// (WorkflowTemplate) and parsed once per process (the template is pinned,
// so a cached copy never goes stale and keeps the scheduler's compiled
// plan). A template that does not load is a *badTemplateError.
func (c *Controller) template(ctx context.Context, id string) (*workflow.Template, error) {
	c.mu.Lock()
	t, ok := c.templates[id]
	c.mu.Unlock()
	if ok {
		return t, nil
	}
	doc, err := c.Store.WorkflowTemplate(ctx, id)
	if err != nil {
		return nil, err
	}
	if t, err = workflow.Load(doc); err != nil {
		return nil, &badTemplateError{fmt.Errorf("workflow %s: pinned template: %w", id, err)}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.templates == nil {
		c.templates = map[string]*workflow.Template{}
	}
	c.templates[id] = t
	return t, nil
}

// matrix returns the workflow's matrix, normalized (workflow.Normalize:
// JSON storage turns every number into a float64; the template's
// expressions expect integers to stay integers). The store reads it apart
// from the workflow (WorkflowMatrix) and it never changes after creation,
// so it is read and normalized once per process while it stays cached:
// the cache drops every workflow's when more than maxCachedMatrixItems
// would be kept.
func (c *Controller) matrix(ctx context.Context, id string) (map[string][]any, error) {
	c.mu.Lock()
	e, ok := c.matrices[id]
	c.mu.Unlock()
	if ok {
		return e.items, nil
	}
	m, err := c.Store.WorkflowMatrix(ctx, id)
	if err != nil {
		return nil, err
	}
	e = cachedMatrix{}
	if m != nil {
		e.items = make(map[string][]any, len(m))
		for k, items := range m {
			e.items[k] = workflow.Normalize(items).([]any)
			e.length += len(items)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.matrices == nil {
		c.matrices = map[string]cachedMatrix{}
	}
	c.matrixN -= c.matrices[id].length
	if c.matrixN+e.length > maxCachedMatrixItems {
		clear(c.matrices)
		c.matrixN = 0
	}
	if e.length <= maxCachedMatrixItems {
		c.matrices[id] = e
		c.matrixN += e.length
	}
	return e.items, nil
}

// forget drops a finished workflow's cached template, matrix and TaskRuns.
func (c *Controller) forget(id string) {
	c.uncache(id)
	c.mu.Lock()
	delete(c.templates, id)
	c.matrixN -= c.matrices[id].length
	delete(c.matrices, id)
	c.mu.Unlock()
}

// runID is the id of a task's TaskRun (of one matrix item).
func runID(task string, index int) string {
	if index == workflow.NoMatrix {
		return task
	}
	return task + "." + strconv.Itoa(index)
}

// JobID is the id of the job of a TaskRun's attempt: it names the workflow,
// the TaskRun and the attempt, so an agent's report finds its way back and
// a report of an older attempt is recognised as stale.
func JobID(workflowID, taskRunID string, attempt int) string {
	return "wf/" + workflowID + "/" + taskRunID + "/" + strconv.Itoa(attempt)
}

// IsJobID reports whether a job id is a workflow job's (see JobID).
func IsJobID(id string) bool { return strings.HasPrefix(id, "wf/") }

// parseJobID splits a JobID.
func parseJobID(id string) (workflowID, taskRunID string, attempt int, ok bool) {
	parts := strings.Split(id, "/")
	if len(parts) != 4 || parts[0] != "wf" {
		return "", "", 0, false
	}
	n, err := strconv.Atoi(parts[3])
	if err != nil {
		return "", "", 0, false
	}
	return parts[1], parts[2], n, true
}

// input builds the scheduler's input from the stored state and the
// workflow's matrix (Controller.matrix), its values normalized
// (workflow.Normalize: JSON storage turns every number into a float64; the
// template's expressions expect integers to stay integers).
func (c *Controller) input(w *ports.WorkflowRecord, t *workflow.Template, matrix map[string][]any, runs []ports.TaskRunRecord) workflow.ScheduleInput {
	vars := normMap(w.Variables)
	if len(w.Secrets) > 0 {
		for _, k := range w.Secrets {
			if _, ok := vars[k]; ok {
				vars[k] = workflow.SecretValue{Value: secretPlaceholder(k)}
			}
		}
	}
	in := workflow.ScheduleInput{
		Now:      c.Clock.Now(),
		Workflow: workflow.WorkflowState{ID: w.ID, Name: w.Name, Phase: w.Phase, Parameters: normMap(w.Parameters), CancelRequested: w.CancelRequested},
		Template: t, Release: normMap(w.Release), Variables: vars, Matrix: matrix,
		TaskRuns: make([]workflow.TaskRun, len(runs)),
	}
	for i := range runs {
		in.TaskRuns[i] = runs[i].TaskRun
		in.TaskRuns[i].Outputs = normMap(runs[i].Outputs)
	}
	return in
}

// normMap is workflow.Normalize of a map (nil stays nil).
func normMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return workflow.Normalize(m).(map[string]any)
}

// pass is one reconciliation of a workflow: read it (with its inbox and
// TaskRuns), apply the inbox's reports, schedule, prepare the outside
// work, write it all in one transaction, then send what was recorded and
// write what came back.
func (c *Controller) pass(ctx context.Context, it engine.Item) engine.Outcome {
	start := time.Now()
	id := it.Key.ScopeID
	st, err := c.load(ctx, id)
	if errors.Is(err, ports.ErrNotFound) {
		return engine.Done()
	}
	if err != nil {
		return engine.Retry(err)
	}
	w := &st.w
	if w.Phase.Terminal() {
		if err := c.Store.ReportsDone(ctx, id, seqsOf(st.reports)); err != nil {
			return engine.Retry(err)
		}
		return c.finished(ctx, w, true)
	}
	t, err := c.template(ctx, id)
	var matrix map[string][]any
	if err == nil {
		matrix, err = c.matrix(ctx, id)
	}
	if bad := (*badTemplateError)(nil); errors.As(err, &bad) {
		return c.failWorkflow(ctx, w, err)
	}
	if errors.Is(err, ports.ErrNotFound) {
		return engine.Done()
	}
	if err != nil {
		return engine.Retry(fmt.Errorf("workflow %s: %w", id, err))
	}
	ch := newChanges(st.runs, st.byID)
	reported, renewed := c.applyReports(ch, st.reports)
	in := c.input(w, t, matrix, ch.view())
	took := time.Now()
	acts := workflow.Schedule(in)
	if c.ScheduleTimed != nil {
		c.ScheduleTimed(len(in.TaskRuns), time.Since(took))
	}
	res, err := c.apply(w, ch, acts)
	if err != nil {
		return engine.Retry(fmt.Errorf("workflow %s: %w", id, err))
	}
	res.reported = reported
	sends, wake, prepared := c.prepare(ctx, &res.next, t, ch)
	// A pass that only extended leases lets the scheduler go no further.
	res.renewedOnly = renewed > 0 && reported == 0 && len(res.touched) == 0 && prepared == 0
	if err := c.write(ctx, w, &res, ch, st.reports); errors.Is(err, ports.ErrConflict) {
		c.uncache(id)
		return engine.RequeueAt(in.Now) // another pass or a writer won: recompute
	} else if err != nil {
		c.uncache(id)
		return engine.Retry(fmt.Errorf("workflow %s: %w", id, err))
	}
	runs, byID := ch.written()
	writes := st.writes + int64(len(ch.batch))
	c.stopJobs(ctx, w, t, res.stop)
	settled, fresh, err := c.deliverAll(ctx, w, sends, func(_ context.Context, id string) (ports.TaskRunRecord, error) {
		if i, ok := byID[id]; ok {
			return runs[i], nil
		}
		return ports.TaskRunRecord{}, fmt.Errorf("task run %s: %w", id, ports.ErrNotFound)
	})
	if err == nil && fresh && !w.Phase.Terminal() {
		if len(settled) > 0 {
			runs = slices.Clone(runs)
			for _, r := range settled {
				runs[byID[r.ID]] = r
			}
		}
		c.keep(id, cachedRuns{writes: writes + int64(len(settled)), runs: runs, byID: byID})
	}
	if errors.Is(err, ports.ErrConflict) {
		return engine.RequeueAt(in.Now)
	}
	if err != nil {
		return engine.Retry(fmt.Errorf("workflow %s: %w", id, err))
	}
	c.log(ctx, w, res, start)
	if w.Phase.Terminal() {
		return c.finished(ctx, w, false)
	}
	wake = earliest(wake, res.wakeAt)
	if res.changed || len(sends) > 0 {
		// What was applied may let the scheduler go further at once.
		return engine.RequeueAt(in.Now)
	}
	if wake.IsZero() {
		return engine.Done() // reports, approvals and cancels wake it
	}
	return engine.RequeueAt(wake)
}

// write stores what a pass changed in one transaction: the TaskRuns of
// the batch (compare-and-swap), the workflow (compare-and-swap), and the
// removal of the inbox's reports the pass applied or found stale. On
// success w is the workflow as stored.
func (c *Controller) write(ctx context.Context, w *ports.WorkflowRecord, res *applied, ch *changes, reports []ports.TaskRunReport) error {
	moved := res.next.Phase != w.Phase || res.next.StartedAt != w.StartedAt
	if len(ch.batch) == 0 && !moved && len(reports) == 0 {
		return nil
	}
	var version int64
	err := c.inTx(ctx, func(ctx context.Context) error {
		if len(ch.batch) > 0 {
			if err := c.Store.TaskRunsSave(ctx, w.ID, ch.batch); err != nil {
				return err
			}
		}
		if moved {
			v, err := c.Store.WorkflowUpdate(ctx, res.next, w.Version)
			if err != nil {
				return err
			}
			version = v
		}
		return c.Store.ReportsDone(ctx, w.ID, seqsOf(reports))
	})
	if err != nil {
		return err
	}
	if moved {
		*w = res.next
		w.Version = version
	}
	res.changed = (len(ch.batch) > 0 && !res.renewedOnly) || moved
	return nil
}

// seqsOf lists the reports' Seqs.
func seqsOf(reports []ports.TaskRunReport) []int64 {
	seqs := make([]int64, len(reports))
	for i := range reports {
		seqs[i] = reports[i].Seq
	}
	return seqs
}

// applyReports applies the inbox's reports, in order, to the runs they
// end or whose lease they extend, and returns how many ended a run and
// how many extended a lease; the others are stale (another attempt's, a
// run no longer running, a lease already longer) and are dropped with
// them.
func (c *Controller) applyReports(ch *changes, reports []ports.TaskRunReport) (ended, renewed int) {
	for i := range reports {
		rep := &reports[i]
		_, _, attempt, ok := parseJobID(rep.JobID)
		r, found := ch.get(rep.TaskRunID)
		if !ok || !found || !reportedOn(&r, rep, attempt) {
			continue
		}
		ch.put(r)
		if rep.Renewal() {
			renewed++
		} else {
			ended++
		}
	}
	return ended, renewed
}

// stored is a workflow as a pass reads it.
type stored struct {
	w       ports.WorkflowRecord
	reports []ports.TaskRunReport
	runs    []ports.TaskRunRecord
	byID    map[string]int // nil: not built yet
	writes  int64          // TaskRunWrites when runs were read
}

// load reads a workflow, its inbox and its TaskRuns in one transaction;
// the TaskRuns come from the controller's copy when the store counted no
// TaskRun write since that copy was made (TaskRunWrites), so a pass over
// a large workflow decodes only what changed.
func (c *Controller) load(ctx context.Context, id string) (stored, error) {
	var st stored
	err := c.inTx(ctx, func(ctx context.Context) error {
		var err error
		if st.w, err = c.Store.WorkflowGet(ctx, id); err != nil {
			return err
		}
		if st.reports, err = c.Store.Reports(ctx, id); err != nil {
			return err
		}
		if st.w.Phase.Terminal() {
			return nil
		}
		// The count first: runs read after it are at least as new, so a
		// copy is never taken for newer than it is.
		if st.writes, err = c.Store.TaskRunWrites(ctx, id); err != nil {
			return err
		}
		if cached, ok := c.cached(id); ok && cached.writes == st.writes {
			st.runs, st.byID = cached.runs, cached.byID
			return nil
		}
		st.runs, err = c.Store.TaskRunsList(ctx, id)
		return err
	})
	return st, err
}

// finished settles a finished workflow: the job of a release-triggered
// one hears how it ended. It runs on every pass that finds the workflow
// finished, so what a crash interrupted is done by the redelivered pass;
// with again (a pass that found it finished) the agents of a cancelled
// workflow's jobs are told again, in case the pass that cancelled them
// did not get to.
func (c *Controller) finished(ctx context.Context, w *ports.WorkflowRecord, again bool) engine.Outcome {
	if again && w.Phase == workflow.WorkflowCancelled {
		if err := c.stopCancelled(ctx, w); err != nil {
			return engine.Retry(err)
		}
	}
	if err := c.reportRelease(ctx, w); err != nil {
		return engine.Retry(err)
	}
	c.forget(w.ID)
	return engine.Done()
}

// stopCancelled tells the agents of a cancelled workflow's cancelled jobs
// to stop them.
func (c *Controller) stopCancelled(ctx context.Context, w *ports.WorkflowRecord) error {
	t, err := c.template(ctx, w.ID)
	if bad := (*badTemplateError)(nil); errors.As(err, &bad) {
		return nil // nothing ran from a template that does not load
	}
	if err != nil {
		return err
	}
	runs, err := c.Store.TaskRunsList(ctx, w.ID)
	if err != nil {
		return err
	}
	var stop []ports.TaskRunRecord
	for _, r := range runs {
		if r.Type == workflow.TaskJob && r.Phase == workflow.TaskCancelled && r.JobID != "" {
			stop = append(stop, r)
		}
	}
	c.stopJobs(ctx, w, t, stop)
	return nil
}

// failWorkflow ends a workflow that cannot run (its pinned template no
// longer loads).
func (c *Controller) failWorkflow(ctx context.Context, w *ports.WorkflowRecord, cause error) engine.Outcome {
	next := *w
	next.Phase, next.Message, next.FinishedAt = workflow.WorkflowFailed, cause.Error(), c.Clock.Now()
	if _, err := c.Store.WorkflowUpdate(ctx, next, w.Version); err != nil {
		return engine.Retry(err)
	}
	return c.finished(ctx, &next, false)
}

func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// log records a pass that changed something at info level, others at
// debug level.
func (c *Controller) log(ctx context.Context, w *ports.WorkflowRecord, res applied, start time.Time) {
	for _, a := range res.actions {
		c.Metrics.Decision(Kind, a)
	}
	lvl := slog.LevelDebug
	if res.changed {
		lvl = slog.LevelInfo
	}
	if !c.Logger.Enabled(ctx, lvl) {
		return
	}
	attrs := []slog.Attr{slog.String("kind", Kind), slog.String("id", w.ID), slog.String("template", w.TemplateName),
		slog.String("phase", string(w.Phase)), slog.Int("created", res.created), slog.Int("dispatched", res.dispatched),
		slog.Int("finished", res.finished), slog.String("reason", res.reason), slog.Duration("duration", time.Since(start))}
	if len(res.touched) > 0 {
		attrs = append(attrs, slog.String("tasks", strings.Join(res.touched, ",")))
	}
	if w.TargetKey != "" {
		attrs = append(attrs, slog.String("target", w.TargetKey))
	}
	if res.reported > 0 {
		attrs = append(attrs, slog.Int("reported", res.reported))
	}
	c.Logger.LogAttrs(ctx, lvl, "workflow.decision", attrs...)
}
